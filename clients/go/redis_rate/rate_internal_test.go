package redis_rate

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }

var ctx = context.Background()

// clock is a fake clock: every call is judged at its time (RL.GCRA's AT).
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.UnixMilli(1_900_000_000_000)} }
func (c *clock) limiter(rdb rediser) *Limiter {
	l := NewLimiter(rdb)
	l.now = c.now
	return l
}

func client(t *testing.T) *redis.Client {
	s := testserver.Shared(t, "module", testserver.Options{})
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

type want struct {
	allowed, remaining int
	retry, reset       time.Duration
}

func expect(t *testing.T, what string, res *Result, err error, w want) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	got := want{res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter}
	if got != w {
		t.Fatalf("%s: got %+v, want %+v", what, got, w)
	}
}

// redis_rate's own TestAllow, TestAllowN_IncrementZero and TestAllowAtMost, on a fake
// clock: the same Allowed and Remaining, and the times exactly (redis_rate's test can
// only bound them, its script reading the server's clock).
func TestTheRedisRateTestsOnAFakeClock(t *testing.T) {
	c := newClock()
	l := c.limiter(client(t))
	limit := PerSecond(10)
	if limit.String() != "10 req/s (burst 10)" || limit.IsZero() || !(Limit{}).IsZero() {
		t.Fatalf("Limit: %s %v", limit, limit.IsZero())
	}
	const ms = time.Millisecond
	if err := l.Reset(ctx, "test_id"); err != nil {
		t.Fatal(err)
	}
	res, err := l.Allow(ctx, "test_id", limit)
	expect(t, "allow", res, err, want{1, 9, -1, 100 * ms})
	if res.Limit != limit {
		t.Fatalf("Result.Limit is %v", res.Limit)
	}
	if err := l.Reset(ctx, "test_id"); err != nil {
		t.Fatal(err)
	}
	res, err = l.Allow(ctx, "test_id", limit)
	expect(t, "allow after reset", res, err, want{1, 9, -1, 100 * ms})
	res, err = l.AllowN(ctx, "test_id", limit, 2)
	expect(t, "allow 2", res, err, want{2, 7, -1, 300 * ms})
	res, err = l.AllowN(ctx, "test_id", limit, 0)
	expect(t, "peek", res, err, want{0, 7, -1, 300 * ms})
	res, err = l.AllowN(ctx, "test_id", limit, 7)
	expect(t, "allow 7", res, err, want{7, 0, -1, 1000 * ms})
	// More than the burst: never allowed; the wait redis_rate's script computes
	// (99 s in its test), from a peek.
	res, err = l.AllowN(ctx, "test_id", limit, 1000)
	expect(t, "allow 1000", res, err, want{0, 0, 100 * time.Second, 1000 * ms})
	res, err = l.Allow(ctx, "test_id", limit)
	expect(t, "denied", res, err, want{0, 0, 100 * ms, 1000 * ms})

	c.advance(250 * ms) // 2.5 requests come back
	res, err = l.AllowAtMost(ctx, "test_id", limit, 10)
	// Whole requests: 2 taken, the half left (redis_rate's script takes 2.5).
	expect(t, "at most 10", res, err, want{2, 0, -1, 950 * ms})
	c.advance(50 * ms)
	res, err = l.Allow(ctx, "test_id", limit)
	expect(t, "the half that was left, and the half that came back", res, err, want{1, 0, -1, 1000 * ms})
	res, err = l.AllowAtMost(ctx, "test_id", limit, 3)
	expect(t, "at most 3 of none", res, err, want{0, 0, 100 * ms, 1000 * ms})
	res, err = l.AllowAtMost(ctx, "test_id", limit, 0)
	expect(t, "at most 0 of none", res, err, want{0, 0, 100 * ms, 1000 * ms})
	c.advance(2 * time.Second)
	res, err = l.AllowAtMost(ctx, "test_id", limit, 0)
	expect(t, "at most 0 of a full bucket", res, err, want{0, 10, -1, 0})
	res, err = l.AllowAtMost(ctx, "test_id", limit, 1000)
	expect(t, "at most 1000", res, err, want{10, 0, -1, 1000 * ms})
}

// A rate whose interval is not a whole number of microseconds: rounded up, so the
// times are whole milliseconds rounded up from 333 334 µs.
func TestIntervalsAreWholeMicrosecondsRoundedUp(t *testing.T) {
	c := newClock()
	l := c.limiter(client(t))
	limit := Limit{Rate: 3, Burst: 1, Period: time.Second}
	_ = l.Reset(ctx, "thirds")
	res, err := l.Allow(ctx, "thirds", limit)
	expect(t, "first", res, err, want{1, 0, -1, 334 * time.Millisecond})
	c.advance(333 * time.Millisecond)
	res, err = l.Allow(ctx, "thirds", limit)
	expect(t, "333 ms later", res, err, want{0, 0, time.Millisecond, time.Millisecond})
	c.advance(time.Millisecond)
	res, err = l.Allow(ctx, "thirds", limit)
	expect(t, "334 ms later", res, err, want{1, 0, -1, 334 * time.Millisecond})
}

func TestLimitsTheCommandRefuses(t *testing.T) {
	l := NewLimiter(client(t))
	for _, c := range []struct {
		limit Limit
		n     int
		says  string
	}{
		{Limit{Rate: 1, Burst: 0, Period: time.Second}, 1, "at least 1"},
		{Limit{Rate: 0, Burst: 1, Period: time.Second}, 1, "at least 1"},
		{Limit{Rate: 1, Burst: 1, Period: 1500 * time.Microsecond}, 1, "milliseconds"},
		{PerSecond(2_000_000), 1, "period / count must be at least 1 microsecond"},
		{PerSecond(1), -1, "at least 0"},
	} {
		res, err := l.AllowN(ctx, "refused", c.limit, c.n)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v n=%d: %+v %v, want an error saying %q", c.limit, c.n, res, err, c.says)
		}
	}
}

func TestResetDeletesBothStates(t *testing.T) {
	rdb := client(t)
	rdb.Set(ctx, "rate:both", "123.5", time.Minute)
	l := NewLimiter(rdb)
	if _, err := l.Allow(ctx, "both", PerMinute(1)); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "rate:both", "rl:rate:both").Val(); n != 2 {
		t.Fatalf("%d keys before Reset", n)
	}
	if err := l.Reset(ctx, "both"); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "rate:both", "rl:rate:both").Val(); n != 0 {
		t.Fatalf("%d keys after Reset", n)
	}
}

// AllowAtMost is one RL.GCRA call (COST n UPTO) whether all of n fits, some or none,
// counted by the server's own statistics on a server of its own.
func TestAllowAtMostIsOneCommand(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	c := newClock()
	l := c.limiter(rdb)
	limit := Limit{Rate: 10, Burst: 5, Period: time.Second}
	calls := 0
	for _, step := range []struct {
		n, allowed int
		advance    time.Duration
	}{{3, 3, 0}, {3, 2, 0}, {3, 0, 0}, {3, 1, 100 * time.Millisecond}, {9, 5, time.Second}} {
		c.advance(step.advance)
		res, err := l.AllowAtMost(ctx, "one", limit, step.n)
		calls++
		if err != nil || res.Allowed != step.allowed {
			t.Fatalf("call %d, at most %d: %+v %v, want %d allowed", calls, step.n, res, err, step.allowed)
		}
	}
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	// The name as the server writes it: RL.GCRA on Redis 7.0, rl.gcra on Valkey.
	stats = strings.ToLower(stats)
	want := "cmdstat_rl.gcra:calls=" + strconv.Itoa(calls) + ","
	if !strings.Contains(stats, want) || strings.Count(stats, "cmdstat_rl.") != 1 {
		t.Fatalf("want %q in INFO commandstats:\n%s", want, stats)
	}
}
