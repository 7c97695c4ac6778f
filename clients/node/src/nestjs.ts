/**
 * A storage for @nestjs/throttler (6 and later) that decides with the native commands:
 *
 *     import { ThrottlerModule, ThrottlerGuard } from "@nestjs/throttler";
 *     import { RateLimitThrottlerStorage } from "redis-native-ratelimit/nestjs";
 *
 *     ThrottlerModule.forRoot({
 *       throttlers: [{ ttl: 60_000, limit: 10 }],
 *       storage: new RateLimitThrottlerStorage(redis),   // ioredis or node-redis
 *     })
 *
 * Each hit is one call: RL.FIXED (or `algorithm: "sliding"` / `"gcra"`) with the
 * throttler's `limit` and `ttl`, and with a `blockDuration`, RL.ALL of that rule and a
 * BAN rule (one strike): the first refused hit blocks the tracker for `blockDuration`,
 * as the throttler's own storage does. A refused hit counts nowhere. Bounded in time
 * behind the same circuit breaker as the middleware; fail open by default.
 */
import type { ThrottlerStorage } from "@nestjs/throttler";
import { type RateLimiter, limiterOf } from "./client.js";
import { type Algorithm, type CounterOptions, checkAlgorithm, counterPolicy } from "./counter.js";
import { Guard, LimiterUnavailableError } from "./guard.js";
import { ceilSeconds } from "./headers.js";
import { All, Ban, type Policy } from "./policies.js";
import type { Client } from "./transport.js";

/** What `increment` answers (the throttler's `ThrottlerStorageRecord`: times in
 * seconds). */
export type ThrottlerStorageRecord = Awaited<ReturnType<ThrottlerStorage["increment"]>>;

/** `algorithm`'s window is the throttler's `ttl`; `"fixed"` (the default) counts from the
 * first hit, as the throttler's Redis storages count. */
export interface ThrottlerStorageOptions extends CounterOptions {
  /** The text put before each key (default `"rl:throttler:"`); a tracker's keys are
   * `<prefix>{<throttler key>}` and, with a block duration, `<prefix>{<throttler key>}:block`
   * (one hash tag: the same Cluster slot). */
  prefix?: string;
}

export class RateLimitThrottlerStorage implements ThrottlerStorage {
  readonly limiter: RateLimiter;
  /** The timeout, the circuit breaker (`guard.breaker`) and outages. */
  readonly guard: Guard;
  readonly prefix: string;
  readonly algorithm: Algorithm;
  private readonly buckets: number | undefined;
  private readonly policies = new Map<string, Policy>();

  constructor(client: Client | RateLimiter, options: ThrottlerStorageOptions = {}) {
    this.guard = new Guard(options);
    this.limiter = limiterOf(client, { twins: options.twins, luaDir: options.luaDir, logger: this.guard.logger });
    this.prefix = options.prefix ?? "rl:throttler:";
    this.algorithm = checkAlgorithm(options.algorithm);
    this.buckets = options.buckets;
  }

  /** The policy of a throttler (its limit, ttl and block duration, in ms), made once. */
  private policy(limit: number, ttl: number, blockDuration: number): Policy {
    const id = `${limit}:${ttl}:${blockDuration}`;
    let policy = this.policies.get(id);
    if (!policy) {
      const rate = counterPolicy({ algorithm: this.algorithm, limit, windowMs: ttl, buckets: this.buckets, name: "throttler" });
      const block = `${Math.max(1, Math.ceil(blockDuration))}ms`;
      policy = blockDuration > 0 ? new All([rate, new Ban({ strikes: 1, window: block, duration: block, name: "block" })]) : rate;
      this.policies.set(id, policy);
    }
    return policy;
  }

  async increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<ThrottlerStorageRecord> {
    const policy = this.policy(limit, ttl, blockDuration);
    const hits = `${this.prefix}{${key}}`;
    const keys = policy instanceof All ? [hits, `${hits}:block`] : [hits];
    const outcome = await this.guard.call(`throttler ${throttlerName} hit of ${hits}`, () => this.limiter.check(policy, keys));
    if (outcome.kind === "outage") {
      if (!this.guard.failOpen) throw new LimiterUnavailableError(outcome.error);
      return { totalHits: 0, timeToExpire: 0, isBlocked: false, timeToBlockExpire: 0 }; // served unlimited
    }
    const r = outcome.value;
    if (r.allowed) {
      return { totalHits: Math.max(0, r.limit - r.remaining), timeToExpire: ceilSeconds(r.resetAfterMs), isBlocked: false, timeToBlockExpire: 0 };
    }
    return {
      totalHits: limit + 1,
      timeToExpire: ceilSeconds(r.resetAfterMs),
      isBlocked: true,
      timeToBlockExpire: Math.max(1, ceilSeconds(r.retryAfterMs)),
    };
  }
}

export default RateLimitThrottlerStorage;
