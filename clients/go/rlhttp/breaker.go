package rlhttp

import (
	"sync"
	"time"
)

// State is a circuit breaker's state.
type State string

const (
	Closed   State = "closed"    // the limiter is called
	Open     State = "open"      // the limiter is not called: every request is decided as an outage
	HalfOpen State = "half-open" // one request probes the limiter
)

// BreakerOptions configure a Breaker; the zero value is the defaults, those of the
// Node package: open on one outage, for one second.
type BreakerOptions struct {
	Failures int              // outages in a row that open the breaker (default 1)
	Cooldown time.Duration    // how long it stays open before one request probes (default 1 s)
	Now      func() time.Time // the clock (default time.Now)
}

// BreakerStats count what the breaker did.
type BreakerStats struct {
	Calls   uint64 // requests let through to the limiter
	Outages uint64 // calls that failed as outages
	Skipped uint64 // requests decided without a call (open, or another request probing)
	Opened  uint64 // times it opened
}

// Breaker is a short circuit breaker: after Failures outages in a row the limiter is not
// called for Cooldown, so that a Redis that is down costs each request nothing (not a
// timeout each); then one request probes it (half-open), and a success closes the
// breaker again, another outage opens it for one more Cooldown.
type Breaker struct {
	mu       sync.Mutex
	failures int
	cooldown time.Duration
	now      func() time.Time
	state    State
	failed   int
	openedAt time.Time
	stats    BreakerStats
}

// NewBreaker makes a Breaker.
func NewBreaker(o BreakerOptions) *Breaker {
	b := &Breaker{failures: o.Failures, cooldown: o.Cooldown, now: o.Now, state: Closed}
	if b.failures < 1 {
		b.failures = 1
	}
	if b.cooldown <= 0 {
		b.cooldown = time.Second
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

// Allow tells whether this request may call the limiter (false: decide it as an
// outage now, without a call). A nil *Breaker (NoBreaker) always allows.
func (b *Breaker) Allow() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		if b.now().Sub(b.openedAt) >= b.cooldown {
			b.state = HalfOpen
			b.stats.Calls++
			return true
		}
	case Closed:
		b.stats.Calls++
		return true
	}
	// Open, or half-open with the probe under way.
	b.stats.Skipped++
	return false
}

// Success records an answer of the limiter: the breaker closes (nothing on a nil
// *Breaker).
func (b *Breaker) Success() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failed = 0
	b.state = Closed
}

// Failure records an outage (nothing on a nil *Breaker).
func (b *Breaker) Failure() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stats.Outages++
	b.failed++
	if b.state == HalfOpen || b.failed >= b.failures {
		if b.state != Open {
			b.stats.Opened++
		}
		b.state = Open
		b.openedAt = b.now()
	}
}

// State is the breaker's state now (an open breaker whose cooldown has passed stays
// Open until a request probes).
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Stats are the breaker's counts.
func (b *Breaker) Stats() BreakerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}
