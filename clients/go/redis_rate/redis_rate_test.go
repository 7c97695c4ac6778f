package redis_rate_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	upstream "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate"
)

const (
	upstreamPath = "github.com/go-redis/redis_rate/v10"
	dropInPath   = "github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate"
	inNetns      = "RL_GO_EXAMPLE_IN_NETNS"
)

// redis_rate's documented example (its example_test.go, read from the module cache,
// whose README shows the same code), with its import path changed to this package and
// nothing else: it connects to localhost:6379 and flushes the database, so it runs in a
// network namespace of its own (unshare), where 127.0.0.1:6379 is a server this test
// starts and no one else's.
func TestRedisRatesOwnExampleRunsUnchangedButForTheImport(t *testing.T) {
	if os.Getenv(inNetns) != "" {
		runExampleInsideNamespace(t)
		return
	}
	dir := goList(t, "-m", "-f", "{{.Dir}}", upstreamPath)
	source, err := os.ReadFile(filepath.Join(dir, "example_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(source), `"`+upstreamPath+`"`) != 1 || !strings.Contains(string(source), "// Output: allowed 1 remaining 9") {
		t.Fatalf("redis_rate's example is not the one this test knows:\n%s", source)
	}
	work := t.TempDir()
	changed := strings.Replace(string(source), `"`+upstreamPath+`"`, `"`+dropInPath+`"`, 1)
	module := goList(t, "-m", "-f", "{{.Dir}}")
	files := map[string]string{
		"example_test.go": changed,
		"go.mod": "module example.test/dropin\n\ngo 1.22\n\nrequire " + dropInModule + " v0.0.0\n" +
			"require github.com/redis/go-redis/v9 " + goList(t, "-m", "-f", "{{.Version}}", "github.com/redis/go-redis/v9") + "\n" +
			"replace " + dropInModule + " => " + module + "\n",
	}
	sum, err := os.ReadFile(filepath.Join(module, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.sum"] = string(sum)
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("unshare", "--map-root-user", "--net", os.Args[0],
		"-test.run=^TestRedisRatesOwnExampleRunsUnchangedButForTheImport$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inNetns+"="+work)
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("unshare: %v (the test needs unshare(1) and user namespaces)", err)
	}
	if !strings.Contains(string(out), "--- PASS: ExampleNewLimiter") {
		t.Fatal("redis_rate's example did not pass")
	}
}

const dropInModule = "github.com/redis-ratelimit/redis-ratelimit/clients/go"

func goList(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

func runExampleInsideNamespace(t *testing.T) {
	work := os.Getenv(inNetns)
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v %s", err, out)
	}
	// The namespace's own 127.0.0.1:6379, checked to be this server (its pid).
	testserver.Start(t, testserver.Options{Port: 6379})
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", "^ExampleNewLimiter$", ".")
	cmd.Dir = work
	// No network in the namespace: the modules come from the cache.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", inNetns+"=")
	out, err := cmd.CombinedOutput()
	t.Logf("go test of the example:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
}

// The drop-in and redis_rate itself, called back to back on the same server with
// hour-long limits (so that the time between the two calls changes nothing that they
// report in whole requests): the same Allowed and Remaining on every call, the same
// refusals, and times within half a minute.
func TestTheSameDecisionsAsRedisRate(t *testing.T) {
	s := testserver.Shared(t, "module", testserver.Options{})
	ctx := context.Background()
	for name, mk := range map[string]func() (redis.UniversalClient, func()){
		"Client": func() (redis.UniversalClient, func()) {
			c := redis.NewClient(&redis.Options{Addr: s.Addr})
			return c, func() { c.Close() }
		},
		"Ring": func() (redis.UniversalClient, func()) {
			c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"server0": s.Addr}})
			return c, func() { c.Close() }
		},
	} {
		rdb, done := mk()
		ours := redis_rate.NewLimiter(rdb)
		theirs := upstream.NewLimiter(rdb)
		key := "same:" + name
		_ = ours.Reset(ctx, key)
		type step struct {
			what string
			n    int
			most bool
		}
		steps := []step{{"allow", 1, false}, {"allow", 1, false}, {"allow n", 2, false}, {"peek", 0, false},
			{"at most", 3, true}, {"allow", 1, false}, {"above burst", 100, false}, {"at most", 2, true},
			{"at most 0", 0, true}}
		for _, lim := range []redis_rate.Limit{redis_rate.PerHour(7), {Rate: 10, Burst: 4, Period: time.Hour}} {
			up := upstream.Limit{Rate: lim.Rate, Burst: lim.Burst, Period: lim.Period}
			_ = ours.Reset(ctx, key)
			for _, st := range steps {
				var a *redis_rate.Result
				var b *upstream.Result
				var errA, errB error
				if st.most {
					a, errA = ours.AllowAtMost(ctx, key, lim, st.n)
					b, errB = theirs.AllowAtMost(ctx, key, up, st.n)
				} else {
					a, errA = ours.AllowN(ctx, key, lim, st.n)
					b, errB = theirs.AllowN(ctx, key, up, st.n)
				}
				if errA != nil || errB != nil {
					t.Fatalf("%s %v %s: %v / %v", name, lim, st.what, errA, errB)
				}
				same := a.Allowed == b.Allowed && a.Remaining == b.Remaining &&
					(a.RetryAfter < 0) == (b.RetryAfter < 0) &&
					near(a.RetryAfter, b.RetryAfter) && near(a.ResetAfter, b.ResetAfter)
				if !same {
					t.Fatalf("%s %v %s %d:\n drop-in   %+v\n redis_rate %+v", name, lim, st.what, st.n, *a, *b)
				}
			}
			// redis_rate's state is its own key, RL.GCRA's another.
			if rdb.Exists(ctx, "rate:"+key).Val() != 1 || rdb.Exists(ctx, redis_rate.KeyPrefix+key).Val() != 1 {
				t.Fatalf("the two states are not both there")
			}
			_ = ours.Reset(ctx, key)
		}
		done()
	}
}

// near: within half a minute, with intervals of minutes (the two calls are made back
// to back; redis_rate's times are the script's floating-point seconds, the drop-in's
// whole milliseconds rounded up).
func near(x, y time.Duration) bool {
	d := x - y
	return d > -30*time.Second && d < 30*time.Second
}

// The drop-in on a Cluster: each key goes to its slot's node.
func TestOnAClusterClient(t *testing.T) {
	c := testserver.SharedCluster(t, "module", testserver.Options{})
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rdb.Close()
	ctx := context.Background()
	l := redis_rate.NewLimiter(rdb)
	for i := 0; i < 20; i++ {
		key := "cluster:" + string(rune('a'+i))
		_ = l.Reset(ctx, key)
		for j := 0; j < 3; j++ {
			res, err := l.Allow(ctx, key, redis_rate.PerMinute(2))
			if err != nil || res.Allowed != map[bool]int{true: 1, false: 0}[j < 2] {
				t.Fatalf("%s call %d: %+v %v", key, j, res, err)
			}
		}
	}
}
