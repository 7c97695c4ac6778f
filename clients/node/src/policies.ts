/**
 * Limits without their keys: what a middleware applies to every request of a route, and
 * the rules of one RL.ALL call. Each policy knows its command's arguments and how to
 * read its reply:
 *
 *     new Gcra({ maxBurst: 19, count: 10, period: "1s" })         // RL.GCRA
 *     new Fixed({ limit: 1000, window: "1d" })                     // RL.FIXED
 *     new Multi({ limits: [["1m", 5], ["1h", 20]], names: ["ip", "user"] })  // RL.MULTI
 *     new Sliding({ limits: [["1s", 10], ["1m", 100]] })           // RL.SLIDING
 *     new Log({ limit: 20, window: "1m" })                         // RL.LOG
 *     new Lease({ limit: 20, ttl: "30s" })                         // RL.LEASE
 *     new All([new Gcra({...}), new Fixed({...}), new Ban({...})]) // RL.ALL
 *
 * `name` is the policy's name in the HTTP `RateLimit-Policy` and `RateLimit` fields and
 * in the middleware's key prefix.
 */
import {
  type Arg,
  type CallOptions,
  type Duration,
  type Key,
  durationArg,
  durationLabel,
  durationMs,
  findKey,
  options,
  toInt,
  toText,
} from "./args.js";
import { randomBytes } from "node:crypto";
import type { Quota, RateLimit } from "./results.js";

/** A new lease id: 16 random characters, unique for every practical purpose. */
export function newLeaseId(): string {
  return randomBytes(12).toString("base64url");
}

/** One command call: the command, its keys and the rest of its arguments, the name of
 * its twin (the Functions library's function, and the script's file), and its reader. */
export interface Call<T = RateLimit> {
  command: string;
  keys: Key[];
  args: Arg[];
  /** The twin's function name (`rl_fixed`...); null for RL.SWEEP, which has none. */
  twin: string | null;
  /** Keys first (`command key... args`) or after the first argument (RL.BULKEXPIRE). */
  keysFirst: boolean;
  /** `numkeys` before the keys in the native call (RL.MULTI, RL.SLIDING, RL.ALL). */
  numkeys: boolean;
  parse: (reply: unknown, prefix?: Buffer) => T;
}

/** The native argument vector of a call. */
export function nativeArgv(call: Call<unknown>): Arg[] {
  if (!call.keysFirst) return [call.command, ...call.args.slice(0, 1), ...call.keys, ...call.args.slice(1)];
  if (call.numkeys) return [call.command, call.keys.length, ...call.keys, ...call.args];
  return [call.command, ...call.keys, ...call.args];
}

function replyArray(reply: unknown): unknown[] {
  if (!Array.isArray(reply) || reply.length < 5) {
    throw new TypeError(`not a limiter reply: ${JSON.stringify(reply)}`);
  }
  return reply;
}

function five(reply: unknown[], quotas: Quota[], binding: number | undefined): RateLimit {
  const limited = toInt(reply[0]) !== 0;
  const result: RateLimit = {
    allowed: !limited,
    limited,
    limit: toInt(reply[1]),
    remaining: toInt(reply[2]),
    retryAfterMs: toInt(reply[3]),
    resetAfterMs: toInt(reply[4]),
    quotas,
  };
  if (binding !== undefined && binding >= 0 && binding < quotas.length) result.quota = quotas[binding];
  return result;
}

/** A call with `UPTO` reads one more field, the last of its reply: the units granted. */
function granting(call: Call, opts: CallOptions): Call {
  if (!opts.upto) return call;
  const parse = call.parse;
  return {
    ...call,
    parse: (reply, prefix) => {
      const result = parse(reply, prefix);
      const r = reply as unknown[];
      result.granted = toInt(r[r.length - 1]);
      return result;
    },
  };
}

function oneKey(name: string, keys: Key[]): Key {
  if (keys.length !== 1) throw new TypeError(`${name} takes one key, not ${keys.length}`);
  return keys[0];
}

/** What every policy offers. */
export abstract class Policy {
  abstract readonly name: string;
  /** The rule's keyword in lower case (`fixed`, `gcra`, `multi`, `sliding`, `log`,
   * `lease`, `ban`; `all` for RL.ALL). */
  abstract readonly kind: string;
  /** How many keys a call takes; undefined: any number (Multi, Sliding, All). */
  readonly keyCount: number | undefined = 1;
  abstract quotas(nkeys?: number): Quota[];
  abstract call(keys: Key[], opts?: CallOptions & { id?: Arg; meta?: Arg }): Call;
  /** The rule of this policy inside RL.ALL, at a 1-based key position. */
  abstract ruleArgs(position: number): Arg[];
  /** Whether the policy holds a lease that the middleware releases after the request. */
  get holdsLease(): boolean {
    return false;
  }
}

export interface FixedOptions {
  limit: number;
  window: Duration;
  /** Windows on the epoch's boundaries (`ALIGN`). */
  align?: boolean;
  name?: string;
}

/** RL.FIXED: at most `limit` per `window`, windows starting at the first request. */
export class Fixed extends Policy {
  readonly kind = "fixed";
  readonly limit: number;
  readonly window: Duration;
  readonly align: boolean;
  readonly name: string;
  constructor(o: FixedOptions) {
    super();
    this.limit = o.limit;
    this.window = o.window;
    this.align = o.align ?? false;
    this.name = o.name ?? "fixed";
  }
  quotas(): Quota[] {
    return [{ name: this.name, limit: this.limit, windowMs: durationMs(this.window) }];
  }
  private tail(): Arg[] {
    return [this.limit, durationArg(this.window), ...(this.align ? ["ALIGN"] : [])];
  }
  call(keys: Key[], opts: CallOptions = {}): Call {
    const key = oneKey("RL.FIXED", keys);
    const quotas = this.quotas();
    return granting({
      command: "RL.FIXED",
      keys: [key],
      args: [...this.tail(), ...options(opts)],
      twin: "rl_fixed",
      keysFirst: true,
      numkeys: false,
      parse: (reply) => five(replyArray(reply), quotas, 0),
    }, opts);
  }
  ruleArgs(position: number): Arg[] {
    return ["FIXED", position, ...this.tail()];
  }
}

export interface GcraOptions {
  maxBurst: number;
  count: number;
  period: Duration;
  /** `DELAY max_delay`: book a slot up to that far ahead instead of refusing. */
  delay?: Duration;
  name?: string;
}

/** RL.GCRA: `count` per `period`, evenly spaced, plus `maxBurst` at once. */
export class Gcra extends Policy {
  readonly kind = "gcra";
  readonly maxBurst: number;
  readonly count: number;
  readonly period: Duration;
  readonly delay: Duration | undefined;
  readonly name: string;
  constructor(o: GcraOptions) {
    super();
    this.maxBurst = o.maxBurst;
    this.count = o.count;
    this.period = o.period;
    this.delay = o.delay;
    this.name = o.name ?? "gcra";
  }
  quotas(): Quota[] {
    // The capacity, and the time it takes to come back in full: the burst window.
    const periodMs = durationMs(this.period);
    let windowMs: number | undefined;
    if (periodMs !== undefined && this.count > 0 && this.maxBurst >= 0) {
      const intervalUs = Math.ceil((periodMs * 1000) / this.count);
      windowMs = Math.ceil((intervalUs * (this.maxBurst + 1)) / 1000);
    }
    return [{ name: this.name, limit: this.maxBurst + 1, windowMs }];
  }
  private tail(): Arg[] {
    return [this.maxBurst, this.count, durationArg(this.period)];
  }
  call(keys: Key[], opts: CallOptions = {}): Call {
    const key = oneKey("RL.GCRA", keys);
    const args = [...this.tail(), ...options(opts)];
    const withDelay = this.delay !== undefined;
    if (withDelay) {
      if (opts.refund || opts.force) throw new TypeError("RL.GCRA takes neither REFUND nor FORCE with DELAY");
      args.push("DELAY", durationArg(this.delay as Duration));
    }
    const quotas = this.quotas();
    return granting({
      command: "RL.GCRA",
      keys: [key],
      args,
      twin: "rl_gcra",
      keysFirst: true,
      numkeys: false,
      parse: (reply) => {
        const r = replyArray(reply);
        const result = five(r, quotas, 0);
        if (withDelay && r.length > 5) result.delayMs = toInt(r[5]);
        return result;
      },
    }, opts);
  }
  ruleArgs(position: number): Arg[] {
    if (this.delay !== undefined) throw new TypeError("RL.ALL does not take DELAY in a GCRA rule");
    return ["GCRA", position, ...this.tail()];
  }
}

export interface LogOptions {
  limit: number;
  window: Duration;
  /** The `META` value recorded with each allowed request (who made it). */
  meta?: Arg;
  name?: string;
}

/** RL.LOG: exactly at most `limit` in any `window`, each request kept with its `meta`. */
export class Log extends Policy {
  readonly kind = "log";
  readonly limit: number;
  readonly window: Duration;
  readonly meta: Arg | undefined;
  readonly name: string;
  constructor(o: LogOptions) {
    super();
    this.limit = o.limit;
    this.window = o.window;
    this.meta = o.meta;
    this.name = o.name ?? "log";
  }
  quotas(): Quota[] {
    return [{ name: this.name, limit: this.limit, windowMs: durationMs(this.window) }];
  }
  private tail(meta?: Arg): Arg[] {
    const tail: Arg[] = [this.limit, durationArg(this.window)];
    const m = meta ?? this.meta;
    if (m !== undefined) tail.push("META", m);
    return tail;
  }
  call(keys: Key[], opts: CallOptions & { meta?: Arg } = {}): Call {
    const key = oneKey("RL.LOG", keys);
    const quotas = this.quotas();
    return granting({
      command: "RL.LOG",
      keys: [key],
      args: [...this.tail(opts.meta), ...options(opts)],
      twin: "rl_log",
      keysFirst: true,
      numkeys: false,
      parse: (reply) => five(replyArray(reply), quotas, 0),
    }, opts);
  }
  ruleArgs(position: number): Arg[] {
    return ["LOG", position, ...this.tail()];
  }
}

/** A window and its limit: `["1m", 5]`. */
export type WindowLimit = readonly [Duration, number];

export interface WindowsOptions {
  limits: readonly WindowLimit[];
  /** The keys' names in the HTTP policies (`ip`, `user`...). */
  names?: readonly string[];
  name?: string;
}

abstract class Windows extends Policy {
  readonly limits: WindowLimit[];
  readonly names: readonly string[] | undefined;
  override readonly keyCount: number | undefined = undefined;
  abstract readonly command: string;
  abstract readonly twinName: string;
  constructor(o: WindowsOptions) {
    super();
    if (!o.limits || o.limits.length === 0) throw new TypeError("at least one [window, limit] pair is needed");
    this.limits = o.limits.map(([w, l]) => [w, l] as const);
    this.names = o.names;
  }
  private keyLabel(i: number, nkeys: number): string {
    if (this.names && i < this.names.length) return this.names[i];
    return nkeys === 1 ? this.name : `${this.name}${i + 1}`;
  }
  quotas(nkeys = 1): Quota[] {
    const out: Quota[] = [];
    for (let i = 0; i < nkeys; i++) {
      for (const [w, limit] of this.limits) {
        out.push({ name: `${this.keyLabel(i, nkeys)}-${durationLabel(w)}`, limit, windowMs: durationMs(w) });
      }
    }
    return out;
  }
  protected limitArgs(): Arg[] {
    return this.limits.flatMap(([w, l]) => ["LIMIT", durationArg(w), l]);
  }
  protected abstract extra(): Arg[];
  call(keys: Key[], opts: CallOptions = {}): Call {
    if (keys.length === 0) throw new TypeError(`${this.command} needs at least one key`);
    const quotas = this.quotas(keys.length);
    const windows = this.limits.map(([w]) => durationMs(w));
    const own = [...keys];
    return granting({
      command: this.command,
      keys: own,
      args: [...this.limitArgs(), ...this.extra(), ...options(opts)],
      twin: this.twinName,
      keysFirst: true,
      numkeys: true,
      parse: (reply, prefix) => {
        const r = replyArray(reply);
        const key = findKey(r[5], own, prefix);
        const windowMs = toInt(r[6]);
        const ki = own.findIndex((k) => k === key);
        const wi = windows.indexOf(windowMs);
        const binding = ki >= 0 && wi >= 0 ? ki * windows.length + wi : undefined;
        const result = five(r, quotas, binding);
        result.key = key;
        result.windowMs = windowMs;
        return result;
      },
    }, opts);
  }
  ruleArgs(position: number): Arg[] {
    return [this.command.split(".")[1], position, ...this.limitArgs(), ...this.extra()];
  }
}

/** RL.MULTI: every key against every `[window, limit]` pair of fixed windows, all or
 * nothing. */
export class Multi extends Windows {
  readonly kind = "multi";
  readonly command = "RL.MULTI";
  readonly twinName = "rl_multi";
  readonly align: boolean;
  readonly name: string;
  constructor(o: WindowsOptions & { align?: boolean }) {
    super(o);
    this.align = o.align ?? false;
    this.name = o.name ?? "multi";
  }
  protected extra(): Arg[] {
    return this.align ? ["ALIGN"] : [];
  }
}

/** RL.SLIDING: the same with sliding windows of `buckets` buckets (default 10). */
export class Sliding extends Windows {
  readonly kind = "sliding";
  readonly command = "RL.SLIDING";
  readonly twinName = "rl_sliding";
  readonly buckets: number | undefined;
  readonly name: string;
  constructor(o: WindowsOptions & { buckets?: number }) {
    super(o);
    this.buckets = o.buckets;
    this.name = o.name ?? "sliding";
  }
  protected extra(): Arg[] {
    return this.buckets === undefined ? [] : ["BUCKETS", this.buckets];
  }
}

export interface LeaseOptions {
  /** At most this many in flight at once. */
  limit: number;
  /** How long a lease lives unless released or renewed. */
  ttl: Duration;
  /** The `Retry-After` of a refused request (default 1 s): slots usually free up long
   * before the oldest lease's ttl, which is what the server replies. */
  retryAfter?: Duration;
  name?: string;
}

/** RL.LEASE: at most `limit` requests in flight at once; each holds a lease (a slot)
 * until RL.RELEASE or until `ttl` has passed. */
export class Lease extends Policy {
  readonly kind = "lease";
  readonly limit: number;
  readonly ttl: Duration;
  readonly retryAfter: Duration;
  readonly name: string;
  constructor(o: LeaseOptions) {
    super();
    this.limit = o.limit;
    this.ttl = o.ttl;
    this.retryAfter = o.retryAfter ?? "1s";
    if (durationMs(this.retryAfter) === undefined) {
      throw new TypeError(`Lease retryAfter must be a positive duration ("1s", "500ms", or seconds), not ${String(o.retryAfter)}`);
    }
    this.name = o.name ?? "lease";
  }
  /** `retryAfter` in ms. */
  get retryAfterMs(): number {
    return durationMs(this.retryAfter) as number;
  }
  override get holdsLease(): boolean {
    return true;
  }
  quotas(): Quota[] {
    return [{ name: this.name, limit: this.limit, windowMs: undefined }];
  }
  call(keys: Key[], opts: CallOptions & { id?: Arg } = {}): Call {
    const key = oneKey("RL.LEASE", keys);
    const args: Arg[] = [this.limit, durationArg(this.ttl)];
    if (opts.id !== undefined) args.push("ID", opts.id);
    args.push(...options(opts, false));
    const quotas = this.quotas();
    return {
      command: "RL.LEASE",
      keys: [key],
      args,
      twin: "rl_lease",
      keysFirst: true,
      numkeys: false,
      parse: (reply) => {
        const r = replyArray(reply);
        const result = five(r, quotas, 0);
        result.leaseId = r.length > 5 ? (toText(r[5]) ?? null) : null;
        return result;
      },
    };
  }
  ruleArgs(position: number): Arg[] {
    return ["LEASE", position, this.limit, durationArg(this.ttl)];
  }
}

export interface BanOptions {
  /** Denied calls (strikes) that start a ban... */
  strikes: number;
  /** ...within this window (from the first strike)... */
  window: Duration;
  /** ...and how long the ban lasts. */
  duration: Duration;
  name?: string;
}

/** A penalty box, only inside RL.ALL (`BAN i strikes window duration`). */
export class Ban extends Policy {
  readonly kind = "ban";
  readonly strikes: number;
  readonly window: Duration;
  readonly duration: Duration;
  readonly name: string;
  constructor(o: BanOptions) {
    super();
    this.strikes = o.strikes;
    this.window = o.window;
    this.duration = o.duration;
    this.name = o.name ?? "ban";
  }
  quotas(): Quota[] {
    return [{ name: this.name, limit: this.strikes, windowMs: durationMs(this.duration) }];
  }
  call(): Call {
    throw new TypeError("a Ban rule is only used inside All (RL.ALL)");
  }
  ruleArgs(position: number): Arg[] {
    return ["BAN", position, this.strikes, durationArg(this.window), durationArg(this.duration)];
  }
}

/** RL.ALL: one key per rule, each judged by its own algorithm, all or nothing. */
export class All extends Policy {
  readonly kind = "all";
  readonly rules: Policy[];
  readonly name: string;
  override readonly keyCount: number | undefined = undefined;
  constructor(rules: readonly Policy[], o: { name?: string } = {}) {
    super();
    if (!rules || rules.length === 0) throw new TypeError("RL.ALL needs at least one rule");
    this.rules = [...rules];
    this.name = o.name ?? "all";
  }
  override get holdsLease(): boolean {
    return this.rules.some((r) => r instanceof Lease);
  }
  quotas(): Quota[] {
    return this.rules.flatMap((r) => r.quotas(1));
  }
  call(keys: Key[], opts: CallOptions & { id?: Arg } = {}): Call {
    if (keys.length !== this.rules.length) {
      throw new TypeError(`RL.ALL takes one key per rule: ${this.rules.length} rules, ${keys.length} keys`);
    }
    const args: Arg[] = this.rules.flatMap((rule, i) => rule.ruleArgs(i + 1));
    const cost = opts.cost ?? 1;
    if (cost !== 1) args.push("COST", cost);
    if (opts.at !== undefined) args.push(...options({ at: opts.at }));
    if (opts.id !== undefined) args.push("ID", opts.id);
    args.push(...options({ refund: opts.refund, force: opts.force, upto: opts.upto }));
    const own = [...keys];
    return granting({
      command: "RL.ALL",
      keys: own,
      args,
      twin: "rl_all",
      keysFirst: true,
      numkeys: true,
      parse: (reply) => {
        const r = replyArray(reply);
        const result = this.bind(five(r, [], undefined), toInt(r[5]) - 1, own);
        if (this.holdsLease) result.leaseId = r.length > 7 ? (toText(r[7]) ?? null) : null;
        return result;
      },
    }, opts);
  }
  /** A result whose binding rule is the rule at `index` (0-based) of this policy, on
   * `keys`: its place, its key, the quotas of every rule and the binding one. */
  bind(result: RateLimit, index: number, keys: readonly Key[]): RateLimit {
    const perRule = this.rules.map((r) => r.quotas(1));
    const quotas = perRule.flat();
    let binding: number | undefined;
    if (index >= 0 && index < perRule.length) {
      const start = perRule.slice(0, index).reduce((n, q) => n + q.length, 0);
      binding = start + Math.max(0, perRule[index].findIndex((q) => q.limit === result.limit));
    }
    const bound: RateLimit = { ...result, quotas, rule: index + 1, key: keys[index] };
    delete bound.quota;
    if (binding !== undefined) bound.quota = quotas[binding];
    return bound;
  }
  ruleArgs(): Arg[] {
    throw new TypeError("RL.ALL rules cannot nest");
  }
}
