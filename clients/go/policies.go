package ratelimit

import "time"

// Policy is a limit without its keys: what the middleware applies to every request,
// and a rule of one RL.ALL call. The policies are Fixed, GCRA, Multi, Sliding, Log,
// Lease, Ban (inside All only) and All.
type Policy interface {
	// PolicyName is the policy's name in the HTTP headers and in the middleware's keys.
	PolicyName() string
	// Quotas are the limits a call on nkeys keys checks.
	Quotas(nkeys int) []Quota
	// HoldsLease tells whether an allowed call holds a lease to release afterwards.
	HoldsLease() bool
	call(keys []string, o *callOptions) (*call, error)
	rule(position int) ([]string, error)
	options() []string
}

// call is one command call: the command, its keys and other arguments, its twin (the
// Functions library's function and the script's name; "" for none) and its reader.
type call struct {
	command string
	numkeys bool     // numkeys before the keys in the native call (RL.MULTI, RL.SLIDING, RL.ALL)
	pre     []string // arguments before the keys (RL.BULKEXPIRE's seconds)
	keys    []string
	args    []string
	twin    string
	upto    bool // the call has UPTO (a refusal of it is said as such)
	parse   func(reply any) (any, error)
}

// native is the command as the module takes it.
func (c *call) native() Command {
	head := c.pre
	if c.numkeys {
		head = append([]string{itoa(int64(len(c.keys)))}, c.pre...)
	}
	return Command{Name: c.command, Head: head, Keys: c.keys, Args: c.args}
}

// twinArgs are the twin's ARGV: the same arguments but the keys (and numkeys).
func (c *call) twinArgs() []string { return append(append([]string{}, c.pre...), c.args...) }

func oneKey(command string, keys []string) (string, error) {
	if len(keys) != 1 {
		return "", invalid("%s takes one key, not %d", command, len(keys))
	}
	return keys[0], nil
}

func orName(name, algorithm string) string {
	if name == "" {
		return algorithm
	}
	return name
}

var rateOptions = []string{"COST", "AT", "REFUND", "FORCE", "UPTO"}

// single makes the call of a one-key limiter whose reply is the five fields, then what
// rest reads (nil: UPTO's field, when the call has UPTO).
func single(command, twin string, keys []string, args []string, o *callOptions, quotas []Quota, rest func(r *Result, a []any) error) (*call, error) {
	key, err := oneKey(command, keys)
	if err != nil {
		return nil, err
	}
	tail, err := o.tail(command, true)
	if err != nil {
		return nil, err
	}
	if rest == nil {
		rest = func(r *Result, a []any) error { return o.granted(command, r, a, 5) }
	}
	return &call{
		command: command, keys: []string{key}, args: append(args, tail...), twin: twin, upto: o.mode == upto,
		parse: func(reply any) (any, error) {
			r, a, err := five(reply, quotas, 0)
			if err != nil {
				return nil, err
			}
			return r, rest(&r, a)
		},
	}, nil
}

// Fixed is RL.FIXED: at most Limit per Window, a window starting at the first request
// (on the epoch's boundaries with Align).
type Fixed struct {
	Limit  int64
	Window time.Duration
	Align  bool
	Name   string // default "fixed"
}

func (p Fixed) PolicyName() string { return orName(p.Name, "fixed") }
func (p Fixed) HoldsLease() bool   { return false }
func (p Fixed) options() []string  { return rateOptions }
func (p Fixed) Quotas(int) []Quota {
	return []Quota{{Name: p.PolicyName(), Limit: p.Limit, Window: p.Window}}
}

func (p Fixed) tail() ([]string, error) {
	w, err := durationArg("window", p.Window)
	if err != nil {
		return nil, err
	}
	out := []string{itoa(p.Limit), w}
	if p.Align {
		out = append(out, "ALIGN")
	}
	return out, nil
}

func (p Fixed) call(keys []string, o *callOptions) (*call, error) {
	args, err := p.tail()
	if err != nil {
		return nil, err
	}
	return single("RL.FIXED", "rl_fixed", keys, args, o, p.Quotas(1), nil)
}

func (p Fixed) rule(i int) ([]string, error) {
	args, err := p.tail()
	return append([]string{"FIXED", itoa(int64(i))}, args...), err
}

// GCRA is RL.GCRA: Count requests per Period, evenly spaced, plus MaxBurst at once
// (a capacity of MaxBurst + 1). With Delay, a request that fits within Delay is booked
// and the result's Delay says when to act.
type GCRA struct {
	MaxBurst int64
	Count    int64
	Period   time.Duration
	Delay    time.Duration // 0: no DELAY
	Name     string        // default "gcra"
}

func (p GCRA) PolicyName() string { return orName(p.Name, "gcra") }
func (p GCRA) HoldsLease() bool   { return false }
func (p GCRA) options() []string  { return rateOptions }

// Quotas: the capacity, and the time the bucket takes to come back in full (the burst
// window, T * capacity with T = Period / Count rounded up to the microsecond).
func (p GCRA) Quotas(int) []Quota {
	q := Quota{Name: p.PolicyName(), Limit: p.MaxBurst + 1}
	if p.Count > 0 && p.MaxBurst >= 0 && p.Period > 0 {
		periodUs := int64(p.Period / time.Microsecond)
		intervalUs := (periodUs + p.Count - 1) / p.Count
		windowUs := intervalUs * (p.MaxBurst + 1)
		q.Window = time.Duration((windowUs+999)/1000) * time.Millisecond
	}
	return []Quota{q}
}

func (p GCRA) tail() ([]string, error) {
	period, err := durationArg("period", p.Period)
	if err != nil {
		return nil, err
	}
	return []string{itoa(p.MaxBurst), itoa(p.Count), period}, nil
}

func (p GCRA) call(keys []string, o *callOptions) (*call, error) {
	args, err := p.tail()
	if err != nil {
		return nil, err
	}
	if p.Delay == 0 {
		return single("RL.GCRA", "rl_gcra", keys, args, o, p.Quotas(1), nil)
	}
	if o.mode != take {
		return nil, invalid("RL.GCRA takes no %s with DELAY", o.mode.flag())
	}
	delay, err := durationArg("delay", p.Delay)
	if err != nil {
		return nil, err
	}
	// The reply's sixth field, when there, is the delay.
	return single("RL.GCRA", "rl_gcra", keys, append(args, "DELAY", delay), o, p.Quotas(1), func(r *Result, a []any) error {
		if len(a) <= 5 {
			return nil
		}
		d, err := toInt(a[5])
		r.Delay = ms(d)
		return err
	})
}

func (p GCRA) rule(i int) ([]string, error) {
	if p.Delay != 0 {
		return nil, invalid("RL.ALL takes no DELAY in a GCRA rule")
	}
	args, err := p.tail()
	return append([]string{"GCRA", itoa(int64(i))}, args...), err
}

// Log is RL.LOG: exactly at most Limit in any Window, each request recorded with Meta
// (who made it).
type Log struct {
	Limit  int64
	Window time.Duration
	Meta   string // META; "" sends none (the command's default, an empty value)
	Name   string // default "log"
}

func (p Log) PolicyName() string { return orName(p.Name, "log") }
func (p Log) HoldsLease() bool   { return false }
func (p Log) options() []string  { return append([]string{"META"}, rateOptions...) }
func (p Log) Quotas(int) []Quota {
	return []Quota{{Name: p.PolicyName(), Limit: p.Limit, Window: p.Window}}
}

func (p Log) tail(meta string) ([]string, error) {
	w, err := durationArg("window", p.Window)
	if err != nil {
		return nil, err
	}
	out := []string{itoa(p.Limit), w}
	if meta != "" {
		out = append(out, "META", meta)
	}
	return out, nil
}

func (p Log) call(keys []string, o *callOptions) (*call, error) {
	meta := p.Meta
	if o.meta != nil {
		meta = *o.meta
	}
	args, err := p.tail(meta)
	if err != nil {
		return nil, err
	}
	return single("RL.LOG", "rl_log", keys, args, o, p.Quotas(1), nil)
}

func (p Log) rule(i int) ([]string, error) {
	args, err := p.tail(p.Meta)
	return append([]string{"LOG", itoa(int64(i))}, args...), err
}

// Window is a window and its limit, for RL.MULTI and RL.SLIDING: {time.Minute, 5}.
type Window struct {
	Window time.Duration
	Limit  int64
}

// windows is what RL.MULTI and RL.SLIDING share: every key against every window, all
// or nothing, and a reply that names the binding key and window.
type windows struct {
	limits []Window
	names  []string
	name   string
}

func (w windows) label(i, nkeys int) string {
	if i < len(w.names) {
		return w.names[i]
	}
	if nkeys == 1 {
		return w.name
	}
	return w.name + itoa(int64(i+1))
}

func (w windows) quotas(nkeys int) []Quota {
	var out []Quota
	for i := 0; i < nkeys; i++ {
		for _, l := range w.limits {
			label, err := FormatDuration(l.Window)
			if err != nil {
				label = l.Window.String()
			}
			out = append(out, Quota{Name: w.label(i, nkeys) + "-" + label, Limit: l.Limit, Window: l.Window})
		}
	}
	return out
}

func (w windows) limitArgs() ([]string, error) {
	if len(w.limits) == 0 {
		return nil, invalid("at least one window and limit is needed")
	}
	var out []string
	for _, l := range w.limits {
		d, err := durationArg("window", l.Window)
		if err != nil {
			return nil, err
		}
		out = append(out, "LIMIT", d, itoa(l.Limit))
	}
	return out, nil
}

func (w windows) call(command, twin string, extra []string, keys []string, o *callOptions) (*call, error) {
	if len(keys) == 0 {
		return nil, invalid("%s needs at least one key", command)
	}
	args, err := w.limitArgs()
	if err != nil {
		return nil, err
	}
	tail, err := o.tail(command, true)
	if err != nil {
		return nil, err
	}
	quotas := w.quotas(len(keys))
	own := append([]string{}, keys...)
	return &call{
		command: command, numkeys: true, keys: own, args: append(append(args, extra...), tail...), twin: twin, upto: o.mode == upto,
		parse: func(reply any) (any, error) {
			r, a, err := five(reply, quotas, -1)
			if err != nil {
				return nil, err
			}
			if len(a) < 7 {
				return nil, replyError("%s replied %d fields, not 7", command, len(a))
			}
			r.Key, _ = toText(a[5])
			windowMs, err := toInt(a[6])
			if err != nil {
				return nil, err
			}
			r.Window = ms(windowMs)
			if err := o.granted(command, &r, a, 7); err != nil {
				return nil, err
			}
			for ki, k := range own {
				for wi, l := range w.limits {
					if k == r.Key && l.Window == r.Window && r.Quota == nil {
						r.Quota = &quotas[ki*len(w.limits)+wi]
					}
				}
			}
			return r, nil
		},
	}, nil
}

func (w windows) rule(kind string, i int, extra []string) ([]string, error) {
	args, err := w.limitArgs()
	return append(append([]string{kind, itoa(int64(i))}, args...), extra...), err
}

// Multi is RL.MULTI: every key against every window (fixed windows), all or nothing.
// Names name the keys in the HTTP headers ("ip", "user").
type Multi struct {
	Limits []Window
	Align  bool
	Names  []string
	Name   string // default "multi"
}

func (p Multi) PolicyName() string { return orName(p.Name, "multi") }
func (p Multi) HoldsLease() bool   { return false }
func (p Multi) options() []string  { return rateOptions }
func (p Multi) w() windows         { return windows{p.Limits, p.Names, p.PolicyName()} }
func (p Multi) Quotas(n int) []Quota {
	return p.w().quotas(n)
}

func (p Multi) extra() []string {
	if p.Align {
		return []string{"ALIGN"}
	}
	return nil
}

func (p Multi) call(keys []string, o *callOptions) (*call, error) {
	return p.w().call("RL.MULTI", "rl_multi", p.extra(), keys, o)
}

func (p Multi) rule(i int) ([]string, error) { return p.w().rule("MULTI", i, p.extra()) }

// Sliding is RL.SLIDING: the same with sliding windows of Buckets buckets (0: the
// command's default, 10).
type Sliding struct {
	Limits  []Window
	Buckets int64
	Names   []string
	Name    string // default "sliding"
}

func (p Sliding) PolicyName() string { return orName(p.Name, "sliding") }
func (p Sliding) HoldsLease() bool   { return false }
func (p Sliding) options() []string  { return rateOptions }
func (p Sliding) w() windows         { return windows{p.Limits, p.Names, p.PolicyName()} }
func (p Sliding) Quotas(n int) []Quota {
	return p.w().quotas(n)
}

func (p Sliding) extra() []string {
	if p.Buckets != 0 {
		return []string{"BUCKETS", itoa(p.Buckets)}
	}
	return nil
}

func (p Sliding) call(keys []string, o *callOptions) (*call, error) {
	return p.w().call("RL.SLIDING", "rl_sliding", p.extra(), keys, o)
}

func (p Sliding) rule(i int) ([]string, error) { return p.w().rule("SLIDING", i, p.extra()) }

// Lease is RL.LEASE: at most Limit requests in flight at once, each holding a lease
// until RL.RELEASE or until TTL has passed since it was taken or renewed.
type Lease struct {
	Limit int64
	TTL   time.Duration
	Name  string // default "lease"
}

func (p Lease) PolicyName() string { return orName(p.Name, "lease") }
func (p Lease) HoldsLease() bool   { return true }
func (p Lease) options() []string  { return []string{"ID", "COST", "AT"} }
func (p Lease) Quotas(int) []Quota { return []Quota{{Name: p.PolicyName(), Limit: p.Limit}} }

func (p Lease) call(keys []string, o *callOptions) (*call, error) {
	key, err := oneKey("RL.LEASE", keys)
	if err != nil {
		return nil, err
	}
	ttl, err := durationArg("ttl", p.TTL)
	if err != nil {
		return nil, err
	}
	args := []string{itoa(p.Limit), ttl}
	if o.id != nil {
		args = append(args, "ID", *o.id)
	}
	tail, err := o.tail("RL.LEASE", false)
	if err != nil {
		return nil, err
	}
	quotas := p.Quotas(1)
	return &call{
		command: "RL.LEASE", keys: []string{key}, args: append(args, tail...), twin: "rl_lease",
		parse: func(reply any) (any, error) {
			r, a, err := five(reply, quotas, 0)
			if err == nil && len(a) > 5 {
				r.LeaseID, _ = toText(a[5])
			}
			return r, err
		},
	}, nil
}

func (p Lease) rule(i int) ([]string, error) {
	ttl, err := durationArg("ttl", p.TTL)
	return []string{"LEASE", itoa(int64(i)), itoa(p.Limit), ttl}, err
}

// Ban is RL.ALL's BAN rule, a penalty box: after Strikes refused calls within Window,
// every call naming it is refused for Duration. Only inside All.
type Ban struct {
	Strikes  int64
	Window   time.Duration
	Duration time.Duration
	Name     string // default "ban"
}

func (p Ban) PolicyName() string { return orName(p.Name, "ban") }
func (p Ban) HoldsLease() bool   { return false }
func (p Ban) options() []string  { return nil }
func (p Ban) Quotas(int) []Quota {
	return []Quota{{Name: p.PolicyName(), Limit: p.Strikes, Window: p.Duration}}
}

func (p Ban) call([]string, *callOptions) (*call, error) {
	return nil, invalid("a Ban rule is only used inside All (RL.ALL)")
}

func (p Ban) rule(i int) ([]string, error) {
	w, err := durationArg("window", p.Window)
	if err != nil {
		return nil, err
	}
	d, err := durationArg("duration", p.Duration)
	return []string{"BAN", itoa(int64(i)), itoa(p.Strikes), w, d}, err
}

// All is RL.ALL: one key per rule, each judged by its own algorithm, all or nothing.
// The result's Rule and Key name the rule that decided.
type All struct {
	Rules []Policy
	Name  string // default "all"
}

func (p All) PolicyName() string { return orName(p.Name, "all") }
func (p All) options() []string  { return []string{"COST", "AT", "ID", "REFUND", "FORCE", "UPTO"} }

func (p All) HoldsLease() bool {
	for _, r := range p.Rules {
		if r.HoldsLease() {
			return true
		}
	}
	return false
}

func (p All) Quotas(int) []Quota {
	var out []Quota
	for _, r := range p.Rules {
		out = append(out, r.Quotas(1)...)
	}
	return out
}

func (p All) call(keys []string, o *callOptions) (*call, error) {
	if len(p.Rules) == 0 {
		return nil, invalid("RL.ALL needs at least one rule")
	}
	if len(keys) != len(p.Rules) {
		return nil, invalid("RL.ALL takes one key per rule: %d rules, %d keys", len(p.Rules), len(keys))
	}
	// quotas are the rules' quotas one after the other: rule i's are
	// quotas[starts[i]:starts[i+1]].
	var args []string
	var quotas []Quota
	starts := make([]int, len(p.Rules)+1)
	for i, r := range p.Rules {
		rule, err := r.rule(i + 1)
		if err != nil {
			return nil, err
		}
		args = append(args, rule...)
		starts[i] = len(quotas)
		quotas = append(quotas, r.Quotas(1)...)
	}
	starts[len(p.Rules)] = len(quotas)
	if o.id != nil {
		args = append(args, "ID", *o.id)
	}
	tail, err := o.tail("RL.ALL", true)
	if err != nil {
		return nil, err
	}
	own := append([]string{}, keys...)
	withLease := p.HoldsLease()
	return &call{
		command: "RL.ALL", numkeys: true, keys: own, args: append(args, tail...), twin: "rl_all", upto: o.mode == upto,
		parse: func(reply any) (any, error) {
			r, a, err := five(reply, quotas, -1)
			if err != nil {
				return nil, err
			}
			if len(a) < 7 {
				return nil, replyError("RL.ALL replied %d fields, not 7", len(a))
			}
			place, err := toInt(a[5])
			if err != nil {
				return nil, err
			}
			r.Rule = int(place)
			r.Key, _ = toText(a[6])
			if place >= 1 && int(place) <= len(p.Rules) {
				j := 0
				for k, q := range quotas[starts[place-1]:starts[place]] {
					if q.Limit == r.Limit {
						j = k
						break
					}
				}
				r.Quota = &quotas[starts[place-1]+j]
			}
			fields := 7
			if withLease && len(a) > 7 {
				r.LeaseID, _ = toText(a[7])
				fields = 8
			}
			return r, o.granted("RL.ALL", &r, a, fields)
		},
	}, nil
}

func (p All) rule(int) ([]string, error) { return nil, invalid("RL.ALL rules cannot nest") }
