/**
 * A short circuit breaker for the middleware: after `failures` outages in a row the
 * limiter is not called for `cooldownMs`, so that a Redis that is down costs each request
 * nothing (not a timeout each); then one request probes it (half-open), and a success
 * closes the breaker again.
 */

export type BreakerState = "closed" | "open" | "half-open";

export interface BreakerOptions {
  /** Outages in a row that open the breaker (default 1). */
  failures?: number;
  /** How long it stays open before one request probes the limiter (default 1000 ms). */
  cooldownMs?: number;
  /** The clock, in ms (default `Date.now`). */
  now?: () => number;
}

export class CircuitBreaker {
  readonly failures: number;
  readonly cooldownMs: number;
  private readonly now: () => number;
  private failed = 0;
  private openedAt = 0;
  private probing = false;
  state: BreakerState = "closed";
  /** Counts: calls let through to the limiter, outages, requests decided without a call. */
  readonly stats = { calls: 0, outages: 0, skipped: 0, opened: 0 };

  constructor(o: BreakerOptions = {}) {
    this.failures = Math.max(1, o.failures ?? 1);
    this.cooldownMs = Math.max(0, o.cooldownMs ?? 1000);
    this.now = o.now ?? Date.now;
  }

  /** Whether this request may call the limiter (false: decide it as an outage now). */
  allow(): boolean {
    if (this.state === "open") {
      if (this.now() - this.openedAt >= this.cooldownMs && !this.probing) {
        this.state = "half-open";
        this.probing = true;
        this.stats.calls++;
        return true;
      }
      this.stats.skipped++;
      return false;
    }
    if (this.state === "half-open") {
      // One probe at a time; the others are decided without a call.
      this.stats.skipped++;
      return false;
    }
    this.stats.calls++;
    return true;
  }

  success(): void {
    this.failed = 0;
    this.probing = false;
    this.state = "closed";
  }

  failure(): void {
    this.stats.outages++;
    this.probing = false;
    this.failed++;
    if (this.state === "half-open" || this.failed >= this.failures) {
      if (this.state !== "open") this.stats.opened++;
      this.state = "open";
      this.openedAt = this.now();
    }
  }
}
