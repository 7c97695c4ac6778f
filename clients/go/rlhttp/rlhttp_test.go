package rlhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/goredisrl"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/testserver"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlhttp"
)

func TestMain(m *testing.M) { testserver.Main(m) }

var ctx = context.Background()

// The middleware is a func(http.Handler) http.Handler: what chi's r.Use, gorilla's
// router.Use and a plain wrap of the standard library's mux take.
var _ func(http.Handler) http.Handler = (&rlhttp.Middleware{}).Handler

// clock is a fake clock, for the calls (AT), the breaker and the shadow log.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_900_000_000_000)} }
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func rdbOf(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return c
}

func moduleRdb(t *testing.T) *redis.Client {
	return rdbOf(t, testserver.Shared(t, "module", testserver.Options{}).Addr)
}

// logs captures what the middleware logs.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logs) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// serve serves h on a real loopback listener (httptest binds 127.0.0.1:0).
func serve(t *testing.T, h http.Handler) *httptest.Server {
	s := httptest.NewUnstartedServer(h)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the panicking handler's stack
	s.Start()
	t.Cleanup(s.Close)
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("not served on loopback: %s", s.URL)
	}
	return s
}

func hello() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok := rlhttp.ResultFrom(r.Context())
		_ = json.NewEncoder(w).Encode(map[string]any{"limited": ok, "remaining": res.Remaining})
	})
}

func get(t *testing.T, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res
}

// patient is the tests' timeout of a call, where an outage is not what they test: a
// loaded machine must not turn a slow answer into one.
const patient = 10 * time.Second

func mustNew(t *testing.T, o rlhttp.Options) *rlhttp.Middleware {
	t.Helper()
	if o.Timeout == 0 {
		o.Timeout = patient
	}
	m, err := rlhttp.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func byUser(r *http.Request) string { return r.Header.Get("X-User") }

func TestServedOnLoopbackNAllowedThen429WithHeaders(t *testing.T) {
	rdb := moduleRdb(t)
	rdb.Del(ctx, "rl:http:api:ann", "rl:http:api:bob")
	c := newClock()
	mw := mustNew(t, rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(rdb)),
		Policy:  ratelimit.GCRA{MaxBurst: 2, Count: 1, Period: time.Hour, Name: "api"},
		Key:     byUser,
		Prefix:  "rl:http:",
		Now:     c.Now,
	})
	srv := serve(t, mw.Handler(hello()))
	for i := 0; i < 3; i++ {
		res := get(t, srv.URL, "X-User", "ann")
		if res.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, res.StatusCode)
		}
		if got := res.Header.Get("RateLimit-Remaining"); got != strconv.Itoa(2-i) {
			t.Fatalf("request %d: RateLimit-Remaining %q", i, got)
		}
	}
	res := get(t, srv.URL, "X-User", "ann")
	want := map[string]string{
		"RateLimit-Limit":     "3",
		"RateLimit-Remaining": "0",
		"RateLimit-Reset":     "10800",
		"RateLimit-Policy":    `"api";q=3;w=10800`,
		"RateLimit":           `"api";r=0;t=10800`,
		"Retry-After":         "3600",
		"Content-Type":        "application/json; charset=utf-8",
	}
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the fourth request: %d", res.StatusCode)
	}
	for k, v := range want {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	var body map[string]any
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body["error"] != "too many requests" || body["retry_after_ms"] != float64(3600000) {
		t.Fatalf("body %v %v", body, err)
	}
	// Another key has its own bucket; the refusal counted nothing.
	if res := get(t, srv.URL, "X-User", "bob"); res.StatusCode != 200 || res.Header.Get("RateLimit-Remaining") != "2" {
		t.Fatalf("bob: %d %v", res.StatusCode, res.Header)
	}
	if tat := rdb.Get(ctx, "rl:http:api:ann").Val(); tat != strconv.FormatInt(c.Now().Add(3*time.Hour).UnixMicro(), 10) {
		t.Fatalf("the refused request changed the state: %s", tat)
	}
	// No key: not limited.
	if res := get(t, srv.URL); res.StatusCode != 200 || res.Header.Get("RateLimit-Limit") != "" {
		t.Fatalf("without a key: %d %v", res.StatusCode, res.Header)
	}
	if s := mw.Stats(); s.Allowed != 4 || s.Limited != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// status sends a GET as a user, from any goroutine: its status, or -1.
func status(url, user string) int {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-User", user)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestALeaseIsHeldWhileTheHandlerRuns(t *testing.T) {
	rdb := moduleRdb(t)
	key := "rl:http:report:carol"
	rdb.Del(ctx, key)
	entered := make(chan struct{}, 4)
	gate := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/report", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-gate
		w.Write([]byte("done"))
	})
	mux.HandleFunc("/panic", func(w http.ResponseWriter, r *http.Request) {
		if n := rdb.ZCard(ctx, key).Val(); n != 1 {
			t.Errorf("%d leases held inside the handler, not 1", n)
		}
		panic("the handler failed")
	})
	mw := mustNew(t, rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(rdb)),
		Policy:  ratelimit.Lease{Limit: 2, TTL: time.Minute, Name: "report"},
		Key:     byUser,
		Prefix:  "rl:http:",
	})
	srv := serve(t, mw.Handler(mux))
	codes := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() { codes <- status(srv.URL+"/report", "carol") }()
	}
	<-entered
	<-entered
	if n := rdb.ZCard(ctx, key).Val(); n != 2 {
		t.Fatalf("%d leases held by the two requests inside, not 2", n)
	}
	if code := status(srv.URL+"/report", "carol"); code != http.StatusTooManyRequests {
		t.Fatalf("a third request while two are in flight: %d", code)
	}
	close(gate)
	for i := 0; i < 2; i++ {
		if code := <-codes; code != 200 {
			t.Fatalf("a request in flight ended with %d", code)
		}
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("the leases were not released: %v", rdb.ZRangeWithScores(ctx, key, 0, -1).Val())
	}
	if code := status(srv.URL+"/panic", "carol"); code != -1 && code != 500 {
		t.Fatalf("the panicking handler answered %d", code)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("a handler that panicked kept its lease")
	}
}

// A Lease rule of an All policy beside a rate: the lease is released, the rate kept.
func TestALeaseRuleOfAnAllPolicy(t *testing.T) {
	rdb := moduleRdb(t)
	rdb.Del(ctx, "rl:http:both:dan:rate", "rl:http:both:dan:lease")
	mw := mustNew(t, rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(rdb)),
		Policy: ratelimit.All{Name: "both", Rules: []ratelimit.Policy{
			ratelimit.Fixed{Limit: 5, Window: time.Hour},
			ratelimit.Lease{Limit: 1, TTL: time.Minute},
		}},
		Keys:   func(r *http.Request) []string { u := byUser(r); return []string{u + ":rate", u + ":lease"} },
		Prefix: "rl:http:",
	})
	inside := int64(-1)
	srv := serve(t, mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside = rdb.ZCard(ctx, "rl:http:both:dan:lease").Val()
	})))
	if code := status(srv.URL, "dan"); code != 200 || inside != 1 {
		t.Fatalf("%d, %d leases inside", code, inside)
	}
	if rdb.Exists(ctx, "rl:http:both:dan:lease").Val() != 0 || rdb.Get(ctx, "rl:http:both:dan:rate").Val() != "1" {
		t.Fatal("the lease was not released, or the rate not counted")
	}
}

// A server that is not there: every request served unlimited; the breaker opens on the
// first outage, so that the next ones are decided without a call until its cooldown
// (on a fake clock) has passed, when one request probes.
func TestFailOpenWithTheBreaker(t *testing.T) {
	port, err := testserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	breaker := rlhttp.NewBreaker(rlhttp.BreakerOptions{Now: c.Now})
	var said logs
	rdb := rdbOf(t, "127.0.0.1:"+strconv.Itoa(port))
	for _, closed := range []bool{false, true} {
		mw := mustNew(t, rlhttp.Options{
			Limiter:    ratelimit.New(goredisrl.New(rdb)),
			Policy:     ratelimit.Fixed{Limit: 1, Window: time.Hour},
			Key:        byUser,
			Breaker:    breaker,
			FailClosed: closed,
			Logger:     said.logger(),
		})
		srv := serve(t, mw.Handler(hello()))
		for i := 0; i < 4; i++ {
			res := get(t, srv.URL, "X-User", "erin")
			if closed {
				if res.StatusCode != 503 || res.Header.Get("Retry-After") != "1" {
					t.Fatalf("fail closed, request %d: %d %v", i, res.StatusCode, res.Header)
				}
			} else if res.StatusCode != 200 || res.Header.Get("RateLimit-Limit") != "" {
				t.Fatalf("fail open, request %d: %d %v", i, res.StatusCode, res.Header)
			}
		}
		if s := mw.Stats(); s.Unavailable != 4 {
			t.Fatalf("stats %+v", s)
		}
		c.Advance(time.Second) // the cooldown: the next request probes
	}
	// Fail open: 1 call, 3 skipped; after the cooldown, fail closed: 1 probe, 3 skipped.
	if s := breaker.Stats(); s.Calls != 2 || s.Skipped != 6 || s.Outages != 2 || s.Opened != 2 || breaker.State() != rlhttp.Open {
		t.Fatalf("breaker %+v %s", s, breaker.State())
	}
	if n := strings.Count(said.String(), "rate limiter unavailable"); n != 2 {
		t.Fatalf("%d warnings, one per outage (2):\n%s", n, said.String())
	}
}

// A server that does not answer (CLIENT PAUSE): the call is bounded by the timeout,
// and while the breaker is open no call reaches the server. Counted on the server.
func TestABoundedCallAndNoCallsWhileOpen(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	admin := rdbOf(t, s.Addr)
	c := newClock()
	breaker := rlhttp.NewBreaker(rlhttp.BreakerOptions{Now: c.Now})
	// A client without a timeout of its own that would end the call first.
	slow := redis.NewClient(&redis.Options{Addr: s.Addr, ReadTimeout: -1})
	defer slow.Close()
	o := rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(slow)),
		Policy:  ratelimit.GCRA{MaxBurst: 9, Count: 10, Period: time.Second},
		Key:     byUser,
		Breaker: breaker,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	// The requests that must be answered (the one before the pause, the probe after it)
	// go through a middleware with the patient timeout, on the same breaker: on a loaded
	// machine they may take longer than the 2 s that the paused calls are bounded by.
	answered := serve(t, mustNew(t, o).Handler(hello()))
	o.Timeout = 2 * time.Second // the pause outlasts it
	srv := serve(t, mustNew(t, o).Handler(hello()))
	if code := status(answered.URL, "fay"); code != 200 || breaker.State() != rlhttp.Closed {
		t.Fatal(code, breaker.State())
	}
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		for i := 0; i < 3; i++ {
			if code := status(srv.URL, "fay"); code != 200 {
				t.Fatalf("round %d request %d: %d", round, i, code)
			}
		}
		c.Advance(time.Second)
	}
	if err := admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	// One call before the pause, one that timed out in each round (they run once the
	// pause ends): 3 calls of RL.GCRA in all, for 7 requests.
	deadline := time.Now().Add(10 * time.Second)
	for calls(t, admin, "rl.gcra") < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := calls(t, admin, "rl.gcra"); n != 3 {
		t.Fatalf("%d calls of RL.GCRA reached the server, not 3", n)
	}
	if st := breaker.Stats(); st.Skipped != 4 || st.Opened != 2 {
		t.Fatalf("breaker %+v", st)
	}
	// The server answers again: the next probe closes the breaker.
	if code := status(answered.URL, "fay"); code != 200 || breaker.State() != rlhttp.Closed {
		t.Fatalf("%d %s", code, breaker.State())
	}
}

func calls(t *testing.T, rdb *redis.Client, command string) int {
	info := rdb.Info(ctx, "commandstats").Val()
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(line)), "cmdstat_"+command+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

func TestAServerWithoutTheModuleIsSaidOnceAndLoudly(t *testing.T) {
	bare := testserver.Shared(t, "bare", testserver.Options{NoModule: true})
	rdb := rdbOf(t, bare.Addr)
	c := newClock()
	var said logs
	policy := ratelimit.Fixed{Limit: 2, Window: time.Hour}
	mw := mustNew(t, rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(rdb)),
		Policy:  policy,
		Key:     byUser,
		Breaker: rlhttp.NewBreaker(rlhttp.BreakerOptions{Now: c.Now}),
		Logger:  said.logger(),
	})
	srv := serve(t, mw.Handler(hello()))
	for i := 0; i < 3; i++ {
		if code := status(srv.URL, "gus"); code != 200 {
			t.Fatalf("request %d: %d", i, code)
		}
		c.Advance(time.Second) // every request probes, and finds the module missing
	}
	text := said.String()
	if strings.Count(text, "level=ERROR") != 1 || !strings.Contains(text, "served UNLIMITED") || !strings.Contains(text, "MODULE LOAD") {
		t.Fatalf("want one error saying so and how to load the module:\n%s", text)
	}
	// The Lua twins as the fallback: limited as by the module.
	rdb.Del(ctx, "rl:fixed:gus")
	twins := mustNew(t, rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(rdb), ratelimit.WithTwins(ratelimit.TwinsFallback), ratelimit.WithLogger(said.logger())),
		Policy:  policy,
		Key:     byUser,
		Now:     c.Now,
	})
	srv = serve(t, twins.Handler(hello()))
	var codes []int
	for i := 0; i < 3; i++ {
		codes = append(codes, status(srv.URL, "gus"))
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Fatalf("with the twins: %v", codes)
	}
}

func TestShadowModeCountsAndLogsOncePerKeyAndWindow(t *testing.T) {
	rdb := moduleRdb(t)
	rdb.Del(ctx, "rl:http:fixed:hal", "rl:http:fixed:ida")
	c := newClock()
	var said logs
	mw := mustNew(t, rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(rdb)),
		Policy:  ratelimit.Fixed{Limit: 2, Window: time.Minute},
		Key:     byUser,
		Prefix:  "rl:http:",
		Shadow:  true,
		Now:     c.Now,
		Logger:  said.logger(),
	})
	srv := serve(t, mw.Handler(hello()))
	for i := 0; i < 5; i++ {
		res := get(t, srv.URL, "X-User", "hal")
		if res.StatusCode != 200 || res.Header.Get("RateLimit-Limit") != "" || res.Header.Get("Retry-After") != "" {
			t.Fatalf("shadow mode, request %d: %d %v", i, res.StatusCode, res.Header)
		}
	}
	status(srv.URL, "ida")
	status(srv.URL, "ida")
	status(srv.URL, "ida")
	if s := mw.Stats(); s.ShadowLimited != 4 || s.Allowed != 4 {
		t.Fatalf("stats %+v", s)
	}
	if n := strings.Count(said.String(), "would have been refused"); n != 2 {
		t.Fatalf("%d log lines, not one per key (2):\n%s", n, said.String())
	}
	c.Advance(time.Minute) // a new window
	for i := 0; i < 4; i++ {
		status(srv.URL, "hal")
	}
	if n := strings.Count(said.String(), "would have been refused"); n != 3 || mw.Stats().ShadowLimited != 6 {
		t.Fatalf("%d log lines after a new window, not 3; %+v", n, mw.Stats())
	}
	// Judged and counted: the allowed requests are in Redis.
	if v := rdb.Get(ctx, "rl:http:fixed:hal").Val(); v != "2" {
		t.Fatalf("count %q", v)
	}
}

func TestABadPolicyIsAnErrorNotAnOutage(t *testing.T) {
	var said logs
	mw := mustNew(t, rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(moduleRdb(t))),
		Policy:  ratelimit.Fixed{Limit: 0, Window: time.Minute},
		Key:     byUser,
		Logger:  said.logger(),
	})
	srv := serve(t, mw.Handler(hello()))
	if code := status(srv.URL, "jo"); code != 500 {
		t.Fatalf("%d", code)
	}
	if mw.Breaker().State() != rlhttp.Closed || mw.Stats().Errors != 1 || !strings.Contains(said.String(), "invalid limit") {
		t.Fatalf("%s %+v %s", mw.Breaker().State(), mw.Stats(), said.String())
	}
}

// Concurrent requests through a real server: exactly the limit is allowed. Run with
// -race.
func TestConcurrentRequestsGetExactlyTheLimit(t *testing.T) {
	rdb := moduleRdb(t)
	rdb.Del(ctx, "rl:http:fixed:kim")
	c := newClock()
	mw := mustNew(t, rlhttp.Options{
		Limiter: ratelimit.New(goredisrl.New(rdb)),
		Policy:  ratelimit.Fixed{Limit: 50, Window: time.Hour},
		Key:     byUser,
		Prefix:  "rl:http:",
		Now:     c.Now,
	})
	srv := serve(t, mw.Handler(hello()))
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := map[int]int{}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				code := status(srv.URL, "kim")
				mu.Lock()
				count[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if count[200] != 50 || count[429] != 70 {
		t.Fatalf("%v", count)
	}
	if s := mw.Stats(); s.Allowed != 50 || s.Limited != 70 {
		t.Fatalf("%+v", s)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	for _, o := range []rlhttp.Options{
		{Policy: ratelimit.Fixed{Limit: 1, Window: time.Second}},
		{Limiter: ratelimit.New(goredisrl.New(redis.NewClient(&redis.Options{})))},
		{Limiter: ratelimit.New(goredisrl.New(redis.NewClient(&redis.Options{}))), Policy: ratelimit.Fixed{Limit: 1, Window: time.Second}, Timeout: -1},
	} {
		if _, err := rlhttp.New(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
