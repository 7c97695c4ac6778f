/**
 * What the Express and Fastify middleware share: choosing the policy of a request, its
 * keys, one bounded call (the guard: timeout, circuit breaker, outages), leases held for
 * the request's duration, shadow mode, and the responses.
 */
import { type Key, asText } from "./args.js";
import { type RateLimiter, limiterOf } from "./client.js";
import { type BreakerSetting, Guard, OncePerKey } from "./guard.js";
import { type Draft, type StandardHeaders, draftHeaders, standardDrafts } from "./headers.js";
import { DEFAULT_IPV6_SUBNET, checkIpv6Subnet } from "./ip.js";
import { All, Ban, Lease, Policy, newLeaseId } from "./policies.js";
import type { RateLimit } from "./results.js";
import { type Client, type Logger, errorText } from "./transport.js";

export type PolicyChoice<Req> = Policy | ((req: Req) => Policy | null | undefined) | null | undefined;

/** What a key function returns: one identifier, a list of them (one per key of the
 * policy: Multi, Sliding, All), or null to let the request through. */
export type Identity = Key | readonly Key[] | null | undefined;

export interface MiddlewareOptions<Req> {
  /** An ioredis or node-redis client (or Cluster), or a RateLimiter. */
  client: Client | RateLimiter;
  /** The policy of every route (or a function of the request that returns it). */
  policy?: PolicyChoice<Req>;
  /** Paths (`"/login"`, which also covers `/login/...`), prefixes (`"/api/"`) or a
   * method and a path (`"POST /login"`) to a policy, or to null for no limit; the most
   * specific wins. */
  routes?: Record<string, Policy | null>;
  /** The identifier of a request: one, or a list of them (one per key of a Multi,
   * Sliding or All policy), or null to let it through. Default: the client's address,
   * an IPv6 address grouped by its `ipv6Subnet` network. */
  key?: (req: Req) => Identity | Promise<Identity>;
  /** The prefix length an IPv6 client address is grouped by in the default key (default
   * 56, as express-rate-limit 8); false: each address on its own. */
  ipv6Subnet?: number | false;
  /** Keys are `<prefix><policy name>:<identifier>` (default `"rl:"`); an All policy's
   * keys are `<prefix><policy name>:<rule kind><position>:<identifier>`. */
  prefix?: string;
  /** The cost of a request (default 1). */
  cost?: number | ((req: Req) => number);
  /** Requests for which this returns true are not limited (an allow list, health
   * checks). */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** A penalty box over every request this middleware limits: a caller refused
   * `strikes` times within `window` is refused for `duration` (RL.ALL's BAN rule on
   * `<prefix><ban name>:<first identifier>`). */
  ban?: Ban;
  /** Judge and count as usual, but let would-be refusals through: each is counted
   * (`stats.shadowDenials`) and logged once per key and window. */
  shadow?: boolean;
  /** Serve requests unlimited when the limiter cannot answer (default true); false
   * refuses them with 503 and `Retry-After: 1`. */
  failOpen?: boolean;
  /** How long to wait for the limiter, in ms (default 250). */
  timeoutMs?: number;
  /** The circuit breaker's settings (default: open after one outage, for 1000 ms), a
   * `CircuitBreaker` to share, or false: none. */
  breaker?: BreakerSetting;
  /** As RateLimiter's: true runs the Lua twins, "fallback" the twins where the server
   * has no command. */
  twins?: boolean | "fallback";
  luaDir?: string;
  /** The IETF drafts' headers (default `["draft-6", "draft-8"]`; false: none). */
  standardHeaders?: StandardHeaders;
  /** `X-RateLimit-Limit`, `-Remaining`, `-Reset` (default false). */
  legacyHeaders?: boolean;
  /** Send the rate limit headers on allowed responses too (default true). */
  headersWhenAllowed?: boolean;
  /** The body of a refused request: a value (an object is sent as JSON) or a function of
   * the result and the request. */
  message?: Message<Req>;
  /** The status of a refused request (default 429). */
  statusCode?: number;
  logger?: Logger;
}

/** A body: text, bytes, or a value sent as JSON. */
export type Body = string | Buffer | number | boolean | null | readonly unknown[] | { readonly [field: string]: unknown };

/** The body of a refusal, or a function of the result and the request that makes it. */
export type Message<Req> = Body | ((result: RateLimit, req: Req) => unknown);

/** What the middleware decided for a request. */
export type Decision =
  | { kind: "pass" }
  | {
      kind: "allowed";
      result: RateLimit;
      headers: Record<string, string>;
      /** Ends the request's lease, if its policy took one (call it once). */
      release?: () => Promise<void>;
      /** A refusal let through by shadow mode. */
      shadow?: boolean;
    }
  | { kind: "limited"; result: RateLimit; headers: Record<string, string>; status: number; body: unknown }
  | { kind: "unavailable"; status: 503; headers: Record<string, string>; body: unknown };

/** What a middleware counts, for metrics. */
export interface MiddlewareStats {
  /** Requests allowed by the limiter. */
  allowed: number;
  /** Requests refused (429). */
  limited: number;
  /** Refusals shadow mode let through. */
  shadowDenials: number;
}

/** A key function's result that does not fit its policy. */
export class PolicyKeyError extends TypeError {
  override name = "PolicyKeyError";
}

/** At most as many keys as RL.MULTI and RL.SLIDING take. */
const MAX_KEYS = 64;

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

function checkPolicy(where: string, p: unknown): void {
  if (p === null || p === undefined || typeof p === "function") return;
  if (!(p instanceof Policy)) throw new TypeError(`${where}: a policy (Gcra, Fixed, Multi, Sliding, Log, Lease, All), not ${String(p)}`);
  if (p instanceof Ban) throw new TypeError(`${where}: a Ban is a rule of All, or the middleware's ban option, not a policy of its own`);
}

export class LimiterCore<Req> {
  readonly limiter: RateLimiter;
  readonly guard: Guard;
  readonly stats: MiddlewareStats = { allowed: 0, limited: 0, shadowDenials: 0 };
  readonly ipv6Subnet: number | false;
  private readonly o: MiddlewareOptions<Req>;
  private readonly prefix: string;
  /** The drafts of `standardHeaders`. */
  private readonly drafts: Draft[];
  private readonly shadowSaid = new OncePerKey();

  /** `defaultKey`: the framework's key of a request when `key` is not given (the client's
   * address). */
  constructor(
    o: MiddlewareOptions<Req>,
    private readonly defaultKey?: (req: Req) => Identity,
  ) {
    this.o = o;
    this.prefix = o.prefix ?? "rl:";
    this.guard = new Guard(o);
    this.limiter = limiterOf(o.client, { twins: o.twins, luaDir: o.luaDir, logger: this.guard.logger });
    // Settings that can be checked before the first request are checked here.
    checkPolicy("policy", o.policy);
    for (const [route, p] of Object.entries(o.routes ?? {})) checkPolicy(`routes["${route}"]`, p);
    for (const [name, fn] of Object.entries({ key: o.key, skip: o.skip, cost: o.cost })) {
      if (fn !== undefined && typeof fn !== "function" && !(name === "cost" && typeof fn === "number")) {
        throw new TypeError(`${name}: a function of the request${name === "cost" ? " or a number" : ""}, not ${String(fn)}`);
      }
    }
    const status = o.statusCode ?? 429;
    if (!Number.isInteger(status) || status < 400 || status > 599) {
      throw new TypeError(`statusCode: an HTTP error status (429 by default), not ${String(o.statusCode)}`);
    }
    if (o.key === undefined) {
      // The default key is one identifier, which an All policy of several rules cannot take.
      for (const p of [o.policy, ...Object.values(o.routes ?? {})]) {
        if (p instanceof All && p.rules.length > 1) {
          throw new TypeError(
            `the All policy "${p.name}" has ${p.rules.length} rules, and the default key is one identifier (the client's address): ` +
              `give key a function that returns a list of ${p.rules.length} identifiers, one per rule (the same one several times is fine)`,
          );
        }
      }
    }
    if (o.ban !== undefined && !(o.ban instanceof Ban)) throw new TypeError("ban takes a Ban (strikes, window, duration)");
    this.drafts = standardDrafts(o.standardHeaders);
    this.ipv6Subnet = checkIpv6Subnet(o.ipv6Subnet ?? DEFAULT_IPV6_SUBNET);
  }

  get breaker() {
    return this.guard.breaker;
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
    const chosenByFn = p(req) ?? null;
    checkPolicy("the policy function's result", chosenByFn);
    return chosenByFn;
  }

  /** The policy a request is checked with and its keys: each identifier under the
   * policy's name (an All policy's under its rule's kind and position too, so that one
   * identifier can go to several rules), and the ban rule's key when there is one. A
   * result that does not fit the policy is a PolicyKeyError that says why. */
  keysFor(policy: Policy, identity: Key | readonly Key[]): { policy: Policy; keys: string[] } {
    const bare = typeof identity === "string" || Buffer.isBuffer(identity);
    const ids = (bare ? [identity] : [...(identity as readonly Key[])]).map(asText);
    const base = `${this.prefix}${policy.name}:`;
    let keys: string[];
    if (policy instanceof All) {
      const n = policy.rules.length;
      if ((bare && n > 1) || ids.length !== n) {
        throw new PolicyKeyError(
          `the key function gave ${bare ? "one identifier" : `a list of ${ids.length}`} for the All policy "${policy.name}" of ${n} rules: ` +
            `return a list of ${n}, one per rule in order (the same identifier may come twice: each rule's key has its kind and position)`,
        );
      }
      keys = ids.map((id, i) => `${base}${policy.rules[i].kind}${i + 1}:${id}`);
    } else if (policy.keyCount === undefined) {
      if (ids.length < 1 || ids.length > MAX_KEYS) {
        throw new PolicyKeyError(`the key function gave ${ids.length} identifiers for the ${policy.kind} policy "${policy.name}": from 1 to ${MAX_KEYS}`);
      }
      keys = ids.map((id) => base + id);
    } else {
      if (ids.length !== 1) {
        throw new PolicyKeyError(
          `the key function gave a list of ${ids.length} for the ${policy.kind} policy "${policy.name}", which takes one identifier: return a string`,
        );
      }
      keys = [base + ids[0]];
    }
    const ban = this.o.ban;
    if (!ban) return { policy, keys };
    const rules = policy instanceof All ? policy.rules : keys.map(() => policy);
    return { policy: new All([...rules, ban], { name: policy.name }), keys: [...keys, `${this.prefix}${ban.name}:${ids[0]}`] };
  }

  private unavailable(): Decision {
    if (this.guard.failOpen) return { kind: "pass" };
    return { kind: "unavailable", status: 503, headers: { "Retry-After": "1" }, body: { error: "rate limiter unavailable" } };
  }

  /** Decide a request: one bounded call of its policy on its keys. */
  async decide(req: Req, method: string, path: string, routePolicy?: Policy | null | false): Promise<Decision> {
    if (this.o.skip && (await this.o.skip(req))) return { kind: "pass" };
    const chosen = this.policyFor(req, method, path, routePolicy);
    if (chosen === null) return { kind: "pass" };
    const keyOf = this.o.key ?? this.defaultKey;
    const identity = keyOf ? await keyOf(req) : undefined;
    if (identity === null || identity === undefined) return { kind: "pass" };
    const { policy, keys } = this.keysFor(chosen, identity);
    const cost = typeof this.o.cost === "function" ? this.o.cost(req) : (this.o.cost ?? 1);
    // A lease is named here, before the call, so that a call given up on can be released.
    const id = policy.holdsLease ? newLeaseId() : undefined;
    const release = id === undefined ? undefined : this.releaser(policy, keys, id);
    const outcome = await this.guard.call(
      `request to ${path}`,
      () => this.limiter.check(policy, keys, { cost, id }),
      (late) => (late.allowed && release ? release(true) : undefined),
    );
    if (outcome.kind === "outage") {
      // The call may still run on the server: release its lease at once (harmless if
      // it took none), and again when its late answer says it took one.
      if (outcome.called && release) this.guard.track(release(true));
      return this.unavailable();
    }
    const result = outcome.value;
    // What the headers and the default body say: a lease's refusal waits its own retryAfter.
    const retryAfterMs = this.leaseRetryAfter(policy, result);
    const shown = retryAfterMs === undefined ? result : { ...result, retryAfterMs };
    const headers = draftHeaders(shown, this.drafts, { legacyHeaders: this.o.legacyHeaders });
    if (!result.allowed) {
      if (this.o.shadow) {
        this.shadowDenial(policy, keys, result);
        delete headers["Retry-After"]; // the response is not a refusal
        return { kind: "allowed", result, headers: this.o.headersWhenAllowed === false ? {} : headers, shadow: true };
      }
      this.stats.limited++;
      const m = this.o.message;
      const body =
        m === undefined ? { error: "too many requests", retry_after_ms: shown.retryAfterMs } : typeof m === "function" ? m(result, req) : m;
      return { kind: "limited", result, headers, status: this.o.statusCode ?? 429, body };
    }
    this.stats.allowed++;
    let released = false;
    const once = release
      ? () => {
          if (released) return Promise.resolve();
          released = true;
          const p = release(false);
          this.guard.track(p);
          return p;
        }
      : undefined;
    return { kind: "allowed", result, headers: this.o.headersWhenAllowed === false ? {} : headers, release: once };
  }

  /** A lease's refusal is retried after its policy's `retryAfter`, not the server's wait
   * for the oldest lease's ttl. */
  private leaseRetryAfter(policy: Policy, result: RateLimit): number | undefined {
    if (result.allowed) return undefined;
    const rule = policy instanceof All ? policy.rules[(result.rule ?? 0) - 1] : policy;
    return rule instanceof Lease ? rule.retryAfterMs : undefined;
  }

  /** Count a refusal shadow mode lets through; say it once per key until it would end. */
  private shadowDenial(policy: Policy, keys: string[], result: RateLimit): void {
    this.stats.shadowDenials++;
    const key = String(result.key ?? keys[0]);
    if (!this.shadowSaid.due(key, result.retryAfterMs)) return;
    this.guard.logger.warn(
      `redis-ratelimit: shadow mode: policy "${policy.name}" would refuse ${key} (retry in ${result.retryAfterMs} ms); the request passes`,
    );
  }

  /** The release of the leases a request holds under `id` (RL.RELEASE on each key of a
   * lease rule); `quiet` says nothing when it fails (a release after an outage). */
  private releaser(policy: Policy, keys: string[], id: string): (quiet: boolean) => Promise<void> {
    const leaseKeys = policy instanceof All ? keys.filter((_, i) => policy.rules[i] instanceof Lease) : keys;
    return async (quiet) => {
      for (const key of leaseKeys) {
        try {
          await this.limiter.release(key, id);
        } catch (err) {
          if (!quiet) this.guard.logger.warn(`redis-ratelimit: lease ${id} on ${key} not released (${errorText(err)}); it ends at its TTL`);
        }
      }
    };
  }

  /** Resolves once every release and late answer started so far is done. */
  settled(): Promise<void> {
    return this.guard.settled();
  }
}

/** A body as bytes and its content type: objects as JSON, strings as text. */
export function encodeBody(body: unknown): [Buffer, string] {
  if (Buffer.isBuffer(body)) return [body, "application/octet-stream"];
  if (typeof body === "string") return [Buffer.from(body, "utf8"), "text/plain; charset=utf-8"];
  return [Buffer.from(JSON.stringify(body ?? null), "utf8"), "application/json; charset=utf-8"];
}
