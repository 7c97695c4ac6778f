/**
 * What the Express and Fastify middleware share: choosing the policy of a request, its
 * keys, one bounded call, telling an outage of the limiter from a bug, the circuit
 * breaker, leases held for the request's duration, and the responses.
 */
import type { Key } from "./args.js";
import { type BreakerOptions, CircuitBreaker } from "./breaker.js";
import { type Logger, ModuleMissingError, RateLimiter } from "./client.js";
import { type HeaderOptions, ratelimitHeaders } from "./headers.js";
import { All, Lease, Policy } from "./policies.js";
import type { RateLimit } from "./results.js";
import { type Client, errorText, isReplyError } from "./transport.js";
import { TwinUnavailable } from "./twins.js";

/** How long the middleware waits for the limiter by default, in ms, before it serves
 * the request unlimited (fail open) or refuses it (fail closed). */
export const DEFAULT_TIMEOUT_MS = 250;

export type PolicyChoice<Req> = Policy | ((req: Req) => Policy | null | undefined) | null | undefined;

export interface MiddlewareOptions<Req> {
  /** An ioredis or node-redis client (or Cluster), or a RateLimiter. */
  client: Client | RateLimiter;
  /** The policy of every route (or a function of the request that returns it). */
  policy?: PolicyChoice<Req>;
  /** Paths (`"/login"`, which also covers `/login/...`), prefixes (`"/api/"`) or a
   * method and a path (`"POST /login"`) to a policy, or to null for no limit; the most
   * specific wins. */
  routes?: Record<string, Policy | null>;
  /** The identifier of a request (a list of them for Multi, Sliding and All; null to let
   * it through). Default: the client's address. */
  key?: (req: Req) => Key | readonly Key[] | null | undefined | Promise<Key | readonly Key[] | null | undefined>;
  /** Keys are `<prefix><policy name>:<identifier>` (default `"rl:"`). */
  prefix?: string;
  /** The cost of a request (default 1). */
  cost?: number | ((req: Req) => number);
  /** Serve requests unlimited when the limiter cannot answer (default true); false
   * refuses them with 503 and `Retry-After: 1`. */
  failOpen?: boolean;
  /** How long to wait for the limiter, in ms (default 250). */
  timeoutMs?: number;
  /** The circuit breaker's settings (false: none). */
  breaker?: BreakerOptions | false;
  /** As RateLimiter's: true runs the Lua twins, "fallback" the twins where the server
   * has no command. */
  twins?: boolean | "fallback";
  luaDir?: string;
  /** Which headers to send, and `whenAllowed: false` to send them on 429s only. */
  headers?: HeaderOptions & { whenAllowed?: boolean };
  /** The body of a refused request: a value (an object is sent as JSON) or a function of
   * the result and the request. */
  message?: unknown | ((result: RateLimit, req: Req) => unknown);
  /** The status of a refused request (default 429). */
  statusCode?: number;
  logger?: Logger;
}

/** What the middleware decided for a request. */
export type Decision =
  | { kind: "pass" }
  | { kind: "allowed"; result: RateLimit; headers: Record<string, string>; release?: () => Promise<void> }
  | { kind: "limited"; result: RateLimit; headers: Record<string, string>; status: number; body: unknown }
  | { kind: "unavailable"; status: 503; headers: Record<string, string>; body: unknown };

export class LimiterTimeout extends Error {
  override name = "LimiterTimeout";
}

const OUTAGE_REPLIES = ["loading", "masterdown", "clusterdown", "tryagain", "readonly", "oom", "busy", "noreplicas"];

/** True when the limiter could not answer (connection refused or lost, a timeout, a
 * server loading, out of memory, or without the module); false for errors in the call
 * itself (bad arguments), which are bugs to surface. */
export function isOutage(err: unknown): boolean {
  if (err instanceof LimiterTimeout || err instanceof ModuleMissingError) return true;
  if (err instanceof TypeError || err instanceof TwinUnavailable) return false;
  if (isReplyError(err)) {
    const text = errorText(err).replace(/^ERR\s+/i, "").toLowerCase();
    return OUTAGE_REPLIES.some((p) => text.startsWith(p));
  }
  return true;
}

function matches(pattern: string, method: string, path: string): number | undefined {
  const space = pattern.lastIndexOf(" ");
  const wantMethod = space >= 0 ? pattern.slice(0, space) : "";
  const prefix = space >= 0 ? pattern.slice(space + 1) : pattern;
  if (wantMethod && wantMethod.toUpperCase() !== method.toUpperCase()) return undefined;
  const score = prefix.length * 2 + (wantMethod ? 1 : 0);
  if (path === prefix || (prefix.endsWith("/") && path.startsWith(prefix))) return score;
  if (path.startsWith(prefix.replace(/\/+$/, "") + "/")) return score;
  return undefined;
}

function defaultBody(result: RateLimit): unknown {
  return { error: "too many requests", retry_after_ms: result.retryAfterMs };
}

export class LimiterCore<Req> {
  readonly limiter: RateLimiter;
  readonly breaker: CircuitBreaker | undefined;
  private readonly o: MiddlewareOptions<Req>;
  private readonly logger: Logger;
  private readonly timeoutMs: number;
  /** Set once the server was found without the module (said loudly, once). */
  moduleMissing: string | undefined;

  constructor(o: MiddlewareOptions<Req>) {
    this.o = o;
    this.logger = o.logger ?? console;
    this.timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) throw new TypeError("the middleware needs a positive timeoutMs");
    this.limiter =
      o.client instanceof RateLimiter
        ? o.client
        : new RateLimiter(o.client, { twins: o.twins, luaDir: o.luaDir, logger: this.logger });
    this.breaker = o.breaker === false ? undefined : new CircuitBreaker(o.breaker ?? {});
  }

  policyFor(req: Req, method: string, path: string, routePolicy?: Policy | null | false): Policy | null {
    if (routePolicy === null || routePolicy === false) return null;
    if (routePolicy instanceof Policy) return routePolicy;
    let best = -1;
    let chosen: Policy | null = null;
    for (const [pattern, policy] of Object.entries(this.o.routes ?? {})) {
      const score = matches(pattern, method, path);
      if (score !== undefined && score > best) {
        best = score;
        chosen = policy;
      }
    }
    if (best >= 0) return chosen;
    const p = this.o.policy;
    if (p === undefined || p === null) return null;
    if (p instanceof Policy) return p;
    return p(req) ?? null;
  }

  keysFor(policy: Policy, identity: Key | readonly Key[]): string[] {
    const ids = typeof identity === "string" || Buffer.isBuffer(identity) ? [identity] : [...identity];
    return ids.map((i) => `${this.o.prefix ?? "rl:"}${policy.name}:${Buffer.isBuffer(i) ? i.toString("utf8") : i}`);
  }

  private bounded<T>(p: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new LimiterTimeout(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
      timer.unref?.();
    });
    p.catch(() => {}); // a late failure after the timeout is not unhandled
    return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
  }

  private outage(err: unknown, path: string): Decision {
    if (err instanceof ModuleMissingError) {
      if (this.moduleMissing === undefined) {
        this.moduleMissing = err.message;
        this.logger.error(
          `\n*** redis-ratelimit: ${err.message}.\n*** Every request is ${
            this.o.failOpen === false ? "refused (503)" : "served UNLIMITED"
          } until the module is loaded. ***\n`,
        );
      }
    } else {
      this.logger.warn(
        `redis-ratelimit: rate limiter unavailable (${errorText(err)}): request to ${path} ${
          this.o.failOpen === false ? "refused" : "served unlimited"
        }`,
      );
    }
    return this.unavailable();
  }

  private unavailable(): Decision {
    if (this.o.failOpen === false) {
      return { kind: "unavailable", status: 503, headers: { "Retry-After": "1" }, body: { error: "rate limiter unavailable" } };
    }
    return { kind: "pass" };
  }

  /** Decide a request: one bounded call of its policy on its keys. */
  async decide(req: Req, method: string, path: string, routePolicy?: Policy | null | false): Promise<Decision> {
    const policy = this.policyFor(req, method, path, routePolicy);
    if (policy === null) return { kind: "pass" };
    const keyFn = this.o.key;
    const identity = keyFn ? await keyFn(req) : undefined;
    if (identity === null || identity === undefined) return { kind: "pass" };
    const keys = this.keysFor(policy, identity);
    const cost = typeof this.o.cost === "function" ? this.o.cost(req) : (this.o.cost ?? 1);
    if (this.breaker && !this.breaker.allow()) return this.unavailable();
    let result: RateLimit;
    try {
      result = await this.bounded(this.limiter.check(policy, keys, { cost }));
    } catch (err) {
      if (!isOutage(err)) {
        this.breaker?.success(); // the limiter answered: a bug in the call, not an outage
        throw err;
      }
      this.breaker?.failure();
      return this.outage(err, path);
    }
    this.breaker?.success();
    this.moduleMissing = undefined;
    const h = this.o.headers ?? {};
    const headers = ratelimitHeaders(result, h);
    if (!result.allowed) {
      const m = this.o.message;
      const body = m === undefined ? defaultBody(result) : typeof m === "function" ? m(result, req) : m;
      return { kind: "limited", result, headers, status: this.o.statusCode ?? 429, body };
    }
    const release = this.releaser(policy, keys, result);
    return { kind: "allowed", result, headers: h.whenAllowed === false ? {} : headers, release };
  }

  /** The release of the leases a request holds, if its policy took any. */
  private releaser(policy: Policy, keys: string[], result: RateLimit): (() => Promise<void>) | undefined {
    const id = result.leaseId;
    if (!policy.holdsLease || !id) return undefined;
    const leaseKeys = policy instanceof All ? keys.filter((_, i) => policy.rules[i] instanceof Lease) : keys;
    let done = false;
    return async () => {
      if (done) return;
      done = true;
      for (const key of leaseKeys) {
        try {
          await this.bounded(this.limiter.release(key, id));
        } catch (err) {
          this.logger.warn(`redis-ratelimit: lease ${id} on ${key} not released (${errorText(err)}); it ends at its TTL`);
        }
      }
    };
  }
}

/** A body as bytes and its content type: objects as JSON, strings as text. */
export function encodeBody(body: unknown): [Buffer, string] {
  if (Buffer.isBuffer(body)) return [body, "application/octet-stream"];
  if (typeof body === "string") return [Buffer.from(body, "utf8"), "text/plain; charset=utf-8"];
  return [Buffer.from(JSON.stringify(body ?? null), "utf8"), "application/json; charset=utf-8"];
}
