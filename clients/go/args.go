package ratelimit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidArgument is wrapped by every error the package returns for arguments it
// refuses before sending anything (a duration the commands cannot take, REFUND with
// FORCE, an option a command does not have). These are bugs in the calling code, as
// are the server's own argument errors (a *ReplyError).
var ErrInvalidArgument = errors.New("invalid argument")

func invalid(format string, a ...any) error {
	return fmt.Errorf("ratelimit: %w: %s", ErrInvalidArgument, fmt.Sprintf(format, a...))
}

// The largest duration the commands take: 10 years.
const maxDuration = 3650 * 24 * time.Hour

var units = []struct {
	suffix string
	d      time.Duration
}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}}

// FormatDuration writes d as the commands take a duration: a positive whole number of
// the largest unit that divides it (ms, s, m, h, d), so 1500ms is "1500ms", a minute
// "1m" and 36 hours "36h". A duration that is not positive, not a whole number of
// milliseconds, or above 10 years is an error that wraps ErrInvalidArgument.
func FormatDuration(d time.Duration) (string, error) {
	if d <= 0 || d%time.Millisecond != 0 || d > maxDuration {
		return "", invalid("duration %v: the commands take a positive whole number of milliseconds, at most 10 years", d)
	}
	for _, u := range units {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.suffix, nil
		}
	}
	return "", invalid("duration %v", d) // unreachable: every whole ms divides by 1ms
}

// ParseDuration reads a duration as the commands write it: "1500ms", "90" (seconds),
// "90s", "1m", "24h", "7d". For settings read from files and flags.
func ParseDuration(s string) (time.Duration, error) {
	text := strings.TrimSpace(s)
	digits := strings.TrimRightFunc(text, func(r rune) bool { return r < '0' || r > '9' })
	unit := text[len(digits):]
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return 0, invalid("duration %q: a positive integer with an optional unit (ms, s, m, h, d)", s)
	}
	scale := time.Second
	if unit != "" {
		scale = 0
		for _, u := range units {
			if u.suffix == unit {
				scale = u.d
			}
		}
	}
	if scale == 0 || n > int64(maxDuration/scale) {
		return 0, invalid("duration %q: a positive integer with an optional unit (ms, s, m, h, d), at most 10 years", s)
	}
	return time.Duration(n) * scale, nil
}

func durationArg(name string, d time.Duration) (string, error) {
	s, err := FormatDuration(d)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// settle is how a call settles its cost: the command's REFUND, FORCE and UPTO flags, at
// most one per call. A new flag of the same family is one more value here and one more
// case where the flags are written and where the reply is read.
type settle int

const (
	take settle = iota
	refund
	force
	upto
)

// flag is the settle mode's keyword ("" for a plain call).
func (m settle) flag() string {
	return [...]string{"", "REFUND", "FORCE", "UPTO"}[m]
}

// callOptions are the options of one call: the command's own keywords and what the
// typed calls add (a policy's name for the HTTP headers).
type callOptions struct {
	cost    int64
	hasCost bool
	at      time.Time
	hasAt   bool
	mode    settle
	align   bool
	buckets int64
	meta    *string
	delay   time.Duration
	id      *string
	names   []string
	name    string
	errs    []error
	set     map[string]bool
}

// Option is an option of a call: Cost, At, Refund, Force, UpTo, and the keywords some
// commands have (Align, Buckets, Meta, Delay, ID), or a name for the HTTP headers
// (Name, Names). A command that does not take an option refuses the call.
type Option func(*callOptions)

func (o *callOptions) mark(name string) {
	if o.set == nil {
		o.set = map[string]bool{}
	}
	if o.set[name] {
		o.errs = append(o.errs, invalid("%s given twice", name))
	}
	o.set[name] = true
}

// Cost is COST n: how much this request takes (default 1; 0 peeks: the reply of a
// real request, nothing written).
func Cost(n int64) Option {
	return func(o *callOptions) { o.mark("COST"); o.cost, o.hasCost = n, true }
}

// At is AT unix_ms: judge the call at t (whole milliseconds) instead of the server's
// clock.
func At(t time.Time) Option {
	return func(o *callOptions) { o.mark("AT"); o.at, o.hasAt = t, true }
}

// Refund is REFUND: give back `cost` that allowed requests took (never denied).
func Refund() Option {
	return func(o *callOptions) { o.setMode(refund) }
}

// Force is FORCE: record `cost` whether or not it fits (the work is done).
func Force() Option {
	return func(o *callOptions) { o.setMode(force) }
}

// UpTo is UPTO: with Cost(n), take as much of n as fits now. The call is judged and
// written as COST k for the largest k from 1 to n that the limit allows at this moment
// (in RL.ALL: that every rule allows), and refused as COST 1 would be when not even 1
// fits; the result's Granted is k (0 when refused). Without Cost it is COST 1 UPTO.
// Not with Refund, Force or Delay, nor on RL.LEASE and CL.THROTTLE.
func UpTo() Option {
	return func(o *callOptions) { o.setMode(upto) }
}

func (o *callOptions) setMode(m settle) {
	o.mark(m.flag())
	if o.mode != take && o.mode != m {
		o.errs = append(o.errs, invalid("%s and %s cannot be given together", o.mode.flag(), m.flag()))
	}
	o.mode = m
}

// Align is ALIGN (RL.FIXED, RL.MULTI): windows on the Unix epoch's boundaries.
func Align() Option { return func(o *callOptions) { o.mark("ALIGN"); o.align = true } }

// Buckets is BUCKETS n (RL.SLIDING): buckets per window (default 10).
func Buckets(n int64) Option {
	return func(o *callOptions) { o.mark("BUCKETS"); o.buckets = n }
}

// Meta is META value (RL.LOG): recorded with the request (who made it).
func Meta(value string) Option {
	return func(o *callOptions) { o.mark("META"); o.meta = &value }
}

// Delay is DELAY max_delay (RL.GCRA): book a slot up to that far ahead instead of
// refusing; the result's Delay says when to act.
func Delay(max time.Duration) Option {
	return func(o *callOptions) { o.mark("DELAY"); o.delay = max }
}

// ID is ID id (RL.LEASE, and RL.ALL with a LEASE rule): the lease's id.
func ID(id string) Option { return func(o *callOptions) { o.mark("ID"); o.id = &id } }

// Name names the policy of a typed call in the HTTP headers (default: the algorithm,
// "gcra", "fixed"...).
func Name(name string) Option { return func(o *callOptions) { o.mark("NAME"); o.name = name } }

// Names names the keys of RL.MULTI and RL.SLIDING in the HTTP headers ("ip", "user"):
// the policies are then "ip-1m", "user-1h"...
func Names(names ...string) Option {
	return func(o *callOptions) { o.mark("NAMES"); o.names = names }
}

func collect(opts []Option) (*callOptions, error) {
	o := &callOptions{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	if len(o.errs) > 0 {
		return nil, o.errs[0]
	}
	return o, nil
}

// only refuses the options a command does not take (those outside `allowed`).
func (o *callOptions) only(command string, allowed ...string) error {
	for name := range o.set {
		ok := false
		for _, a := range allowed {
			ok = ok || a == name
		}
		if !ok {
			return invalid("%s takes no %s", command, name)
		}
	}
	return nil
}

// tail writes COST (left out when 1), AT and, with flags, REFUND, FORCE or UPTO.
func (o *callOptions) tail(command string, flags bool) ([]string, error) {
	var out []string
	if o.hasCost && o.cost != 1 {
		out = append(out, "COST", itoa(o.cost))
	}
	if o.hasAt {
		out = append(out, "AT", itoa(o.at.UnixMilli()))
	}
	if o.mode != take {
		if !flags {
			return nil, invalid("%s takes no %s", command, o.mode.flag())
		}
		out = append(out, o.mode.flag())
	}
	return out, nil
}

// granted reads UPTO's field into r.Granted: the reply's field after the `fields` the
// call replies without UPTO. A reply without it is an error, not a grant of 0: the
// server (or the twin) did not take UPTO as such.
func (o *callOptions) granted(command string, r *Result, a []any, fields int) error {
	if o.mode != upto {
		return nil
	}
	if len(a) != fields+1 {
		return replyError("%s with UPTO replied %d fields, not %d (the units granted last)", command, len(a), fields+1)
	}
	n, err := toInt(a[fields])
	r.Granted = n
	return err
}
