/**
 * A store for express-rate-limit 8 that decides with the native commands, constructed as
 * rate-limit-redis's `RedisStore` is, so that an app switches by the class name only:
 *
 *     import { RateLimitStore } from "redis-ratelimit/express-rate-limit";
 *     rateLimit({
 *       windowMs: 15 * 60 * 1000,
 *       limit: 100,
 *       store: new RateLimitStore({ sendCommand: (...args) => client.sendCommand(args) }),
 *     });
 *
 * Each hit is one RL.FIXED call (`algorithm: "sliding"` or `"gcra"` for the others).
 * A refused hit counts nowhere: the count stays at the limit while a client keeps
 * retrying, where an INCR-based store climbs past it.
 */
import { isReplyError, errorText } from "./transport.js";

/** The reply of a raw command, as the clients give it. */
type Reply = unknown;

/** rate-limit-redis's `sendCommand`: `(...args) => client.sendCommand(args)` (node-redis)
 * or `(command, ...args) => client.call(command, ...args)` (ioredis). */
export type SendCommandFn = (...args: string[]) => Promise<Reply>;

/** rate-limit-redis's Cluster form: node-redis's `cluster.sendCommand(key, isReadOnly,
 * command)`. */
export type SendCommandClusterFn = (details: { key?: string; isReadOnly: boolean; command: string[] }) => Promise<Reply>;

export interface RateLimitStoreOptions {
  sendCommand?: SendCommandFn;
  sendCommandCluster?: SendCommandClusterFn;
  /** The text put before each key (default `"rl:"`, as rate-limit-redis). */
  prefix?: string;
  /** The command that decides: `"fixed"` (RL.FIXED, default), `"sliding"` (RL.SLIDING,
   * `buckets` buckets) or `"gcra"` (RL.GCRA: `limit` at once, refilled evenly over the
   * window). */
  algorithm?: "fixed" | "sliding" | "gcra";
  /** RL.SLIDING's buckets per window (default 10). */
  buckets?: number;
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
}

/** The largest count the commands take: with a limit that depends on the request, every
 * hit is counted (as an INCR store does) and express-rate-limit compares. */
const ANY = Number.MAX_SAFE_INTEGER;

// A counter that goes down by one, keeping its TTL, deleted at 0: REFUND for servers
// whose module predates it.
const DECREMENT = `local n = tonumber(redis.call('GET', KEYS[1]))
if not n then return 0 end
if n <= 1 then redis.call('DEL', KEYS[1]) return 0 end
return redis.call('DECR', KEYS[1])`;

function int(v: unknown): number {
  if (typeof v === "number") return v;
  if (Buffer.isBuffer(v)) return Number(v.toString("ascii"));
  return Number(v);
}

export class RateLimitStore {
  readonly prefix: string;
  readonly algorithm: "fixed" | "sliding" | "gcra";
  readonly buckets: number | undefined;
  /** Not local: hits counted here count in every process that shares the server. */
  readonly localKeys = false;
  windowMs = 60_000;
  limit = ANY;
  private readonly send: SendCommandClusterFn;
  private trackRefusals = false;
  /** Refused hits not yet given back (express-rate-limit decrements failed requests,
   * 429s included, with `skipFailedRequests`): a refused hit was never counted. */
  private readonly refused = new Map<string, number>();
  private refundMissing = false;

  constructor(options: RateLimitStoreOptions) {
    if (options.sendCommandCluster) {
      this.send = options.sendCommandCluster;
    } else if (options.sendCommand) {
      const fn = options.sendCommand;
      this.send = ({ command }) => fn(...command);
    } else {
      throw new TypeError("RateLimitStore needs sendCommand (or sendCommandCluster), as rate-limit-redis's RedisStore");
    }
    this.prefix = options.prefix ?? "rl:";
    this.algorithm = options.algorithm ?? "fixed";
    this.buckets = options.buckets;
  }

  /** Called by express-rate-limit with its options: the window, and the limit when it is
   * a number. */
  init(options: StoreInitOptions): void {
    this.windowMs = options.windowMs;
    const limit = options.limit ?? options.max;
    this.limit = typeof limit === "number" && Number.isSafeInteger(limit) && limit >= 1 ? limit : ANY;
    this.trackRefusals = options.skipFailedRequests === true;
  }

  private key(key: string): string {
    return this.prefix + key;
  }

  private command(key: string, cost: number, flag?: string): string[] {
    const k = this.key(key);
    const window = `${Math.max(1, Math.ceil(this.windowMs))}ms`;
    const tail = [...(cost !== 1 ? ["COST", String(cost)] : []), ...(flag ? [flag] : [])];
    switch (this.algorithm) {
      case "sliding":
        return ["RL.SLIDING", "1", k, "LIMIT", window, String(this.limit), ...(this.buckets ? ["BUCKETS", String(this.buckets)] : []), ...tail];
      case "gcra":
        return ["RL.GCRA", k, String(this.limit - 1), String(this.limit), window, ...tail];
      default:
        return ["RL.FIXED", k, String(this.limit), window, ...tail];
    }
  }

  private async call(key: string, cost: number, flag?: string): Promise<unknown[]> {
    const command = this.command(key, cost, flag);
    return (await this.send({ key: this.key(key), isReadOnly: cost === 0, command })) as unknown[];
  }

  private info(reply: unknown[], now: number): ClientRateLimitInfo {
    const limited = int(reply[0]) === 1;
    const limit = int(reply[1]);
    const remaining = int(reply[2]);
    const retryAfter = int(reply[3]);
    const resetAfter = int(reply[4]);
    return {
      totalHits: limited ? this.limit + 1 : Math.max(0, limit - remaining),
      resetTime: new Date(now + (limited ? retryAfter : resetAfter)),
    };
  }

  async increment(key: string): Promise<ClientRateLimitInfo> {
    const now = Date.now();
    const info = this.info(await this.call(key, 1), now);
    if (info.totalHits > this.limit && this.trackRefusals) {
      this.refused.set(key, (this.refused.get(key) ?? 0) + 1);
    }
    return info;
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const now = Date.now();
    const reply = await this.call(key, 0);
    if (int(reply[4]) === 0) return undefined; // nothing counted: no such client
    return this.info(reply, now);
  }

  async decrement(key: string): Promise<void> {
    const pending = this.refused.get(key) ?? 0;
    if (pending > 0) {
      // A refused hit: it was never counted, there is nothing to give back.
      if (pending === 1) this.refused.delete(key);
      else this.refused.set(key, pending - 1);
      return;
    }
    if (!this.refundMissing) {
      try {
        await this.call(key, 1, "REFUND");
        return;
      } catch (err) {
        // A server whose module predates REFUND answers with an error naming it.
        if (!isReplyError(err) || !/REFUND|unknown|syntax/i.test(errorText(err))) throw err;
        this.refundMissing = true;
      }
    }
    if (this.algorithm !== "fixed") return; // no refund without REFUND (counted until the window ends)
    await this.send({ key: this.key(key), isReadOnly: false, command: ["EVAL", DECREMENT, "1", this.key(key)] });
  }

  async resetKey(key: string): Promise<void> {
    this.refused.delete(key);
    await this.send({ key: this.key(key), isReadOnly: false, command: ["DEL", this.key(key)] });
  }
}

export default RateLimitStore;
