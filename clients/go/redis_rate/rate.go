// Package redis_rate is a drop-in for github.com/go-redis/redis_rate/v10 backed by the
// module's RL.GCRA command: the same names and shapes (NewLimiter, Limit, PerSecond,
// PerMinute, PerHour, Allow, AllowN, AllowAtMost, Reset, Result), so that a program
// moves to it by its import path alone:
//
//	import "github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate" // was github.com/go-redis/redis_rate/v10
//
// Each call is one RL.GCRA command where redis_rate runs a Lua script (EVALSHA, and in
// it TIME, GET and SET). Where a reply differs from redis_rate's:
//
//   - RetryAfter and ResetAfter are whole milliseconds, rounded up (redis_rate's are
//     floating-point seconds of the script): a caller that waits them is never early.
//   - The emission interval Period / Rate is whole microseconds, rounded up (a rate of
//     3 per second is one request per 333 334 µs); a rate above a million per second is
//     refused by the server, and so is a Period that is not a whole number of
//     milliseconds, a Burst or Rate below 1, or a negative n: errors, where redis_rate
//     computes something (a Burst of 0 allows nothing there, ever).
//   - AllowAtMost takes whole requests. redis_rate's script also takes the fraction of
//     a request that has come back (with 2.5 requests' room it reports 2 and takes
//     2.5); here it takes 2 and leaves the half for the next request. It is one
//     RL.GCRA call with COST n UPTO, which takes what fits of n in one atomic step.
//   - AllowN with n above Burst can never be allowed; RL.GCRA refuses such a cost, so
//     the reply is made as redis_rate's (Allowed 0, the RetryAfter its script computes)
//     from a COST 0 peek.
//   - The state is RL.GCRA's, under the keys "rl:rate:<key>" (redis_rate keeps a float
//     under "rate:<key>", which RL.GCRA does not read): while processes of both run
//     side by side, each counts its own requests. Reset deletes both keys.
package redis_rate

import (
	"context"
	"fmt"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredisrl"
)

// KeyPrefix is put before every key: RL.GCRA's state of key "k" is "rl:rate:k".
const KeyPrefix = "rl:rate:"

// redisRatePrefix is redis_rate's own prefix, whose keys Reset deletes too.
const redisRatePrefix = "rate:"

// rediser is what NewLimiter takes: any go-redis v9 client (*redis.Client,
// *redis.ClusterClient, *redis.Ring, redis.UniversalClient).
type rediser = goredisrl.Client

// Limit is Rate events per Period, with bursts of Burst.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

func (l Limit) String() string {
	return fmt.Sprintf("%d req/%s (burst %d)", l.Rate, fmtDur(l.Period), l.Burst)
}

// IsZero tells whether the limit is the zero Limit.
func (l Limit) IsZero() bool {
	return l == Limit{}
}

func fmtDur(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// PerSecond is rate events per second, in bursts of rate.
func PerSecond(rate int) Limit { return Limit{Rate: rate, Period: time.Second, Burst: rate} }

// PerMinute is rate events per minute, in bursts of rate.
func PerMinute(rate int) Limit { return Limit{Rate: rate, Period: time.Minute, Burst: rate} }

// PerHour is rate events per hour, in bursts of rate.
func PerHour(rate int) Limit { return Limit{Rate: rate, Period: time.Hour, Burst: rate} }

// Limiter controls how frequently events are allowed to happen.
type Limiter struct {
	rl *ratelimit.Limiter
	// now, when set, is the time of every call (RL.GCRA's AT): tests' fake clock.
	now func() time.Time
}

// NewLimiter returns a new Limiter.
func NewLimiter(rdb rediser) *Limiter {
	return &Limiter{rl: ratelimit.New(goredisrl.New(rdb))}
}

// Result is what a call decided.
type Result struct {
	// Limit is the limit that was used to obtain this result.
	Limit Limit

	// Allowed is the number of events that may happen at time now.
	Allowed int

	// Remaining is the maximum number of requests that could be permitted
	// instantaneously for this key given the current state.
	Remaining int

	// RetryAfter is the time until the next request will be permitted. It is -1
	// unless the rate limit has been exceeded.
	RetryAfter time.Duration

	// ResetAfter is the time until the limiter returns to its initial state for a
	// given key: until Limit and Remaining will be equal.
	ResetAfter time.Duration
}

// Allow is a shortcut for AllowN(ctx, key, limit, 1).
func (l Limiter) Allow(ctx context.Context, key string, limit Limit) (*Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// gcra is the limit as RL.GCRA takes it, and its emission interval; n is the call's.
func gcra(limit Limit, n int) (ratelimit.GCRA, time.Duration, error) {
	if n < 0 {
		return ratelimit.GCRA{}, 0, fmt.Errorf("redis_rate: n is %d: it must be at least 0", n)
	}
	if limit.Rate < 1 || limit.Burst < 1 {
		return ratelimit.GCRA{}, 0, fmt.Errorf("redis_rate: %v: Rate and Burst must be at least 1", limit)
	}
	if _, err := ratelimit.FormatDuration(limit.Period); err != nil {
		return ratelimit.GCRA{}, 0, fmt.Errorf("redis_rate: %v: %w", limit, err)
	}
	periodUs := int64(limit.Period / time.Microsecond)
	interval := time.Duration((periodUs+int64(limit.Rate)-1)/int64(limit.Rate)) * time.Microsecond
	return ratelimit.GCRA{MaxBurst: int64(limit.Burst) - 1, Count: int64(limit.Rate), Period: limit.Period}, interval, nil
}

func (l Limiter) check(ctx context.Context, key string, p ratelimit.GCRA, cost int, more ...ratelimit.Option) (ratelimit.Result, error) {
	opts := append([]ratelimit.Option{ratelimit.Cost(int64(cost))}, more...)
	if l.now != nil {
		opts = append(opts, ratelimit.At(l.now()))
	}
	return l.rl.Check(ctx, p, []string{KeyPrefix + key}, opts...)
}

func result(limit Limit, r ratelimit.Result, allowed int) *Result {
	out := &Result{Limit: limit, ResetAfter: r.ResetAfter, RetryAfter: -1}
	if r.Allowed {
		out.Allowed, out.Remaining = allowed, int(r.Remaining)
	} else {
		out.RetryAfter = r.RetryAfter
	}
	return out
}

// AllowN reports whether n events may happen at time now.
func (l Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	p, interval, err := gcra(limit, n)
	if err != nil {
		return nil, err
	}
	if n > limit.Burst {
		// More than the burst never fits: redis_rate's reply, from a peek.
		r, err := l.check(ctx, key, p, 0)
		if err != nil {
			return nil, err
		}
		wait := r.ResetAfter + time.Duration(n-limit.Burst)*interval
		return &Result{Limit: limit, RetryAfter: ceilMs(wait), ResetAfter: r.ResetAfter}, nil
	}
	r, err := l.check(ctx, key, p, n)
	if err != nil {
		return nil, err
	}
	return result(limit, r, n), nil
}

// AllowAtMost reports whether at most n events may happen at time now. It returns
// number of allowed events that is less than or equal to n.
func (l Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	p, interval, err := gcra(limit, n)
	if err != nil {
		return nil, err
	}
	want := min(n, limit.Burst)
	if want == 0 {
		r, err := l.check(ctx, key, p, 0)
		if err != nil || r.Remaining >= 1 {
			return peeked(limit, r), err
		}
		// Nothing fits: the wait until one does, as redis_rate's reply.
		return &Result{Limit: limit, RetryAfter: ceilMs(r.ResetAfter - time.Duration(limit.Burst-1)*interval), ResetAfter: r.ResetAfter}, nil
	}
	// One atomic RL.GCRA ... COST want UPTO: what fits of want now, or refused as one
	// request would be (RetryAfter: until one fits).
	r, err := l.check(ctx, key, p, want, ratelimit.UpTo())
	if err != nil {
		return nil, err
	}
	if r.Allowed {
		return result(limit, r, int(r.Granted)), nil
	}
	return &Result{Limit: limit, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}, nil
}

func peeked(limit Limit, r ratelimit.Result) *Result {
	return &Result{Limit: limit, Remaining: int(r.Remaining), RetryAfter: -1, ResetAfter: r.ResetAfter}
}

// ceilMs rounds a wait up to the millisecond, as the command's own times are.
func ceilMs(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}

// Reset gets a key and reset all limitations and previous usages: it deletes the
// key's RL.GCRA state, and the state redis_rate itself kept for it.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	for _, k := range []string{KeyPrefix + key, redisRatePrefix + key} {
		if _, err := l.rl.Conn().Do(ctx, ratelimit.Command{Name: "DEL", Keys: []string{k}}); err != nil {
			return err
		}
	}
	return nil
}
