// Command bench measures what a rate-limited request costs Redis with go-redis/redis_rate
// v10 (its GCRA Lua script) and with this module's drop-in for it (RL.GCRA), on one
// server, in one run: the server's CPU time per request and the commands it ran per
// request, from INFO commandstats, which do not depend on the machine's load; and the
// requests per second the client saw, which do.
//
//	go run ./bench -module ../../target/release/libredis_ratelimit.so [-server valkey-server]
//
// Every phase sends the same requests (Allow of PerSecond(1000000) over -keys keys, from
// -conns goroutines: every request allowed), round after round, the phases' order turned
// each round; a row is the median of its rounds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	upstream "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/redis_rate"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rueidisrl"
)

type phase struct {
	name string
	// topLevel are the commands the client sends (their time includes what a script
	// runs inside them); the others are counted as commands, not as time again.
	topLevel []string
	allow    func(ctx context.Context, key string) (bool, error)
}

type sample struct {
	rps, usec, commands, topCalls float64
}

func main() {
	module := flag.String("module", "", "the module's .so (a release build)")
	server := flag.String("server", "redis-server", "the server binary")
	requests := flag.Int("requests", 20000, "requests per phase and round")
	conns := flag.Int("conns", 16, "concurrent callers")
	keys := flag.Int("keys", 1000, "distinct keys")
	rounds := flag.Int("rounds", 5, "rounds")
	flag.Parse()
	if *module == "" {
		fmt.Fprintln(os.Stderr, "bench: -module is required")
		os.Exit(2)
	}
	os.Setenv("RATELIMIT_MODULE", *module)
	os.Setenv("REDIS_SERVER", *server)
	s, err := testserver.Launch(testserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer s.Stop()
	if err := run(s, *requests, *conns, *keys, *rounds); err != nil {
		s.Stop()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(s *testserver.Server, requests, conns, keys, rounds int) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: conns})
	defer rdb.Close()
	rue, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer rue.Close()
	theirs := upstream.NewLimiter(rdb)
	ours := redis_rate.NewLimiter(rdb)
	typed := ratelimit.New(rueidisrl.New(rue))
	gcra := ratelimit.GCRA{MaxBurst: 999999, Count: 1000000, Period: time.Second}
	phases := []phase{
		{"redis_rate v10 (its Lua script), go-redis", []string{"evalsha", "eval", "script"}, func(ctx context.Context, key string) (bool, error) {
			r, err := theirs.Allow(ctx, key, upstream.PerSecond(1000000))
			return err == nil && r.Allowed == 1, err
		}},
		{"the drop-in redis_rate (RL.GCRA), go-redis", []string{"rl.gcra"}, func(ctx context.Context, key string) (bool, error) {
			r, err := ours.Allow(ctx, key, redis_rate.PerSecond(1000000))
			return err == nil && r.Allowed == 1, err
		}},
		{"ratelimit.Limiter.Check (RL.GCRA), rueidis", []string{"rl.gcra"}, func(ctx context.Context, key string) (bool, error) {
			r, err := typed.Check(ctx, gcra, []string{"rl:typed:" + key})
			return err == nil && r.Allowed, err
		}},
	}
	version, _ := rdb.Info(ctx, "server").Result()
	results := make([][]sample, len(phases))
	for round := 0; round < rounds; round++ {
		for j := range phases {
			i := (j + round) % len(phases)
			sm, err := measure(ctx, rdb, phases[i], requests, conns, keys, round)
			if err != nil {
				return fmt.Errorf("%s: %w", phases[i].name, err)
			}
			results[i] = append(results[i], sm)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	name := "Redis " + field(version, "redis_version")
	if v := field(version, "valkey_version"); v != "?" {
		name = "Valkey " + v
	}
	fmt.Printf("bench-go: %s with the module; %d rounds of %d requests per row, %d callers, %d keys; load average %s\n\n",
		name, rounds, requests, conns, keys, strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Println("| client | server µs / request | ratio | server commands / request | sent / request | req/s (median) | lowest–highest |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	base := median(results[0], func(s sample) float64 { return s.usec })
	for i, p := range phases {
		usec := median(results[i], func(s sample) float64 { return s.usec })
		rps := sorted(results[i], func(s sample) float64 { return s.rps })
		fmt.Printf("| %s | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f–%.0f |\n", p.name, usec, usec/base,
			median(results[i], func(s sample) float64 { return s.commands }),
			median(results[i], func(s sample) float64 { return s.topCalls }),
			rps[len(rps)/2], rps[0], rps[len(rps)-1])
	}
	return nil
}

func field(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return "?"
}

// measure runs one phase: CONFIG RESETSTAT, the requests, INFO commandstats.
func measure(ctx context.Context, rdb *redis.Client, p phase, requests, conns, keys, round int) (sample, error) {
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return sample{}, err
	}
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(requests) {
					return
				}
				key := "bench:" + strconv.Itoa(round) + ":" + strconv.FormatInt(n%int64(keys), 10)
				ok, err := p.allow(ctx, key)
				if err != nil || !ok {
					failed.Store(fmt.Sprintf("request %d: allowed=%v %v", n, ok, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f != nil {
		return sample{}, fmt.Errorf("%v", f)
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return sample{}, err
	}
	var calls, topCalls, usec float64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(line)), "cmdstat_"), ":")
		if !ok || name == "info" || name == "config" || !strings.HasPrefix(rest, "calls=") {
			continue
		}
		var n, us float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				n, _ = strconv.ParseFloat(v, 64)
			case "usec":
				us, _ = strconv.ParseFloat(v, 64)
			}
		}
		calls += n
		for _, top := range p.topLevel {
			if name == top || strings.HasPrefix(name, top+"|") {
				topCalls += n
				usec += us
			}
		}
	}
	r := float64(requests)
	return sample{rps: r / elapsed.Seconds(), usec: usec / r, commands: calls / r, topCalls: topCalls / r}, nil
}

func sorted(s []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	sort.Float64s(out)
	return out
}

func median(s []sample, f func(sample) float64) float64 {
	v := sorted(s, f)
	return v[len(v)/2]
}
