// Package rlhttp is net/http middleware that limits requests with the module's
// commands: a standard func(http.Handler) http.Handler, so it fits the standard
// library's mux, chi (r.Use) and gorilla/mux (router.Use).
//
//	mw, err := rlhttp.New(rlhttp.Options{
//		Limiter: ratelimit.New(goredisrl.New(rdb)),
//		Policy:  ratelimit.GCRA{MaxBurst: 19, Count: 10, Period: time.Second, Name: "api"},
//	})
//	http.ListenAndServe(addr, mw.Handler(mux))
//
// A refused request gets 429 with Retry-After and the rate limit headers of the Python
// and Node packages (RateLimit-Limit, -Remaining, -Reset, RateLimit-Policy, RateLimit);
// an allowed one goes on with the headers on its response and the result in its
// context (ResultFrom). A Lease policy (or an All with a Lease rule) holds its lease
// while the handler runs. When the limiter cannot answer within Timeout (250 ms), the
// request is served unlimited (fail open) or refused with 503 (FailClosed), and a
// circuit breaker spares the next requests the wait. In Shadow mode every request
// passes: the policy is judged and counted, and a would-be refusal is counted and
// logged.
package rlhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// DefaultTimeout is how long the middleware waits for the limiter by default.
const DefaultTimeout = 250 * time.Millisecond

// Options configure the middleware. Limiter and a policy (Policy or PolicyFunc) are
// required.
type Options struct {
	// Limiter calls the commands (or their Lua twins, with ratelimit.WithTwins).
	Limiter *ratelimit.Limiter
	// Policy is the policy of every request...
	Policy ratelimit.Policy
	// ...or PolicyFunc chooses one per request (nil: not limited).
	PolicyFunc func(*http.Request) ratelimit.Policy
	// Key is the identifier of a request ("": let it through). Default: the client's
	// address (the host of RemoteAddr; behind a proxy, read the header it sets).
	Key func(*http.Request) string
	// Keys gives several identifiers, one per key of the policy (Multi, Sliding, All);
	// nil or empty lets the request through. It takes the place of Key.
	Keys func(*http.Request) []string
	// Prefix: Redis keys are <Prefix><policy name>:<identifier> (default "rl:").
	Prefix string
	// Cost is the cost of a request (default 1).
	Cost func(*http.Request) int64
	// FailClosed refuses requests with 503 and Retry-After: 1 when the limiter cannot
	// answer; by default they are served unlimited (fail open).
	FailClosed bool
	// Timeout bounds each call of the limiter (default 250 ms).
	Timeout time.Duration
	// Breaker is the circuit breaker (default NewBreaker(BreakerOptions{}): open on one
	// outage, for one second); NoBreaker calls the limiter on every request.
	Breaker   *Breaker
	NoBreaker bool
	// Shadow judges and counts every request but lets it through: a would-be refusal
	// is counted (Stats().ShadowLimited) and logged once per key and window, and no
	// rate limit header is sent.
	Shadow bool
	// Headers chooses the headers; NoHeadersWhenAllowed sends them on refusals only.
	Headers              ratelimit.HeaderOptions
	NoHeadersWhenAllowed bool
	// OnLimited writes a refused request's response; the headers are already set. The
	// default writes 429 and {"error":"too many requests","retry_after_ms":N}.
	OnLimited func(w http.ResponseWriter, r *http.Request, result ratelimit.Result)
	// Logger receives the warnings (an outage, a lease not released) and the error of a
	// server without the module; default slog.Default().
	Logger *slog.Logger
	// Now, when set, is the time every call is judged at (the commands' AT) and the
	// clock of the shadow log: for tests, and for apps that keep their own clock. By
	// default the calls are judged at the server's clock, and the log uses time.Now.
	Now func() time.Time
}

// Stats count what the middleware decided.
type Stats struct {
	Allowed       uint64 // requests the limiter allowed
	Limited       uint64 // requests refused (429)
	ShadowLimited uint64 // requests that would have been refused, in Shadow mode (they passed)
	Unavailable   uint64 // requests decided without an answer (an outage, the breaker open): served unlimited or 503
	Errors        uint64 // calls the server refused as bad (a bug in the policy): 500
}

// Middleware limits the requests of the handlers it wraps.
type Middleware struct {
	o       Options
	breaker *Breaker
	logger  *slog.Logger
	now     func() time.Time

	allowed, limited, shadowLimited, unavailable, errs atomic.Uint64

	missingSaid atomic.Bool // the server was found without the module and it was said

	shadowMu   sync.Mutex
	shadowSaid map[string]time.Time // key -> until when a would-be refusal is not logged again
}

// New checks the options and makes the middleware.
func New(o Options) (*Middleware, error) {
	if o.Limiter == nil {
		return nil, errors.New("rlhttp: Options.Limiter is required")
	}
	if o.Policy == nil && o.PolicyFunc == nil {
		return nil, errors.New("rlhttp: a Policy or a PolicyFunc is required")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		return nil, errors.New("rlhttp: Timeout must be positive")
	}
	if o.Prefix == "" {
		o.Prefix = "rl:"
	}
	m := &Middleware{o: o, logger: o.Logger, now: o.Now, shadowSaid: map[string]time.Time{}}
	switch {
	case o.NoBreaker:
	case o.Breaker != nil:
		m.breaker = o.Breaker
	default:
		m.breaker = NewBreaker(BreakerOptions{})
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	if m.now == nil {
		m.now = time.Now
	}
	return m, nil
}

// Breaker is the middleware's circuit breaker (nil with NoBreaker).
func (m *Middleware) Breaker() *Breaker { return m.breaker }

// Stats are the middleware's counts so far.
func (m *Middleware) Stats() Stats {
	return Stats{Allowed: m.allowed.Load(), Limited: m.limited.Load(), ShadowLimited: m.shadowLimited.Load(),
		Unavailable: m.unavailable.Load(), Errors: m.errs.Load()}
}

type resultKey struct{}

// ResultFrom is the limiter's result of the request whose context this is (false when
// the request was not limited: no policy, no key, or the limiter unavailable).
func ResultFrom(ctx context.Context) (ratelimit.Result, bool) {
	r, ok := ctx.Value(resultKey{}).(ratelimit.Result)
	return r, ok
}

// ClientAddress is the default key: the host of the request's RemoteAddr.
func ClientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

var outageReplies = []string{"LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "OOM", "BUSY", "NOREPLICAS"}

// IsOutage tells an outage of the limiter (no answer in time, a connection refused or
// lost, a server loading, out of memory or read-only, a server without the module)
// from a refused call (bad arguments in the policy: a bug to surface).
func IsOutage(err error) bool {
	var missing *ratelimit.ModuleMissingError
	switch {
	case err == nil:
		return false
	case errors.As(err, &missing), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, ratelimit.ErrInvalidArgument), errors.Is(err, ratelimit.ErrTwinUnavailable):
		return false
	}
	var re *ratelimit.ReplyError
	if errors.As(err, &re) {
		text := strings.TrimPrefix(re.Message, "ERR ")
		for _, p := range outageReplies {
			if strings.HasPrefix(strings.ToUpper(text), p) {
				return true
			}
		}
		return false
	}
	return true
}

func (m *Middleware) identities(r *http.Request) []string {
	if m.o.Keys != nil {
		return m.o.Keys(r)
	}
	key := ClientAddress
	if m.o.Key != nil {
		key = m.o.Key
	}
	if id := key(r); id != "" {
		return []string{id}
	}
	return nil
}

// check is one call of the limiter, bounded by Timeout whatever the client's own
// timeouts, and not cancelled with the request (a breaker's probe always ends).
func (m *Middleware) check(r *http.Request, p ratelimit.Policy, keys []string, cost int64) (ratelimit.Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.o.Timeout)
	defer cancel()
	type answer struct {
		r   ratelimit.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := m.o.Limiter.Check(ctx, p, keys, append([]ratelimit.Option{ratelimit.Cost(cost)}, m.at()...)...)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		return a.r, a.err
	case <-ctx.Done():
		return ratelimit.Result{}, fmt.Errorf("rlhttp: no answer from the limiter within %v: %w", m.o.Timeout, ctx.Err())
	}
}

// Handler wraps next: the middleware as func(http.Handler) http.Handler.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		policy := m.o.Policy
		if m.o.PolicyFunc != nil {
			policy = m.o.PolicyFunc(r)
		}
		ids := m.identities(r)
		if policy == nil || len(ids) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = m.o.Prefix + policy.PolicyName() + ":" + id
		}
		cost := int64(1)
		if m.o.Cost != nil {
			cost = m.o.Cost(r)
		}
		if !m.breaker.Allow() {
			m.unavailableResponse(w, r, next)
			return
		}
		result, err := m.check(r, policy, keys, cost)
		if err != nil {
			if !IsOutage(err) {
				// The limiter answered: a bug in the call, not an outage.
				m.breaker.Success()
				m.errs.Add(1)
				m.logger.Error("redis-ratelimit: the limiter refused the call of "+policy.PolicyName(), "keys", keys, "error", err)
				http.Error(w, "rate limiter misconfigured", http.StatusInternalServerError)
				return
			}
			m.breaker.Failure()
			m.sayOutage(err, r)
			m.unavailableResponse(w, r, next)
			return
		}
		m.breaker.Success()
		m.missingSaid.Store(false)
		m.decided(w, r, next, policy, keys, result)
	})
}

func (m *Middleware) decided(w http.ResponseWriter, r *http.Request, next http.Handler, policy ratelimit.Policy, keys []string, result ratelimit.Result) {
	if !result.Allowed && m.o.Shadow {
		m.shadowLimited.Add(1)
		m.sayShadow(r, policy, keys, result)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resultKey{}, result)))
		return
	}
	if !result.Allowed {
		m.limited.Add(1)
		m.setHeaders(w, result)
		if m.o.OnLimited != nil {
			m.o.OnLimited(w, r, result)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": "too many requests", "retry_after_ms": result.RetryAfter.Milliseconds()})
		return
	}
	m.allowed.Add(1)
	if !m.o.Shadow && !m.o.NoHeadersWhenAllowed {
		m.setHeaders(w, result)
	}
	if policy.HoldsLease() && result.LeaseID != "" {
		defer m.release(r, policy, keys, result.LeaseID)
	}
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resultKey{}, result)))
}

// setHeaders sets the rate limit headers of a result on the response.
func (m *Middleware) setHeaders(w http.ResponseWriter, result ratelimit.Result) {
	for k, v := range ratelimit.Headers(result, m.o.Headers) {
		w.Header().Set(k, v)
	}
}

// at is the option that judges a call at Options.Now, when it is set.
func (m *Middleware) at() []ratelimit.Option {
	if m.o.Now == nil {
		return nil
	}
	return []ratelimit.Option{ratelimit.At(m.o.Now())}
}

// release gives back the leases a request held (deferred: also when the handler
// panics); a lease not released ends at its TTL.
func (m *Middleware) release(r *http.Request, policy ratelimit.Policy, keys []string, id string) {
	leaseKeys := keys
	if all, ok := policy.(ratelimit.All); ok {
		leaseKeys = nil
		for i, rule := range all.Rules {
			if rule.HoldsLease() && i < len(keys) {
				leaseKeys = append(leaseKeys, keys[i])
			}
		}
	}
	for _, key := range leaseKeys {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.o.Timeout)
		_, err := m.o.Limiter.Release(ctx, key, id, m.at()...)
		cancel()
		if err != nil {
			m.logger.Warn("redis-ratelimit: lease not released; it ends at its TTL", "lease", id, "key", key, "error", err)
		}
	}
}

func (m *Middleware) unavailableResponse(w http.ResponseWriter, r *http.Request, next http.Handler) {
	m.unavailable.Add(1)
	if !m.o.FailClosed {
		next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"error":"rate limiter unavailable"}` + "\n"))
}

func (m *Middleware) served() string {
	if m.o.FailClosed {
		return "refused (503)"
	}
	return "served UNLIMITED"
}

func (m *Middleware) sayOutage(err error, r *http.Request) {
	var missing *ratelimit.ModuleMissingError
	if errors.As(err, &missing) {
		if m.missingSaid.CompareAndSwap(false, true) {
			m.logger.Error("\n*** redis-ratelimit: " + missing.Error() + ".\n*** Every request is " + m.served() +
				" until the module is loaded. ***\n")
		}
		return
	}
	m.logger.Warn("redis-ratelimit: rate limiter unavailable: request "+m.served(), "path", r.URL.Path, "error", err)
}

// sayShadow logs a would-be refusal once per key and window: not again for the same
// keys until the state the refusal saw is full again.
func (m *Middleware) sayShadow(r *http.Request, policy ratelimit.Policy, keys []string, result ratelimit.Result) {
	now := m.now()
	id := strings.Join(keys, "\x00")
	m.shadowMu.Lock()
	if until, ok := m.shadowSaid[id]; ok && now.Before(until) {
		m.shadowMu.Unlock()
		return
	}
	if len(m.shadowSaid) >= 10000 {
		for k, until := range m.shadowSaid {
			if !now.Before(until) {
				delete(m.shadowSaid, k)
			}
		}
	}
	if len(m.shadowSaid) < 10000 {
		m.shadowSaid[id] = now.Add(max(result.ResetAfter, result.RetryAfter, time.Millisecond))
	}
	m.shadowMu.Unlock()
	m.logger.Warn("redis-ratelimit: shadow mode: this request would have been refused", "policy", policy.PolicyName(),
		"keys", keys, "path", r.URL.Path, "retry_after_ms", strconv.FormatInt(result.RetryAfter.Milliseconds(), 10))
}
