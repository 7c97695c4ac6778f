package ratelimit

import (
	"fmt"
	"strconv"
	"time"
)

// Quota is one limit a call checked, as the HTTP RateLimit-Policy field describes it.
type Quota struct {
	Name  string
	Limit int64
	// Window is the limit's window (for GCRA: the time the bucket takes to come back
	// in full); 0 when there is none (a lease).
	Window time.Duration
}

// Result is the reply of a limiter command (RL.FIXED, RL.GCRA, RL.MULTI, RL.SLIDING,
// RL.LOG, RL.ALL, RL.LEASE). Its times are the reply's milliseconds (rounded up by
// the server, so a client that waits RetryAfter is never early).
type Result struct {
	// Allowed: the request was allowed and counted; a refused one counted nowhere.
	// The reply's first field ("limited") is its negation.
	Allowed bool
	// Limit is the capacity: requests in a full window, max_burst + 1 for GCRA, slots
	// for a lease.
	Limit int64
	// Remaining is how much more would be allowed right now, after this request.
	Remaining int64
	// RetryAfter is, when refused, the wait until the same request fits (at least
	// 1ms); -1 (a negative duration) when allowed.
	RetryAfter time.Duration
	// ResetAfter is the time until the state is back to full capacity; 0 if it is.
	ResetAfter time.Duration
	// Key is the binding key (RL.MULTI, RL.SLIDING, RL.ALL): the one that decided.
	Key string
	// Window is the binding window (RL.MULTI, RL.SLIDING).
	Window time.Duration
	// Rule is the binding rule's 1-based place among the rules (RL.ALL).
	Rule int
	// Delay is, for RL.GCRA with DELAY, the wait before acting: 0 now, -1 (negative)
	// refused, nothing booked. 0 without DELAY.
	Delay time.Duration
	// LeaseID names the lease taken or renewed (RL.LEASE, RL.ALL with a LEASE rule);
	// "" when refused or peeking.
	LeaseID string
	// Granted is, for a call with UpTo, the units it took: the k of the COST k call it
	// was judged and written as, from 1 to the Cost asked; 0 when refused (RetryAfter
	// is then the wait until 1 fits). 0 without UpTo.
	Granted int64
	// Quotas are the limits the call checked, Quota the one that decided (nil when it
	// cannot be told): what the HTTP headers show.
	Quotas []Quota
	Quota  *Quota
}

// Throttle is CL.THROTTLE's reply as redis-cell gives it: times in whole seconds,
// rounded up; RetryAfter is -1s when allowed (and when the request can never fit).
type Throttle struct {
	Allowed    bool
	Limit      int64
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
}

// Sweep is RL.SWEEP's reply: the next cursor ("0": done; a string, as SCAN's cursors
// can exceed 2^63), the keys scanned and the keys given a TTL.
type Sweep struct {
	Cursor  string
	Scanned int64
	Expired int64
}

func replyError(format string, a ...any) error {
	return fmt.Errorf("ratelimit: unexpected reply: "+format, a...)
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case []byte:
		return strconv.ParseInt(string(x), 10, 64)
	}
	return 0, replyError("%v (%T) is not an integer", v, v)
}

func toText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	}
	return "", false
}

func toArray(v any, min int) ([]any, error) {
	a, ok := v.([]any)
	if !ok || len(a) < min {
		return nil, replyError("%v is not an array of at least %d fields", v, min)
	}
	return a, nil
}

func ms(n int64) time.Duration {
	if n < 0 {
		return time.Duration(n)
	}
	return time.Duration(n) * time.Millisecond
}

// fiveInts reads the five integers a limiter's reply (and CL.THROTTLE's) starts with,
// and gives the reply's fields for what follows them.
func fiveInts(reply any) ([5]int64, []any, error) {
	var n [5]int64
	a, err := toArray(reply, 5)
	if err != nil {
		return n, nil, err
	}
	for i := range n {
		if n[i], err = toInt(a[i]); err != nil {
			return n, nil, err
		}
	}
	return n, a, nil
}

// five reads the five fields every limiter replies.
func five(reply any, quotas []Quota, binding int) (Result, []any, error) {
	n, a, err := fiveInts(reply)
	if err != nil {
		return Result{}, nil, err
	}
	r := Result{
		Allowed:    n[0] == 0,
		Limit:      n[1],
		Remaining:  n[2],
		RetryAfter: ms(n[3]),
		ResetAfter: ms(n[4]),
		Quotas:     quotas,
	}
	if binding >= 0 && binding < len(quotas) {
		r.Quota = &quotas[binding]
	}
	return r, a, nil
}
