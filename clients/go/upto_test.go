package ratelimit_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredisrl"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rueidisrl"
)

// twinRefusal is a transcript's line for a call with UpTo that a twin without UPTO
// refused with the package's error (checked where it is written).
const twinRefusal = "refused: the twin does not take UPTO"

// upToTranscript runs calls with UpTo of every limiter on one variant and writes what
// each replied (Granted too), the variant's hash tag replaced by {T}. It makes no other
// call, so a variant whose twins refuse UPTO must leave every key absent.
func upToTranscript(t *testing.T, v variant, rl *ratelimit.Limiter) (lines []string, keys []string, refused int) {
	tag := "{upto:" + strings.NewReplacer(" ", "", ",", "", "(", "", ")", "").Replace(v.name) + "}"
	k := func(name string) string {
		keys = append(keys, tag+":"+name)
		return tag + ":" + name
	}
	record := func(what string, r ratelimit.Result, err error) {
		line := what + ": "
		switch {
		case errors.Is(err, ratelimit.ErrUpToUnsupported):
			checkTwinRefusal(t, what, err)
			line += twinRefusal
			refused++
		case err != nil:
			line += "error " + err.Error()
		default:
			line += describe(r) + fmt.Sprintf(" granted=%d", r.Granted)
		}
		lines = append(lines, strings.ReplaceAll(line, tag, "{T}"))
	}
	at := ratelimit.At(t0)
	later := func(d time.Duration) ratelimit.Option { return ratelimit.At(t0.Add(d)) }
	up := ratelimit.UpTo()
	fixed, gcra, ip, user, sliding, log := k("fixed"), k("gcra"), k("ip"), k("user"), k("sliding"), k("log")
	allUser, allDay, leaseRate, lease, banRate, banBox := k("all:user"), k("all:day"), k("lease:rate"), k("lease"), k("ban:rate"), k("ban:box")
	for _, key := range keys {
		if _, err := rl.Conn().Do(ctx, ratelimit.Command{Name: "DEL", Keys: []string{key}}); err != nil {
			t.Fatal(err)
		}
	}

	r, err := rl.Fixed(ctx, fixed, 10, time.Minute, ratelimit.Cost(4), up, at)
	record("fixed 4 of 10", r, err)
	r, err = rl.Fixed(ctx, fixed, 10, time.Minute, ratelimit.Cost(40), up, at)
	record("fixed up to 40, above the limit", r, err)
	r, err = rl.Fixed(ctx, fixed, 10, time.Minute, ratelimit.Cost(4), up, later(time.Second))
	record("fixed none left", r, err)
	r, err = rl.Fixed(ctx, fixed, 10, time.Minute, up, later(time.Minute))
	record("fixed UPTO without Cost, next window", r, err)

	r, err = rl.GCRA(ctx, gcra, 9, 10, time.Second, ratelimit.Cost(25), up, at)
	record("gcra burst", r, err)
	r, err = rl.GCRA(ctx, gcra, 9, 10, time.Second, ratelimit.Cost(3), up, later(250*time.Millisecond))
	record("gcra 250 ms later", r, err)
	r, err = rl.GCRA(ctx, gcra, 9, 10, time.Second, ratelimit.Cost(3), up, later(250*time.Millisecond))
	record("gcra none left", r, err)

	limits := []ratelimit.Window{{Window: time.Minute, Limit: 5}, {Window: time.Hour, Limit: 8}}
	r, err = rl.Multi(ctx, []string{ip, user}, limits, ratelimit.Names("ip", "user"), ratelimit.Cost(3), up, at)
	record("multi 3", r, err)
	r, err = rl.Multi(ctx, []string{ip, user}, limits, ratelimit.Names("ip", "user"), ratelimit.Cost(9), up, at)
	record("multi the minute binds", r, err)
	r, err = rl.Multi(ctx, []string{ip, user}, limits, ratelimit.Names("ip", "user"), ratelimit.Cost(9), up, later(time.Minute))
	record("multi the hour binds", r, err)

	window := []ratelimit.Window{{Window: 10 * time.Second, Limit: 6}}
	r, err = rl.Sliding(ctx, []string{sliding}, window, ratelimit.Buckets(5), ratelimit.Cost(4), up, at)
	record("sliding 4", r, err)
	r, err = rl.Sliding(ctx, []string{sliding}, window, ratelimit.Buckets(5), ratelimit.Cost(4), up, later(time.Second))
	record("sliding what remains", r, err)

	r, err = rl.Log(ctx, log, 3, time.Minute, ratelimit.Meta("ann"), ratelimit.Cost(5), up, at)
	record("log", r, err)
	r, err = rl.Log(ctx, log, 3, time.Minute, ratelimit.Meta("bob"), up, later(time.Second))
	record("log none left", r, err)

	// docs/upto.md's RL.ALL session: a user's rate and its account's day.
	rules := []ratelimit.Rule{
		{Key: allUser, Policy: ratelimit.GCRA{MaxBurst: 99, Count: 100, Period: time.Second, Name: "user"}},
		{Key: allDay, Policy: ratelimit.Fixed{Limit: 280, Window: 24 * time.Hour, Name: "account"}},
	}
	for i := 0; i < 3; i++ {
		r, err = rl.All(ctx, rules, ratelimit.Cost(250), up, later(time.Duration(i)*time.Second))
		record(fmt.Sprintf("all %d s", i), r, err)
	}
	leased := []ratelimit.Rule{
		{Key: leaseRate, Policy: ratelimit.Fixed{Limit: 5, Window: time.Minute}},
		{Key: lease, Policy: ratelimit.Lease{Limit: 3, TTL: time.Minute}},
	}
	r, err = rl.All(ctx, leased, ratelimit.ID("job-1"), up, at)
	record("all with a lease, COST 1 UPTO", r, err)
	r, err = rl.All(ctx, leased, ratelimit.ID("job-2"), ratelimit.Cost(3), up, at)
	record("all with a lease, COST 3 UPTO", r, err)
	banned := []ratelimit.Rule{
		{Key: banRate, Policy: ratelimit.Fixed{Limit: 1, Window: time.Minute}},
		{Key: banBox, Policy: ratelimit.Ban{Strikes: 1, Window: time.Minute, Duration: time.Hour}},
	}
	for i := 0; i < 3; i++ {
		r, err = rl.All(ctx, banned, ratelimit.Cost(2), up, later(time.Duration(i)*time.Second))
		record("all with a ban", r, err)
	}

	r, err = rl.Fixed(ctx, fixed, 10, time.Minute, ratelimit.Cost(0), up, at)
	record("COST 0 UPTO", r, err)
	return lines, keys, refused
}

// checkTwinRefusal: the error of a twin without UPTO says so, names the command and its
// twin, and wraps what a caller tells it by.
func checkTwinRefusal(t *testing.T, what string, err error) {
	t.Helper()
	var reply *ratelimit.ReplyError
	if !errors.Is(err, ratelimit.ErrTwinUnavailable) || !errors.As(err, &reply) ||
		!strings.Contains(err.Error(), "Lua twin") || !strings.Contains(err.Error(), "does not take UPTO") ||
		!strings.Contains(reply.Message, "UPTO") {
		t.Errorf("%s: the twin's refusal of UPTO is not said clearly: %v", what, err)
	}
}

func TestUpToOnEveryClientAndTwin(t *testing.T) {
	var want []string
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			rl := v.limiter(t)
			got, keys, refused := upToTranscript(t, v, rl)
			if want == nil {
				if refused > 0 {
					t.Fatalf("the module refused UPTO:\n%s", strings.Join(got, "\n"))
				}
				want = got
				checkUpToTranscript(t, got)
				return
			}
			if len(got) != len(want) {
				t.Fatalf("%d lines, not %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
			}
			twins := strings.HasPrefix(v.name, "twins")
			if refused > 0 && (!twins || refused != len(want)) {
				t.Fatalf("%d of %d calls refused UPTO (a twin that lacks it refuses every call, the module none):\n%s",
					refused, len(want), strings.Join(got, "\n"))
			}
			for i := range want {
				if got[i] != want[i] && !strings.HasSuffix(got[i], twinRefusal) {
					t.Errorf("line %d:\n got  %s\n want %s (go-redis Client, the module)", i, got[i], want[i])
				}
			}
			if refused > 0 {
				// Every call was refused, so nothing may have been written.
				for _, key := range keys {
					n, err := rl.Conn().Do(ctx, ratelimit.Command{Name: "EXISTS", Keys: []string{key}})
					if err != nil || n != int64(0) {
						t.Errorf("%s exists (%v %v) after calls the twin refused", key, n, err)
					}
				}
				t.Logf("the twins in use do not take UPTO: every call refused, as %q", twinRefusal)
			}
		})
	}
}

// checkUpToTranscript pins what the module replied to docs/upto.md's rules: the reply
// of the COST k call for the largest k that fits, k last; refused as COST 1, k = 0.
func checkUpToTranscript(t *testing.T, lines []string) {
	expect := []string{
		"fixed 4 of 10: allowed=true limit=10 remaining=6 retry=-1ns reset=1m0s key= window=0s rule=0 delay=0s lease= quota=fixed granted=4",
		"fixed up to 40, above the limit: allowed=true limit=10 remaining=0 retry=-1ns reset=1m0s key= window=0s rule=0 delay=0s lease= quota=fixed granted=6",
		"fixed none left: allowed=false limit=10 remaining=0 retry=59s reset=59s key= window=0s rule=0 delay=0s lease= quota=fixed granted=0",
		"fixed UPTO without Cost, next window: allowed=true limit=10 remaining=9 retry=-1ns reset=1m0s key= window=0s rule=0 delay=0s lease= quota=fixed granted=1",
		"gcra burst: allowed=true limit=10 remaining=0 retry=-1ns reset=1s key= window=0s rule=0 delay=0s lease= quota=gcra granted=10",
		"gcra 250 ms later: allowed=true limit=10 remaining=0 retry=-1ns reset=950ms key= window=0s rule=0 delay=0s lease= quota=gcra granted=2",
		"gcra none left: allowed=false limit=10 remaining=0 retry=50ms reset=950ms key= window=0s rule=0 delay=0s lease= quota=gcra granted=0",
		"multi 3: allowed=true limit=5 remaining=2 retry=-1ns reset=1m0s key={T}:ip window=1m0s rule=0 delay=0s lease= quota=ip-1m granted=3",
		"multi the minute binds: allowed=true limit=5 remaining=0 retry=-1ns reset=1m0s key={T}:ip window=1m0s rule=0 delay=0s lease= quota=ip-1m granted=2",
		"multi the hour binds: allowed=true limit=8 remaining=0 retry=-1ns reset=59m0s key={T}:ip window=1h0m0s rule=0 delay=0s lease= quota=ip-1h granted=3",
		"sliding 4: allowed=true limit=6 remaining=2 retry=-1ns reset=12s key={T}:sliding window=10s rule=0 delay=0s lease= quota=sliding-10s granted=4",
		"sliding what remains: allowed=true limit=6 remaining=0 retry=-1ns reset=11s key={T}:sliding window=10s rule=0 delay=0s lease= quota=sliding-10s granted=2",
		"log: allowed=true limit=3 remaining=0 retry=-1ns reset=1m0s key= window=0s rule=0 delay=0s lease= quota=log granted=3",
		"log none left: allowed=false limit=3 remaining=0 retry=59s reset=59s key= window=0s rule=0 delay=0s lease= quota=log granted=0",
		"all 0 s: allowed=true limit=100 remaining=0 retry=-1ns reset=1s key={T}:all:user window=0s rule=1 delay=0s lease= quota=user granted=100",
		"all 1 s: allowed=true limit=100 remaining=0 retry=-1ns reset=1s key={T}:all:user window=0s rule=1 delay=0s lease= quota=user granted=100",
		"all 2 s: allowed=true limit=280 remaining=0 retry=-1ns reset=23h59m58s key={T}:all:day window=0s rule=2 delay=0s lease= quota=account granted=80",
		"all with a lease, COST 1 UPTO: allowed=true limit=3 remaining=2 retry=-1ns reset=1m0s key={T}:lease window=0s rule=2 delay=0s lease=job-1 quota=lease granted=1",
		"all with a lease, COST 3 UPTO: error ERR rule 2 (LEASE): invalid cost 3: a lease takes COST 1 (the default) or COST 0 to peek",
		"all with a ban: allowed=true limit=1 remaining=0 retry=-1ns reset=1m0s key={T}:ban:rate window=0s rule=1 delay=0s lease= quota=fixed granted=1",
		"all with a ban: allowed=false limit=1 remaining=0 retry=1h0m0s reset=1h0m0s key={T}:ban:box window=0s rule=2 delay=0s lease= quota=ban granted=0",
		"all with a ban: allowed=false limit=1 remaining=0 retry=59m59s reset=59m59s key={T}:ban:box window=0s rule=2 delay=0s lease= quota=ban granted=0",
		"COST 0 UPTO: error ERR UPTO takes COST n with n at least 1 (COST 0 alone peeks)",
	}
	if len(lines) != len(expect) {
		t.Errorf("%d lines, not %d", len(lines), len(expect))
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

// A call with UpTo is the COST k call in every way: the same reply (but k) and the same
// state with the same absolute expiry, on each key of each limiter.
func TestUpToIsTheCallOfCostK(t *testing.T) {
	rdb := goRedis(t, moduleServer(t).Addr)
	for name, rl := range map[string]*ratelimit.Limiter{
		"go-redis": ratelimit.New(goredisrl.New(rdb)),
		"rueidis":  ratelimit.New(rueidisrl.New(rueidisClient(t, moduleServer(t).Addr))),
	} {
		calls := []struct {
			name string
			keys int
			call func(keys []string, opts ...ratelimit.Option) (ratelimit.Result, error)
		}{
			{"fixed", 1, func(k []string, o ...ratelimit.Option) (ratelimit.Result, error) {
				return rl.Fixed(ctx, k[0], 10, time.Minute, append(o, ratelimit.Align())...)
			}},
			{"gcra", 1, func(k []string, o ...ratelimit.Option) (ratelimit.Result, error) {
				return rl.GCRA(ctx, k[0], 9, 10, time.Second, o...)
			}},
			{"multi", 2, func(k []string, o ...ratelimit.Option) (ratelimit.Result, error) {
				return rl.Multi(ctx, k, []ratelimit.Window{{Window: time.Minute, Limit: 7}, {Window: time.Hour, Limit: 9}}, o...)
			}},
			{"sliding", 1, func(k []string, o ...ratelimit.Option) (ratelimit.Result, error) {
				return rl.Sliding(ctx, k, []ratelimit.Window{{Window: 10 * time.Second, Limit: 10}}, o...)
			}},
			{"log", 1, func(k []string, o ...ratelimit.Option) (ratelimit.Result, error) {
				return rl.Log(ctx, k[0], 6, time.Minute, append(o, ratelimit.Meta("who"))...)
			}},
			{"all", 2, func(k []string, o ...ratelimit.Option) (ratelimit.Result, error) {
				return rl.All(ctx, []ratelimit.Rule{
					{Key: k[0], Policy: ratelimit.GCRA{MaxBurst: 4, Count: 5, Period: time.Second}},
					{Key: k[1], Policy: ratelimit.Sliding{Limits: []ratelimit.Window{{Window: time.Minute, Limit: 12}}}},
				}, o...)
			}},
		}
		for _, c := range calls {
			var upKeys, costKeys []string
			for i := 0; i < c.keys; i++ {
				upKeys = append(upKeys, fmt.Sprintf("{rl:go:upto:%s:%s}:up:%d", name, c.name, i))
				costKeys = append(costKeys, fmt.Sprintf("{rl:go:upto:%s:%s}:cost:%d", name, c.name, i))
			}
			rdb.Del(ctx, append(append([]string{}, upKeys...), costKeys...)...)
			// Asking for 4, then for 4 again later: all, some, or none of it fits.
			seen := map[string]bool{}
			for step, when := range []time.Duration{0, 0, 0, 0, 300 * time.Millisecond, 1500 * time.Millisecond} {
				atWhen := ratelimit.At(t0.Add(when))
				got, err := c.call(upKeys, ratelimit.Cost(4), ratelimit.UpTo(), atWhen)
				if err != nil {
					t.Fatalf("%s %s step %d: %v", name, c.name, step, err)
				}
				cost := got.Granted
				if cost == 0 {
					cost = 1 // refused as COST 1 would be
				}
				want, err := c.call(costKeys, ratelimit.Cost(cost), atWhen)
				if err != nil {
					t.Fatalf("%s %s step %d, COST %d: %v", name, c.name, step, cost, err)
				}
				if want.Allowed != (got.Granted > 0) || got.Granted < 0 || got.Granted > 4 {
					t.Fatalf("%s %s step %d: granted %d, while COST %d was allowed=%v", name, c.name, step, got.Granted, cost, want.Allowed)
				}
				want.Granted = got.Granted
				switch {
				case got.Granted == 4:
					seen["all"] = true
				case got.Granted > 0:
					seen["some"] = true
				default:
					seen["none"] = true
				}
				g, w := strings.ReplaceAll(describe(got), ":up:", ":*:"), strings.ReplaceAll(describe(want), ":cost:", ":*:")
				if g != w {
					t.Fatalf("%s %s step %d:\n UPTO    %s\n COST %d  %s", name, c.name, step, g, cost, w)
				}
				for i := range upKeys {
					if a, b := keyState(t, rdb, upKeys[i]), keyState(t, rdb, costKeys[i]); a != b {
						t.Fatalf("%s %s step %d, key %d: the UPTO call wrote\n %s\nthe COST %d call\n %s", name, c.name, step, i, a, cost, b)
					}
				}
			}
			if len(seen) != 3 {
				t.Fatalf("%s %s: the calls granted %v of 4, not each of all, some and none", name, c.name, seen)
			}
		}
	}
}

// keyState is what a key holds, whatever its type, and its absolute expiry.
func keyState(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	kind, err := rdb.Type(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var value any
	switch kind {
	case "string":
		value, err = rdb.Get(ctx, key).Result()
	case "zset":
		value, err = rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	case "none":
	default:
		t.Fatalf("%s is a %s", key, kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	expiry, err := rdb.Do(ctx, "PEXPIRETIME", key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %v expires at %d", kind, value, expiry)
}

func TestUpToRefusedBeforeSending(t *testing.T) {
	rl := ratelimit.New(goredisrl.New(goRedis(t, moduleServer(t).Addr)))
	cases := map[string]func() error{
		"UPTO with REFUND": func() error {
			_, err := rl.Fixed(ctx, "rl:go:upto:k", 1, time.Second, ratelimit.Cost(2), ratelimit.UpTo(), ratelimit.Refund())
			return err
		},
		"FORCE with UPTO": func() error {
			_, err := rl.All(ctx, []ratelimit.Rule{{Key: "rl:go:upto:k", Policy: ratelimit.Fixed{Limit: 1, Window: time.Second}}},
				ratelimit.Force(), ratelimit.UpTo())
			return err
		},
		"UPTO twice": func() error {
			_, err := rl.Log(ctx, "rl:go:upto:k", 1, time.Second, ratelimit.UpTo(), ratelimit.UpTo())
			return err
		},
		"UPTO with DELAY": func() error {
			_, err := rl.GCRA(ctx, "rl:go:upto:k", 1, 1, time.Second, ratelimit.Cost(2), ratelimit.UpTo(), ratelimit.Delay(time.Second))
			return err
		},
		"UPTO on RL.LEASE": func() error {
			_, err := rl.Lease(ctx, "rl:go:upto:k", 1, time.Second, ratelimit.UpTo())
			return err
		},
		"UPTO on a Lease policy": func() error {
			_, err := rl.Check(ctx, ratelimit.Lease{Limit: 1, TTL: time.Second}, []string{"rl:go:upto:k"}, ratelimit.UpTo())
			return err
		},
		"UPTO on RL.RELEASE": func() error {
			_, err := rl.Release(ctx, "rl:go:upto:k", "id", ratelimit.UpTo())
			return err
		},
	}
	for name, call := range cases {
		err := call()
		if !errors.Is(err, ratelimit.ErrInvalidArgument) || !strings.Contains(err.Error(), "UPTO") {
			t.Errorf("%s: %v, not an ErrInvalidArgument that names UPTO", name, err)
		}
	}
	if n, err := goRedis(t, moduleServer(t).Addr).Exists(ctx, "rl:go:upto:k").Result(); err != nil || n != 0 {
		t.Fatalf("a refused call wrote its key: %d %v", n, err)
	}
}

// On a server without the module, TwinsFallback runs the twin: a twin without UPTO is
// said as such, and nothing is written.
func TestUpToFallingBackToTheTwins(t *testing.T) {
	addr := bareServer(t).Addr
	rdb := goRedis(t, addr)
	rl := ratelimit.New(goredisrl.New(rdb), ratelimit.WithTwins(ratelimit.TwinsFallback))
	key := "rl:go:upto:fallback"
	rdb.Del(ctx, key)
	r, err := rl.Fixed(ctx, key, 10, time.Minute, ratelimit.Cost(4), ratelimit.UpTo(), ratelimit.At(t0))
	switch {
	case errors.Is(err, ratelimit.ErrUpToUnsupported):
		checkTwinRefusal(t, "RL.FIXED", err)
		if !strings.Contains(err.Error(), "RL.FIXED's Lua twin (rl_fixed)") {
			t.Errorf("the refusal does not name the command and its twin: %v", err)
		}
		if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
			t.Fatal("the refused call wrote its key")
		}
	case err != nil:
		t.Fatal(err)
	case !r.Allowed || r.Granted != 4 || r.Remaining != 6:
		t.Fatalf("a twin that takes UPTO replied %+v", r)
	}
	// The same limiter's calls without UPTO run the twin as usual.
	if r, err := rl.Fixed(ctx, key, 10, time.Minute, ratelimit.Cost(4), ratelimit.At(t0)); err != nil || !r.Allowed {
		t.Fatalf("a call without UPTO: %+v %v", r, err)
	}
}
