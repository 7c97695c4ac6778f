/**
 * A store for express-rate-limit 8 that decides with the native commands, constructed as
 * rate-limit-redis's `RedisStore` is, so that an app switches by the class name only:
 *
 *     import { RateLimitStore } from "redis-native-ratelimit/express-rate-limit";
 *     rateLimit({
 *       windowMs: 15 * 60 * 1000,
 *       limit: 100,
 *       store: new RateLimitStore({ sendCommand: (...args) => client.sendCommand(args) }),
 *     });
 *
 * Each hit is one RL.FIXED call (`algorithm: "sliding"` or `"gcra"` for the others),
 * bounded in time behind the same circuit breaker as the middleware, on the module's
 * commands or their Lua twins (`twins`). A refused hit counts nowhere: the count stays at
 * the limit while a client keeps retrying, where an INCR-based store climbs past it.
 */
import { type Key, asText } from "./args.js";
import { RateLimiter } from "./client.js";
import { type Algorithm, type CounterOptions, checkAlgorithm, counterPolicy } from "./counter.js";
import { Guard, LimiterUnavailableError, OncePerKey } from "./guard.js";
import { Fixed, type Policy } from "./policies.js";
import type { RateLimit } from "./results.js";
import { type Client, type Logger, type Transport, errorText, isReplyError, transportOf } from "./transport.js";

/** rate-limit-redis's `sendCommand`: `(...args) => client.sendCommand(args)` (node-redis)
 * or `(command, ...args) => client.call(command, ...args)` (ioredis). */
export type SendCommandFn = (...args: string[]) => Promise<unknown>;

/** rate-limit-redis's Cluster form: node-redis's `cluster.sendCommand(key, isReadOnly,
 * command)`. */
export type SendCommandClusterFn = (details: { key?: string; isReadOnly: boolean; command: string[] }) => Promise<unknown>;

export interface RateLimitStoreOptions extends CounterOptions {
  sendCommand?: SendCommandFn;
  sendCommandCluster?: SendCommandClusterFn;
  /** Or an ioredis or node-redis client (or Cluster client) itself. */
  client?: Client;
  /** The text put before each key (default `"rl:"`, as rate-limit-redis). */
  prefix?: string;
  /** Judge and count as usual, but let would-be refusals through (counted in
   * `stats.shadowDenials`, logged once per key and window). */
  shadow?: boolean;
}

/** express-rate-limit's `ClientRateLimitInfo`. */
export interface ClientRateLimitInfo {
  totalHits: number;
  resetTime: Date | undefined;
}

/** The parts of express-rate-limit's options the store reads. */
export interface StoreInitOptions {
  windowMs: number;
  // biome-ignore lint: express-rate-limit's (request, response) => number
  limit?: number | ((...args: any[]) => unknown);
  // biome-ignore lint: the same, under its older name
  max?: number | ((...args: any[]) => unknown);
  skipFailedRequests?: boolean;
  skipSuccessfulRequests?: boolean;
}

/**
 * The limit a store counts with when express-rate-limit's `limit` is a function of the
 * request, which it asks only after the store has counted: every hit is counted (as an
 * INCR store counts) and express-rate-limit compares. 2^31 - 1: far above any limit, and
 * read back exactly by every client (some read 2^53 - 1 as 2^53).
 */
export const ANY_LIMIT = 2 ** 31 - 1;

// A counter that goes down by one, keeping its TTL, deleted at 0: REFUND for servers
// whose module predates it.
const DECREMENT = `local n = tonumber(redis.call('GET', KEYS[1]))
if not n then return 0 end
if n <= 1 then redis.call('DEL', KEYS[1]) return 0 end
return redis.call('DECR', KEYS[1])`;

/** The transport of rate-limit-redis's `sendCommand` (or `sendCommandCluster`). */
function sendTransport(options: RateLimitStoreOptions): Transport {
  const cluster = options.sendCommandCluster;
  const plain = options.sendCommand;
  if (!cluster && !plain) {
    throw new TypeError("RateLimitStore needs sendCommand (or sendCommandCluster, or client), as rate-limit-redis's RedisStore");
  }
  const text = (argv: readonly unknown[]) => argv.map(asText);
  const self: Transport = {
    kind: "function",
    prefix: undefined,
    cluster: false,
    // The commands write (even a peek is declared a write): never a replica.
    send: (argv, keys) =>
      cluster ? cluster({ key: keys.length ? String(keys[0]) : undefined, isReadOnly: false, command: text(argv) }) : (plain as SendCommandFn)(...text(argv)),
    primaries: async () => [self],
  };
  return self;
}

export class RateLimitStore {
  readonly prefix: string;
  readonly algorithm: Algorithm;
  readonly buckets: number | undefined;
  /** Not local: hits counted here count in every process that shares the server. */
  readonly localKeys = false;
  readonly limiter: RateLimiter;
  /** The timeout, the circuit breaker (`guard.breaker`) and outages. */
  readonly guard: Guard;
  /** Refusals shadow mode let through. */
  readonly stats = { shadowDenials: 0 };
  windowMs = 60_000;
  /** The limit counted with: express-rate-limit's, or ANY_LIMIT when it is a function. */
  limit = ANY_LIMIT;
  private policy: Policy;
  private readonly shadow: boolean;
  private track = false;
  /** Hits of a key that were not counted (refused, let through on an outage or by
   * shadow mode) and not given back yet: express-rate-limit decrements them too. */
  private readonly uncounted = new Map<string, number>();
  private readonly shadowSaid = new OncePerKey();
  private refundMissing = false;

  constructor(options: RateLimitStoreOptions) {
    const transport = options.client ? transportOf(options.client) : sendTransport(options);
    this.guard = new Guard(options);
    this.limiter = new RateLimiter(transport, { twins: options.twins, luaDir: options.luaDir, logger: this.guard.logger });
    this.prefix = options.prefix ?? "rl:";
    this.algorithm = checkAlgorithm(options.algorithm);
    this.buckets = options.buckets;
    this.shadow = options.shadow === true;
    this.policy = this.policyFor(this.windowMs, ANY_LIMIT);
  }

  get logger(): Logger {
    return this.guard.logger;
  }

  private policyFor(windowMs: number, limit: number): Policy {
    // GCRA spreads a known limit over the window; an unknown one (a function) cannot be
    // spread: its hits are counted in a sliding window instead.
    const algorithm = this.algorithm === "gcra" && limit === ANY_LIMIT ? "sliding" : this.algorithm;
    return counterPolicy({ algorithm, limit, windowMs, buckets: this.buckets });
  }

  /** Called by express-rate-limit with its options: the window, and the limit when it is
   * a number. */
  init(options: StoreInitOptions): void {
    this.windowMs = options.windowMs;
    const limit = options.limit ?? options.max;
    const known = typeof limit === "number" && Number.isSafeInteger(limit) && limit >= 1;
    this.limit = known ? limit : ANY_LIMIT;
    this.policy = this.policyFor(this.windowMs, this.limit);
    this.track = options.skipFailedRequests === true || options.skipSuccessfulRequests === true;
    if (!known && this.algorithm === "gcra") {
      this.logger.warn(
        "redis-ratelimit: the limit is a function of the request, which express-rate-limit asks after the store has counted: " +
          "GCRA needs the rate, so this store counts each client's hits over a sliding window (RL.SLIDING) instead",
      );
    }
    if (!known && this.shadow) {
      this.logger.warn(
        "redis-ratelimit: shadow mode with a limit that is a function of the request: express-rate-limit compares after the store, " +
          "so the store cannot tell a refusal; it reports one hit for every request, and none is refused",
      );
    }
  }

  private key(key: string): string {
    return this.prefix + key;
  }

  private notCounted(key: string): void {
    if (this.track) this.uncounted.set(key, (this.uncounted.get(key) ?? 0) + 1);
  }

  private info(r: RateLimit, now: number): ClientRateLimitInfo {
    return {
      totalHits: r.allowed ? Math.max(0, r.limit - r.remaining) : this.limit + 1,
      resetTime: new Date(now + (r.allowed ? r.resetAfterMs : r.retryAfterMs)),
    };
  }

  async increment(key: string): Promise<ClientRateLimitInfo> {
    const now = Date.now();
    const outcome = await this.guard.call(`hit of ${this.key(key)}`, () => this.limiter.check(this.policy, this.key(key)));
    if (outcome.kind === "outage") {
      if (!this.guard.failOpen) throw new LimiterUnavailableError(outcome.error);
      this.notCounted(key);
      return { totalHits: 1, resetTime: undefined }; // served unlimited
    }
    const r = outcome.value;
    if (this.shadow && this.limit === ANY_LIMIT) return { totalHits: 1, resetTime: new Date(now + r.resetAfterMs) };
    if (r.allowed) return this.info(r, now);
    this.notCounted(key);
    if (!this.shadow) return this.info(r, now);
    this.stats.shadowDenials++;
    if (this.shadowSaid.due(key, r.retryAfterMs, now)) {
      this.logger.warn(
        `redis-ratelimit: shadow mode: the express-rate-limit store would refuse ${this.key(key)} (${r.limit} per ${this.windowMs} ms; retry in ${r.retryAfterMs} ms); the request passes`,
      );
    }
    return { totalHits: this.limit, resetTime: new Date(now + r.retryAfterMs) };
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const now = Date.now();
    const outcome = await this.guard.call(`peek at ${this.key(key)}`, () => this.limiter.check(this.policy, this.key(key), { cost: 0 }));
    if (outcome.kind === "outage") throw new LimiterUnavailableError(outcome.error);
    if (outcome.value.resetAfterMs === 0) return undefined; // nothing counted: no such client
    return this.info(outcome.value, now);
  }

  async decrement(key: string): Promise<void> {
    const pending = this.uncounted.get(key) ?? 0;
    if (pending > 0) {
      // A hit that was never counted: there is nothing to give back.
      if (pending === 1) this.uncounted.delete(key);
      else this.uncounted.set(key, pending - 1);
      return;
    }
    const k: Key = this.key(key);
    if (!this.refundMissing) {
      try {
        await this.limiter.check(this.policy, k, { refund: true });
        return;
      } catch (err) {
        // A server whose module predates REFUND answers with an error naming it.
        if (!isReplyError(err) || !/REFUND|unknown|syntax/i.test(errorText(err))) throw err;
        this.refundMissing = true;
      }
    }
    if (this.policy instanceof Fixed) await this.limiter.transport.send(["EVAL", DECREMENT, 1, k], [k]);
    // Without REFUND, the other algorithms keep the hit until it leaves the window.
  }

  async resetKey(key: string): Promise<void> {
    this.uncounted.delete(key);
    const k = this.key(key);
    await this.limiter.transport.send(["DEL", k], [k]);
  }
}

export default RateLimitStore;
