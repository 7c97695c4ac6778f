/**
 * What the commands reply, as plain typed objects. Times are milliseconds, as the server
 * sends them (rounded up, so a client that waits is never early).
 */
import type { Key } from "./args.js";

/** One limit a call checked, as the HTTP `RateLimit-Policy` field describes it. */
export interface Quota {
  name: string;
  limit: number;
  /** The window in ms; undefined when it cannot be read from the arguments. */
  windowMs: number | undefined;
}

/** The reply of a limiter command (RL.FIXED, RL.GCRA, RL.MULTI, RL.SLIDING, RL.LOG,
 * RL.ALL, RL.LEASE). */
export interface RateLimit {
  /** The request was allowed and counted; a refused one counted nowhere. */
  allowed: boolean;
  /** The reply's first field: true when refused. */
  limited: boolean;
  /** The capacity: requests in a full window, max_burst + 1 for GCRA, slots for a lease. */
  limit: number;
  /** How much more would be allowed right now, after this request. */
  remaining: number;
  /** When refused, the wait until the same request fits (at least 1); -1 when allowed. */
  retryAfterMs: number;
  /** Until the state is back to full capacity; 0 if it already is. */
  resetAfterMs: number;
  /** The binding key (RL.MULTI, RL.SLIDING, RL.ALL), the very object the caller passed. */
  key?: Key;
  /** The binding window (RL.MULTI, RL.SLIDING). */
  windowMs?: number;
  /** The binding rule's 1-based place among the rules (RL.ALL). */
  rule?: number;
  /** RL.GCRA with DELAY: the wait before acting (0: now; -1: refused, nothing booked). */
  delayMs?: number;
  /** With `upto`: the units the call took (0 when refused). */
  granted?: number;
  /** RL.LEASE, and RL.ALL with a LEASE rule: the lease id when allowed (null otherwise). */
  leaseId?: string | null;
  /** The limits the call checked, for the HTTP headers. */
  quotas: Quota[];
  /** The quota that decided, when known. */
  quota?: Quota;
}

/** CL.THROTTLE's reply, as redis-cell gives it: times in whole **seconds**, rounded up;
 * `retryAfterS` is -1 when allowed. */
export interface Throttle {
  allowed: boolean;
  limited: boolean;
  limit: number;
  remaining: number;
  retryAfterS: number;
  resetAfterS: number;
}

/** RL.SWEEP's reply: the next cursor (`"0"`: done; a string, as SCAN's cursors can
 * exceed 2^53), keys scanned, keys given a TTL. */
export interface Sweep {
  cursor: string;
  scanned: number;
  expired: number;
}
