package ratelimit_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredisrl"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rueidisrl"
)

func TestMain(m *testing.M) { testserver.Main(m) }

var ctx = context.Background()

// t0 is the AT of the calls: their replies do not depend on the clock.
var t0 = time.UnixMilli(1_900_000_000_000)

func moduleServer(t testing.TB) *testserver.Server {
	return testserver.Shared(t, "module", testserver.Options{})
}

func bareServer(t testing.TB) *testserver.Server {
	return testserver.Shared(t, "bare", testserver.Options{NoModule: true})
}

func goRedis(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func goRedisCluster(t testing.TB, addrs []string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Close() })
	return c
}

func rueidisClient(t testing.TB, addrs ...string) rueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A way to reach the commands: a client, a server or Cluster, the module or the twins.
type variant struct {
	name    string
	limiter func(t *testing.T) *ratelimit.Limiter
	// del deletes keys (through a client of the same server).
	del func(t *testing.T, keys ...string)
}

func goRedisDel(c redis.Cmdable) func(t *testing.T, keys ...string) {
	return func(t *testing.T, keys ...string) {
		for _, k := range keys {
			if err := c.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func variants() []variant {
	return []variant{
		{name: "go-redis Client", limiter: func(t *testing.T) *ratelimit.Limiter {
			return ratelimit.New(goredisrl.New(goRedis(t, moduleServer(t).Addr)))
		}},
		{name: "go-redis UniversalClient", limiter: func(t *testing.T) *ratelimit.Limiter {
			u := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{moduleServer(t).Addr}})
			t.Cleanup(func() { u.Close() })
			return ratelimit.New(goredisrl.New(u))
		}},
		{name: "go-redis ClusterClient", limiter: func(t *testing.T) *ratelimit.Limiter {
			c := testserver.SharedCluster(t, "module", testserver.Options{})
			return ratelimit.New(goredisrl.New(goRedisCluster(t, c.Addrs())))
		}},
		{name: "rueidis", limiter: func(t *testing.T) *ratelimit.Limiter {
			return ratelimit.New(rueidisrl.New(rueidisClient(t, moduleServer(t).Addr)))
		}},
		{name: "rueidis Cluster", limiter: func(t *testing.T) *ratelimit.Limiter {
			c := testserver.SharedCluster(t, "module", testserver.Options{})
			return ratelimit.New(rueidisrl.New(rueidisClient(t, c.Addrs()...)))
		}},
		{name: "twins, functions (go-redis)", limiter: func(t *testing.T) *ratelimit.Limiter {
			return ratelimit.New(goredisrl.New(goRedis(t, bareServer(t).Addr)), ratelimit.WithTwins(ratelimit.TwinsAlways))
		}},
		{name: "twins, scripts (rueidis, FUNCTION refused)", limiter: func(t *testing.T) *ratelimit.Limiter {
			return ratelimit.New(rueidisrl.New(noFunctionClient(t)), ratelimit.WithTwins(ratelimit.TwinsAlways))
		}},
		{name: "twins, functions (go-redis ClusterClient)", limiter: func(t *testing.T) *ratelimit.Limiter {
			c := testserver.SharedCluster(t, "bare", testserver.Options{NoModule: true})
			return ratelimit.New(goredisrl.New(goRedisCluster(t, c.Addrs())), ratelimit.WithTwins(ratelimit.TwinsAlways))
		}},
		{name: "twins, functions (rueidis Cluster)", limiter: func(t *testing.T) *ratelimit.Limiter {
			c := testserver.SharedCluster(t, "bare", testserver.Options{NoModule: true})
			return ratelimit.New(rueidisrl.New(rueidisClient(t, c.Addrs()...)), ratelimit.WithTwins(ratelimit.TwinsAlways))
		}},
	}
}

// noFunctionClient is a rueidis client of the server without the module, as a user
// that may not run FUNCTION (as on services that refuse it): the twins run as scripts.
func noFunctionClient(t *testing.T) rueidis.Client {
	s := bareServer(t)
	admin := goRedis(t, s.Addr)
	if err := admin.Do(ctx, "ACL", "SETUSER", "nofunction", "on", ">secret", "~*", "+@all", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, Username: "nofunction", Password: "secret", DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// describe writes a result as a line, its binding quota by name.
func describe(r ratelimit.Result) string {
	quota := "-"
	if r.Quota != nil {
		quota = r.Quota.Name
	}
	return fmt.Sprintf("allowed=%v limit=%d remaining=%d retry=%v reset=%v key=%s window=%v rule=%d delay=%v lease=%s quota=%s",
		r.Allowed, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter, r.Key, r.Window, r.Rule, r.Delay, r.LeaseID, quota)
}

// transcript runs the same calls of every command on one variant and writes what each
// replied, the variant's hash tag replaced by {T}.
func transcript(t *testing.T, v variant, rl *ratelimit.Limiter) []string {
	tag := "{" + strings.NewReplacer(" ", "", ",", "", "(", "", ")", "").Replace(v.name) + "}"
	k := func(name string) string { return tag + ":" + name }
	var out []string
	record := func(what string, r ratelimit.Result, err error) {
		line := what + ": "
		if err != nil {
			line += "error " + err.Error()
		} else {
			line += describe(r)
		}
		out = append(out, strings.ReplaceAll(line, tag, "{T}"))
	}
	at := ratelimit.At(t0)
	later := func(d time.Duration) ratelimit.Option { return ratelimit.At(t0.Add(d)) }
	keys := []string{k("fixed"), k("gcra"), k("delay"), k("ip"), k("user"), k("sliding"), k("log"),
		k("all:user"), k("all:day"), k("lease"), k("throttle"), k("bulk1"), k("bulk2"), k("settle"),
		k("ban:rate"), k("ban:box"), k("all:lease")}
	del := func(keys ...string) {
		for _, key := range keys {
			if _, err := rl.Conn().Do(ctx, ratelimit.Command{Name: "DEL", Keys: []string{key}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	del(keys...)

	for i := 0; i < 3; i++ {
		r, err := rl.Fixed(ctx, k("fixed"), 2, time.Minute, at)
		record("fixed", r, err)
	}
	r, err := rl.Fixed(ctx, k("fixed"), 2, time.Minute, ratelimit.Cost(0), later(30*time.Second))
	record("fixed peek", r, err)

	r, err = rl.Fixed(ctx, k("settle"), 10, time.Hour, ratelimit.Cost(8), at)
	record("settle take 8", r, err)
	r, err = rl.Fixed(ctx, k("settle"), 10, time.Hour, ratelimit.Cost(3), ratelimit.Refund(), at)
	record("settle refund 3", r, err)
	r, err = rl.Fixed(ctx, k("settle"), 10, time.Hour, ratelimit.Cost(9), ratelimit.Force(), at)
	record("settle force 9", r, err)

	r, err = rl.GCRA(ctx, k("gcra"), 15, 30, time.Minute, at)
	record("gcra", r, err)
	r, err = rl.GCRA(ctx, k("gcra"), 15, 30, time.Minute, ratelimit.Cost(15), at)
	record("gcra cost 15", r, err)
	r, err = rl.GCRA(ctx, k("gcra"), 15, 30, time.Minute, at)
	record("gcra denied", r, err)
	r, err = rl.GCRA(ctx, k("gcra"), 15, 30, time.Minute, later(10*time.Second))
	record("gcra 10 s later", r, err)

	r, err = rl.GCRA(ctx, k("delay"), 15, 30, time.Minute, ratelimit.Cost(16), ratelimit.Delay(10*time.Second), at)
	record("delay cost 16", r, err)
	for i := 0; i < 6; i++ {
		r, err = rl.GCRA(ctx, k("delay"), 15, 30, time.Minute, ratelimit.Delay(10*time.Second), at)
		record("delay", r, err)
	}

	limits := []ratelimit.Window{{Window: time.Minute, Limit: 2}, {Window: time.Hour, Limit: 3}}
	for i := 0; i < 3; i++ {
		r, err = rl.Multi(ctx, []string{k("ip"), k("user")}, limits, ratelimit.Names("ip", "user"), at)
		record("multi", r, err)
	}
	r, err = rl.Multi(ctx, []string{k("user")}, limits, later(2*time.Minute))
	record("multi user", r, err)

	for i := 0; i < 3; i++ {
		r, err = rl.Sliding(ctx, []string{k("sliding")}, []ratelimit.Window{{Window: 10 * time.Second, Limit: 2}}, ratelimit.Buckets(5), later(time.Duration(i)*time.Second))
		record("sliding", r, err)
	}

	for i, who := range []string{"ann", "bob", "eve"} {
		r, err = rl.Log(ctx, k("log"), 2, time.Minute, ratelimit.Meta(who), later(time.Duration(i)*time.Second))
		record("log "+who, r, err)
	}

	rules := []ratelimit.Rule{
		{Key: k("all:user"), Policy: ratelimit.GCRA{MaxBurst: 2, Count: 1, Period: time.Hour, Name: "user"}},
		{Key: k("all:day"), Policy: ratelimit.Fixed{Limit: 5, Window: 24 * time.Hour, Name: "account"}},
	}
	for i := 0; i < 4; i++ {
		r, err = rl.All(ctx, rules, at)
		record("all", r, err)
	}
	banned := []ratelimit.Rule{
		{Key: k("ban:rate"), Policy: ratelimit.Fixed{Limit: 1, Window: time.Minute}},
		{Key: k("ban:box"), Policy: ratelimit.Ban{Strikes: 2, Window: 10 * time.Minute, Duration: time.Hour}},
		{Key: k("all:lease"), Policy: ratelimit.Lease{Limit: 2, TTL: time.Minute}},
	}
	for i := 0; i < 4; i++ {
		r, err = rl.All(ctx, banned, ratelimit.ID("job-1"), later(time.Duration(i)*time.Second))
		record("all ban lease", r, err)
	}

	r, err = rl.Lease(ctx, k("lease"), 1, time.Minute, ratelimit.ID("a"), at)
	record("lease a", r, err)
	r, err = rl.Lease(ctx, k("lease"), 1, time.Minute, ratelimit.ID("b"), later(time.Second))
	record("lease b", r, err)
	for _, id := range []string{"a", "a"} {
		ok, err := rl.Release(ctx, k("lease"), id, later(2*time.Second))
		out = append(out, fmt.Sprintf("release %s: %v %v", id, ok, err))
	}
	r, err = rl.Lease(ctx, k("lease"), 1, time.Minute, later(3*time.Second))
	out = append(out, fmt.Sprintf("lease without id: allowed=%v id made=%v %v", r.Allowed, r.LeaseID != "", err))

	for i := 0; i < 3; i++ {
		// No AT: the times are the server's; what they must be, whatever the clock.
		th, err := rl.Throttle(ctx, k("throttle"), 1, 1, 60, 1)
		retryOK := (th.Allowed && th.RetryAfter == -time.Second) || (!th.Allowed && th.RetryAfter > 0 && th.RetryAfter <= time.Minute)
		resetOK := th.ResetAfter > 0 && th.ResetAfter <= 2*time.Minute && th.ResetAfter%time.Second == 0
		out = append(out, fmt.Sprintf("throttle: allowed=%v limit=%d remaining=%d retry ok=%v reset ok=%v %v",
			th.Allowed, th.Limit, th.Remaining, retryOK, resetOK, err))
	}

	set := func(key string, ex ...string) {
		cmd := ratelimit.Command{Name: "SET", Keys: []string{key}, Args: append([]string{"v"}, ex...)}
		if _, err := rl.Conn().Do(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	set(k("bulk1"))
	set(k("bulk2"), "EX", "100")
	got, err := rl.BulkExpire(ctx, time.Hour, k("bulk1"), k("bulk2"), k("absent"))
	out = append(out, strings.ReplaceAll(fmt.Sprintf("bulkexpire: %v %v", got, err), tag, "{T}"))

	r, err = rl.Fixed(ctx, k("fixed"), 0, time.Minute, at)
	record("fixed limit 0", r, err)
	r, err = rl.GCRA(ctx, k("gcra"), 1, 1, time.Second, ratelimit.Cost(3), at)
	record("gcra cost above capacity", r, err)
	del(keys...)
	return out
}

func TestEveryCommandOnEveryClientAndTwin(t *testing.T) {
	var want []string
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			got := transcript(t, v, v.limiter(t))
			if want == nil {
				want = got
				checkTranscript(t, got)
				return
			}
			if len(got) != len(want) {
				t.Fatalf("%d lines, not %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("line %d:\n got  %s\n want %s (go-redis Client, the module)", i, got[i], want[i])
				}
			}
		})
	}
}

// checkTranscript pins what the first variant (go-redis, the module) replied to what
// the commands' pages say; the other variants must reply the same.
func checkTranscript(t *testing.T, lines []string) {
	expect := map[int]string{
		0:  "fixed: allowed=true limit=2 remaining=1 retry=-1ns reset=1m0s key= window=0s rule=0 delay=0s lease= quota=fixed",
		2:  "fixed: allowed=false limit=2 remaining=0 retry=1m0s reset=1m0s key= window=0s rule=0 delay=0s lease= quota=fixed",
		3:  "fixed peek: allowed=true limit=2 remaining=0 retry=-1ns reset=30s key= window=0s rule=0 delay=0s lease= quota=fixed",
		5:  "settle refund 3: allowed=true limit=10 remaining=5 retry=-1ns reset=1h0m0s key= window=0s rule=0 delay=0s lease= quota=fixed",
		7:  "gcra: allowed=true limit=16 remaining=15 retry=-1ns reset=2s key= window=0s rule=0 delay=0s lease= quota=gcra",
		9:  "gcra denied: allowed=false limit=16 remaining=0 retry=2s reset=32s key= window=0s rule=0 delay=0s lease= quota=gcra",
		10: "gcra 10 s later: allowed=true limit=16 remaining=4 retry=-1ns reset=24s key= window=0s rule=0 delay=0s lease= quota=gcra",
		13: "delay: allowed=true limit=16 remaining=0 retry=-1ns reset=36s key= window=0s rule=0 delay=4s lease= quota=gcra",
		17: "delay: allowed=false limit=16 remaining=0 retry=2s reset=42s key= window=0s rule=0 delay=-1ns lease= quota=gcra",
		20: "multi: allowed=false limit=2 remaining=0 retry=1m0s reset=1m0s key={T}:ip window=1m0s rule=0 delay=0s lease= quota=ip-1m",
		21: "multi user: allowed=true limit=3 remaining=0 retry=-1ns reset=58m0s key={T}:user window=1h0m0s rule=0 delay=0s lease= quota=multi-1h",
		27: "log eve: allowed=false limit=2 remaining=0 retry=58s reset=59s key= window=0s rule=0 delay=0s lease= quota=log",
		31: "all: allowed=false limit=3 remaining=0 retry=1h0m0s reset=3h0m0s key={T}:all:user window=0s rule=1 delay=0s lease= quota=user",
		32: "all ban lease: allowed=true limit=1 remaining=0 retry=-1ns reset=1m0s key={T}:ban:rate window=0s rule=1 delay=0s lease=job-1 quota=fixed",
		35: "all ban lease: allowed=false limit=2 remaining=0 retry=59m59s reset=59m59s key={T}:ban:box window=0s rule=2 delay=0s lease= quota=ban",
		36: "lease a: allowed=true limit=1 remaining=0 retry=-1ns reset=1m0s key= window=0s rule=0 delay=0s lease=a quota=lease",
		37: "lease b: allowed=false limit=1 remaining=0 retry=59s reset=59s key= window=0s rule=0 delay=0s lease= quota=lease",
		38: "release a: true <nil>",
		39: "release a: false <nil>",
		40: "lease without id: allowed=true id made=true <nil>",
		41: "throttle: allowed=true limit=2 remaining=1 retry ok=true reset ok=true <nil>",
		43: "throttle: allowed=false limit=2 remaining=0 retry ok=true reset ok=true <nil>",
		44: "bulkexpire: [{T}:bulk1] <nil>",
		45: "fixed limit 0: error ERR invalid limit '0': must be an integer from 1 to 9007199254740991",
		46: "gcra cost above capacity: error ERR cost 3 exceeds the burst capacity 2: the request can never be allowed",
	}
	for i, want := range expect {
		if i >= len(lines) || lines[i] != want {
			t.Errorf("line %d:\n got  %s\n want %s", i, at(lines, i), want)
		}
	}
	if t.Failed() {
		t.Logf("the whole transcript:\n%s", strings.Join(lines, "\n"))
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(none)"
}

func TestArgumentsRefusedBeforeSending(t *testing.T) {
	rl := ratelimit.New(goredisrl.New(goRedis(t, moduleServer(t).Addr)))
	cases := []struct {
		name string
		call func() error
	}{
		{"a window below a millisecond", func() error {
			_, err := rl.Fixed(ctx, "k", 1, time.Microsecond)
			return err
		}},
		{"REFUND with FORCE", func() error {
			_, err := rl.Fixed(ctx, "k", 1, time.Second, ratelimit.Refund(), ratelimit.Force())
			return err
		}},
		{"COST twice", func() error {
			_, err := rl.Fixed(ctx, "k", 1, time.Second, ratelimit.Cost(1), ratelimit.Cost(2))
			return err
		}},
		{"META on RL.FIXED", func() error {
			_, err := rl.Fixed(ctx, "k", 1, time.Second, ratelimit.Meta("x"))
			return err
		}},
		{"REFUND on RL.LEASE", func() error {
			_, err := rl.Lease(ctx, "k", 1, time.Second, ratelimit.Refund())
			return err
		}},
		{"DELAY with FORCE", func() error {
			_, err := rl.GCRA(ctx, "k", 1, 1, time.Second, ratelimit.Delay(time.Second), ratelimit.Force())
			return err
		}},
		{"DELAY inside RL.ALL", func() error {
			_, err := rl.All(ctx, []ratelimit.Rule{{Key: "k", Policy: ratelimit.GCRA{MaxBurst: 1, Count: 1, Period: time.Second, Delay: time.Second}}})
			return err
		}},
		{"a Ban alone", func() error {
			_, err := rl.Check(ctx, ratelimit.Ban{Strikes: 1, Window: time.Second, Duration: time.Second}, []string{"k"})
			return err
		}},
		{"two keys for RL.GCRA", func() error {
			_, err := rl.Check(ctx, ratelimit.GCRA{MaxBurst: 1, Count: 1, Period: time.Second}, []string{"a", "b"})
			return err
		}},
		{"RL.MULTI without windows", func() error {
			_, err := rl.Multi(ctx, []string{"a"}, nil)
			return err
		}},
	}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, ratelimit.ErrInvalidArgument) {
			t.Errorf("%s: %v, not an ErrInvalidArgument", c.name, err)
		}
	}
	n, err := goRedis(t, moduleServer(t).Addr).Exists(ctx, "k", "a", "b").Result()
	if err != nil || n != 0 {
		t.Fatalf("a refused call wrote keys: %d %v", n, err)
	}
}

func TestDurationsAreTheCommandsStrings(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond: "1500ms", time.Second: "1s", 90 * time.Second: "90s", time.Minute: "1m",
		36 * time.Hour: "36h", 7 * 24 * time.Hour: "7d", 3650 * 24 * time.Hour: "3650d",
	} {
		got, err := ratelimit.FormatDuration(d)
		if got != want || err != nil {
			t.Errorf("FormatDuration(%v) = %q %v, want %q", d, got, err, want)
		}
		back, err := ratelimit.ParseDuration(want)
		if back != d || err != nil {
			t.Errorf("ParseDuration(%q) = %v %v, want %v", want, back, err, d)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond, 1500 * time.Microsecond, 3651 * 24 * time.Hour} {
		if s, err := ratelimit.FormatDuration(d); !errors.Is(err, ratelimit.ErrInvalidArgument) {
			t.Errorf("FormatDuration(%v) = %q %v, want an error", d, s, err)
		}
	}
	if d, err := ratelimit.ParseDuration("90"); d != 90*time.Second || err != nil {
		t.Errorf("a bare integer is seconds: %v %v", d, err)
	}
	for _, s := range []string{"", "0", "-1s", "1.5s", "1S", "1y", "3651d", "1sec"} {
		if d, err := ratelimit.ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", s, d)
		}
	}
}

func TestTheServerWithoutTheModule(t *testing.T) {
	addr := bareServer(t).Addr
	rl := ratelimit.New(goredisrl.New(goRedis(t, addr)))
	_, err := rl.GCRA(ctx, "rl:go:missing", 1, 1, time.Second)
	var missing *ratelimit.ModuleMissingError
	if !errors.As(err, &missing) || missing.Command != "RL.GCRA" || !strings.Contains(err.Error(), "MODULE LOAD") {
		t.Fatalf("want a ModuleMissingError naming RL.GCRA and how to load the module, got %v", err)
	}

	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	fallback := ratelimit.New(goredisrl.New(goRedis(t, addr)), ratelimit.WithTwins(ratelimit.TwinsFallback), ratelimit.WithLogger(logger))
	goRedis(t, addr).Del(ctx, "rl:go:fallback")
	for i := 0; i < 3; i++ {
		r, err := fallback.GCRA(ctx, "rl:go:fallback", 1, 1, time.Minute, ratelimit.At(t0))
		if err != nil || r.Allowed != (i < 2) {
			t.Fatalf("call %d: %+v %v", i, r, err)
		}
	}
	if n := strings.Count(logged.String(), "has no RL.GCRA"); n != 1 {
		t.Fatalf("the switch to the twin is said %d times, not once:\n%s", n, logged.String())
	}
	if _, err := fallback.Sweep(ctx, "0", time.Hour, ratelimit.SweepOptions{}); !errors.As(err, &missing) {
		t.Fatalf("RL.SWEEP has no twin: want a ModuleMissingError, got %v", err)
	}
	twins := ratelimit.New(goredisrl.New(goRedis(t, addr)), ratelimit.WithTwins(ratelimit.TwinsAlways))
	if _, err := twins.Sweep(ctx, "0", time.Hour, ratelimit.SweepOptions{}); !errors.Is(err, ratelimit.ErrTwinUnavailable) {
		t.Fatalf("RL.SWEEP with the twins: want ErrTwinUnavailable, got %v", err)
	}
}

func TestTwinsLoadTheLibraryOrFallBackToScripts(t *testing.T) {
	s := testserver.Start(t, testserver.Options{NoModule: true})
	admin := goRedis(t, s.Addr)
	rl := ratelimit.New(goredisrl.New(admin), ratelimit.WithTwins(ratelimit.TwinsAlways))
	if _, err := rl.Fixed(ctx, "rl:go:f", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	libs, err := admin.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "ratelimit"}).Result()
	if err != nil || len(libs) != 1 {
		t.Fatalf("the library was not loaded: %v %v", libs, err)
	}
	if n, _ := admin.ScriptExists(ctx, sha(t, "rl_fixed")).Result(); n[0] {
		t.Fatal("a script was loaded although FUNCTION is allowed")
	}

	// A user that may not run FUNCTION, on a server without the library: scripts.
	if err := admin.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "nofn", "on", ">pw", "~*", "+@all", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "nofn", Password: "pw"})
	defer limited.Close()
	scripts := ratelimit.New(goredisrl.New(limited), ratelimit.WithTwins(ratelimit.TwinsAlways))
	r, err := scripts.Fixed(ctx, "rl:go:f", 1, time.Minute)
	if err != nil || r.Allowed {
		t.Fatalf("the script's reply: %+v %v (the key is full)", r, err)
	}
	if n, _ := admin.ScriptExists(ctx, sha(t, "rl_fixed")).Result(); !n[0] {
		t.Fatal("the script of rl_fixed was not loaded")
	}
	if libs, _ := admin.FunctionList(ctx, redis.FunctionListQuery{}).Result(); len(libs) != 0 {
		t.Fatalf("a library appeared: %v", libs)
	}
}

func sha(t *testing.T, fn string) string {
	t.Helper()
	src := ratelimit.EmbeddedLua().Scripts[fn]
	if src == "" {
		t.Fatalf("no script %s", fn)
	}
	return fmt.Sprintf("%x", sha1.Sum([]byte(src)))
}

func TestSweepOnEachPrimary(t *testing.T) {
	c := testserver.SharedCluster(t, "module", testserver.Options{})
	cc := goRedisCluster(t, c.Addrs())
	var keys []string
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("rl:go:sweep:%d", i)
		keys = append(keys, key)
		if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rl := ratelimit.New(goredisrl.New(cc))
	if _, err := rl.Sweep(ctx, "0", time.Hour, ratelimit.SweepOptions{}); !errors.Is(err, ratelimit.ErrInvalidArgument) {
		t.Fatalf("RL.SWEEP on a Cluster client: want an error, got %v", err)
	}
	for _, mk := range []func() *ratelimit.Limiter{
		func() *ratelimit.Limiter { return rl },
		func() *ratelimit.Limiter { return ratelimit.New(rueidisrl.New(rueidisClient(t, c.Addrs()...))) },
	} {
		nodes, err := mk().Primaries(ctx)
		if err != nil || len(nodes) != 3 {
			t.Fatalf("%d primaries, %v", len(nodes), err)
		}
		expired := int64(0)
		for _, node := range nodes {
			cursor := "0"
			for {
				s, err := node.Sweep(ctx, cursor, time.Hour, ratelimit.SweepOptions{Match: "rl:go:sweep:*", Count: 5})
				if err != nil {
					t.Fatal(err)
				}
				expired += s.Expired
				if cursor = s.Cursor; cursor == "0" {
					break
				}
			}
		}
		if expired != int64(len(keys)) {
			t.Fatalf("%d keys given a TTL, not %d", expired, len(keys))
		}
		for _, key := range keys {
			if ttl := cc.TTL(ctx, key).Val(); ttl <= 0 {
				t.Fatalf("%s has no TTL: %v", key, ttl)
			}
			cc.Persist(ctx, key)
		}
	}
}

func TestCrossSlotKeysAreAnError(t *testing.T) {
	c := testserver.SharedCluster(t, "module", testserver.Options{})
	for name, rl := range map[string]*ratelimit.Limiter{
		"go-redis": ratelimit.New(goredisrl.New(goRedisCluster(t, c.Addrs()))),
		"rueidis":  ratelimit.New(rueidisrl.New(rueidisClient(t, c.Addrs()...))),
	} {
		_, err := rl.Multi(ctx, []string{"rl:go:a", "rl:go:b"}, []ratelimit.Window{{Window: time.Minute, Limit: 1}})
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "slot") {
			t.Errorf("%s: keys of two slots: want a slot error, got %v", name, err)
		}
	}
}

// Concurrent callers of one Limiter, on the module and on twins that start unknown (the
// first calls race to load the library): exactly the limit is allowed. Run with -race.
func TestConcurrentCallersGetExactlyTheLimit(t *testing.T) {
	for name, rl := range map[string]*ratelimit.Limiter{
		"module": ratelimit.New(goredisrl.New(goRedis(t, moduleServer(t).Addr))),
		"twins":  ratelimit.New(rueidisrl.New(rueidisClient(t, testserver.Start(t, testserver.Options{NoModule: true}).Addr)), ratelimit.WithTwins(ratelimit.TwinsAlways)),
	} {
		key := "rl:go:concurrent:" + name
		if _, err := rl.Conn().Do(ctx, ratelimit.Command{Name: "DEL", Keys: []string{key}}); err != nil {
			t.Fatal(err)
		}
		const workers, each, limit = 8, 25, 57
		var wg sync.WaitGroup
		var mu sync.Mutex
		allowed := 0
		var errs []error
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					r, err := rl.Fixed(ctx, key, limit, time.Hour, ratelimit.At(t0))
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else if r.Allowed {
						allowed++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(errs) > 0 || allowed != limit {
			t.Fatalf("%s: %d allowed of %d calls with a limit of %d; errors %v", name, allowed, workers*each, limit, errs)
		}
	}
}

func TestEmbeddedTwinsAreTheRepositorys(t *testing.T) {
	repo, err := ratelimit.ReadLua(os.DirFS(testserver.Repo()), "lua")
	if err != nil {
		t.Skipf("not in a checkout of the repository: %v", err)
	}
	got := ratelimit.EmbeddedLua()
	stale := got.Library != repo.Library
	var names []string
	for name, src := range repo.Scripts {
		names = append(names, name)
		stale = stale || got.Scripts[name] != src
	}
	sort.Strings(names)
	if stale || len(got.Scripts) != len(repo.Scripts) {
		t.Fatalf("the embedded twins differ from lua/ (%v): run `go generate` in clients/go", names)
	}
	if len(names) < 10 {
		t.Fatalf("only %d scripts in lua/scripts: %v", len(names), names)
	}
}
