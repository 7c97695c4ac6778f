/**
 * Typed calls of every command, on ioredis and node-redis (and their Cluster clients):
 *
 *     const rl = new RateLimiter(new Redis(url));          // or createClient(), a Cluster
 *     const r = await rl.gcra("user:42", 2, 1, "2s");      // RL.GCRA user:42 2 1 2s
 *     if (!r.allowed) wait(r.retryAfterMs);
 *
 * `twins: true` runs the Lua twins instead of the module's commands; `twins: "fallback"`
 * runs the commands and switches to the twins (once, said in the log) for a command the
 * server does not have.
 */
import {
  type Arg,
  type CallOptions,
  type Duration,
  type Instant,
  type Key,
  atArg,
  durationArg,
  findKey,
  keyList,
  toInt,
  toText,
} from "./args.js";
import { All, Ban, type Call, Fixed, Gcra, Lease, Log, Multi, type Policy, Sliding, type WindowLimit, nativeArgv, newLeaseId } from "./policies.js";
import type { RateLimit, Sweep, Throttle } from "./results.js";
import { keySlot } from "./slot.js";
import {
  type Client,
  type Logger,
  ModuleMissingError,
  type SendCommand,
  type Transport,
  errorText,
  isReplyError,
  isUnknownCommand,
  transportOf,
  withPrefix,
} from "./transport.js";
import { type LuaSources, TwinRunner, TwinUnavailable, luaSources } from "./twins.js";
import { LocalBudget, type LocalBudgetOptions } from "./budget.js";

export interface RateLimiterOptions {
  /** false (default): the module's commands; true: the Lua twins; "fallback": the
   * commands, and the twins for any the server does not have. */
  twins?: boolean | "fallback";
  /** A directory laid out as the repository's `lua/` (default: the package's own). */
  luaDir?: string;
  logger?: Logger;
}

/** Options of RL.ALL (and of `check`). */
export interface AllOptions extends CallOptions {
  /** `ID id`: the lease id of the call's LEASE rules (default: one the server makes, or
   * on a Cluster across slots, one the package makes). */
  id?: Arg;
  /** The `id` you pass names no lease held now: on a Cluster across slots, a lease it
   * takes is released when a later slot denies (as one the package made always is). */
  newLease?: boolean;
}

function throttleParse(reply: unknown): Throttle {
  const r = reply as unknown[];
  const limited = toInt(r[0]) !== 0;
  return {
    allowed: !limited,
    limited,
    limit: toInt(r[1]),
    remaining: toInt(r[2]),
    retryAfterS: toInt(r[3]),
    resetAfterS: toInt(r[4]),
  };
}

export class RateLimiter {
  readonly transport: Transport;
  readonly twins: boolean | "fallback";
  private readonly logger: Logger;
  private runner: TwinRunner | undefined;
  private readonly luaDir: string | undefined;
  /** Commands the server answered "unknown command" to (with twins: "fallback"). */
  readonly missing = new Set<string>();

  constructor(client: Client | SendCommand | Transport, opts: RateLimiterOptions = {}) {
    this.transport = transportOf(client);
    this.twins = opts.twins ?? false;
    this.luaDir = opts.luaDir;
    this.logger = opts.logger ?? console;
  }

  /** The twins' runner (functions or scripts), made on first use. */
  get twinRunner(): TwinRunner {
    if (!this.runner) this.runner = new TwinRunner(this.transport, luaSources(this.luaDir));
    return this.runner;
  }

  /** The Lua sources the twins run. */
  get lua(): LuaSources {
    return this.twinRunner.sources;
  }

  /** Run a call: the command, or its twin. */
  async run<T>(call: Call<T>): Promise<T> {
    const prefix = this.transport.prefix;
    const keys = call.keys.map((k) => withPrefix(prefix, k));
    const useTwin = this.twins === true || (this.twins === "fallback" && this.missing.has(call.command));
    if (!useTwin) {
      try {
        const reply = await this.transport.send(nativeArgv({ ...call, keys }), keys);
        return call.parse(reply, prefix);
      } catch (err) {
        if (!isUnknownCommand(err)) throw err;
        if (this.twins !== "fallback" || call.twin === null) throw new ModuleMissingError(call.command, errorText(err));
        this.missing.add(call.command);
        this.logger.warn(
          `redis-ratelimit: the server has no ${call.command} (${errorText(err)}); running its Lua twin instead ` +
            "(the Functions library 'ratelimit' where FUNCTION is allowed, else a script)",
        );
      }
    }
    if (call.twin === null) throw new TwinUnavailable(`${call.command} has no Lua twin`);
    const reply = await this.twinRunner.run(call.twin, keys, call.args);
    return call.parse(reply, prefix);
  }

  // -- the limiters ------------------------------------------------------------------

  /** RL.FIXED key limit window [COST n] [ALIGN] [AT ms] [REFUND|FORCE]. */
  fixed(key: Key, limit: number, window: Duration, o: CallOptions & { align?: boolean; name?: string } = {}): Promise<RateLimit> {
    return this.run(new Fixed({ limit, window, align: o.align, name: o.name }).call([key], o));
  }

  /** RL.GCRA key max_burst count period [COST n] [AT ms] [DELAY max_delay] [REFUND|FORCE]. */
  gcra(
    key: Key,
    maxBurst: number,
    count: number,
    period: Duration,
    o: CallOptions & { delay?: Duration; name?: string } = {},
  ): Promise<RateLimit> {
    return this.run(new Gcra({ maxBurst, count, period, delay: o.delay, name: o.name }).call([key], o));
  }

  /** RL.MULTI numkeys key... LIMIT window limit... [COST n] [ALIGN] [AT ms]. */
  multi(
    keys: Key | readonly Key[],
    limits: readonly WindowLimit[],
    o: CallOptions & { align?: boolean; names?: readonly string[] } = {},
  ): Promise<RateLimit> {
    return this.run(new Multi({ limits, names: o.names, align: o.align }).call(keyList(keys), o));
  }

  /** RL.SLIDING numkeys key... LIMIT window limit... [BUCKETS n] [COST n] [AT ms]. */
  sliding(
    keys: Key | readonly Key[],
    limits: readonly WindowLimit[],
    o: CallOptions & { buckets?: number; names?: readonly string[] } = {},
  ): Promise<RateLimit> {
    return this.run(new Sliding({ limits, names: o.names, buckets: o.buckets }).call(keyList(keys), o));
  }

  /** RL.LOG key limit window [META value] [COST n] [AT ms]. */
  log(key: Key, limit: number, window: Duration, o: CallOptions & { meta?: Arg; name?: string } = {}): Promise<RateLimit> {
    return this.run(new Log({ limit, window, name: o.name }).call([key], o));
  }

  /** RL.ALL: `[key, policy]` pairs, one per key (Fixed, Gcra, Multi, Sliding, Log, Lease,
   * Ban). The result names the binding `rule` (1-based) and its `key`. On a Cluster
   * client, keys in several slots are settled slot by slot (see `allAcrossSlots`). */
  all(rules: ReadonlyArray<readonly [Key, Policy]>, o: AllOptions = {}): Promise<RateLimit> {
    return this.check(
      new All(rules.map(([, p]) => p)),
      rules.map(([k]) => k),
      o,
    );
  }

  /** RL.ALL on a Cluster whose keys hash to several slots: the rules grouped by slot,
   * one RL.ALL per slot in ascending slot order; when one denies, the units the earlier
   * slots took are given back (RL.ALL ... REFUND of their rules, RL.RELEASE of their
   * leases), so that no rule is ever over its limit and a unit taken in vain is held only
   * for the call's round trips. The result is the denying slot's binding rule, else the
   * rule with the least remaining (the first on ties), as one RL.ALL would reply. A BAN
   * rule cannot be split so (its strike would not be atomic with the other slots'
   * verdict): an error. */
  private async allAcrossSlots(policy: All, keys: Key[], o: AllOptions): Promise<RateLimit> {
    const prefix = this.transport.prefix;
    const bySlot = new Map<number, number[]>();
    keys.forEach((key, i) => {
      const slot = keySlot(withPrefix(prefix, key));
      bySlot.set(slot, [...(bySlot.get(slot) ?? []), i]);
    });
    if (bySlot.size < 2) return this.run(policy.call(keys, o));
    if (o.upto) {
      throw new TypeError(
        "UPTO cannot span Cluster slots (each slot would take a different amount): give the keys one hash tag, e.g. {user42}, so that they share a slot",
      );
    }
    if (policy.rules.some((r) => r instanceof Ban)) {
      throw new TypeError(
        "an RL.ALL call with a BAN rule cannot span Cluster slots (its strike could not be recorded atomically with the other slots' verdict): " +
          "give the keys one hash tag, e.g. {user42}, so that they share a slot",
      );
    }
    // Every LEASE rule of a call shares one id, whichever slot it is in. A lease is
    // released after a denial only when its id is new: the renewal of a lease the caller
    // holds cannot be undone, and releasing it would free a slot still in use.
    const id = o.id ?? (policy.holdsLease ? newLeaseId() : undefined);
    const release = o.id === undefined || o.newLease === true;
    const taken: { rules: number[]; result: RateLimit }[] = [];
    for (const slot of [...bySlot.keys()].sort((a, b) => a - b)) {
      const rules = bySlot.get(slot) as number[];
      let result: RateLimit;
      try {
        const slotPolicy = new All(rules.map((i) => policy.rules[i]));
        result = await this.run(slotPolicy.call(rules.map((i) => keys[i]), { ...o, id: slotPolicy.holdsLease ? id : undefined }));
      } catch (err) {
        await this.giveBack(policy, keys, taken, o, release);
        throw err;
      }
      if (!result.allowed) {
        await this.giveBack(policy, keys, taken, o, release);
        const denied = policy.bind(result, rules[(result.rule ?? 1) - 1], keys);
        if (policy.holdsLease) denied.leaseId = null;
        return denied;
      }
      taken.push({ rules, result });
    }
    let best: { index: number; result: RateLimit } | undefined;
    for (const { rules, result } of taken) {
      const index = rules[(result.rule ?? 1) - 1];
      if (!best || result.remaining < best.result.remaining || (result.remaining === best.result.remaining && index < best.index)) {
        best = { index, result };
      }
    }
    const chosen = best as { index: number; result: RateLimit };
    const allowed = policy.bind(chosen.result, chosen.index, keys);
    if (policy.holdsLease) allowed.leaseId = taken.find((t) => t.result.leaseId)?.result.leaseId ?? null;
    return allowed;
  }

  /** What the earlier slots of a denied call took, given back: REFUND of their rules
   * (a lease's rule takes no refund) and RL.RELEASE of their leases. A failure is said
   * in the log: the units stay taken until their windows end, never over-granted. */
  private async giveBack(
    policy: All,
    keys: Key[],
    taken: { rules: number[]; result: RateLimit }[],
    o: CallOptions,
    release: boolean,
  ): Promise<void> {
    const cost = o.cost ?? 1;
    for (const { rules, result } of taken) {
      const refunded = rules.filter((i) => !(policy.rules[i] instanceof Lease));
      const work: Promise<unknown>[] = [];
      if (refunded.length > 0 && cost > 0 && !o.refund) {
        const back = new All(refunded.map((i) => policy.rules[i]));
        work.push(this.run(back.call(refunded.map((i) => keys[i]), { cost, at: o.at, refund: true })));
      }
      const leaseId = result.leaseId;
      if (release && leaseId) {
        for (const i of rules.filter((j) => policy.rules[j] instanceof Lease)) work.push(this.release(keys[i], leaseId, { at: o.at }));
      }
      for (const outcome of await Promise.allSettled(work)) {
        if (outcome.status === "rejected") {
          this.logger.warn(
            `redis-ratelimit: a slot's share of a denied RL.ALL was not given back (${errorText(outcome.reason)}); it is held until its window or lease ends`,
          );
        }
      }
    }
  }

  /** RL.LEASE key limit ttl [ID id] [COST 0|1] [AT ms]: a slot among `limit` in flight;
   * the result's `leaseId` names it (null when refused). */
  lease(key: Key, limit: number, ttl: Duration, o: { id?: Arg; cost?: number; at?: Instant; name?: string } = {}): Promise<RateLimit> {
    return this.run(new Lease({ limit, ttl, name: o.name }).call([key], o));
  }

  /** RL.RELEASE key id [AT ms]: true if a live lease was released. */
  release(key: Key, id: Arg, o: { at?: Instant } = {}): Promise<boolean> {
    const args: Arg[] = [id];
    if (o.at !== undefined) args.push("AT", atArg(o.at));
    return this.run({
      command: "RL.RELEASE",
      keys: [key],
      args,
      twin: "rl_release",
      keysFirst: true,
      numkeys: false,
      parse: (reply) => toInt(reply) === 1,
    });
  }

  /** Apply a policy to its key, or list of keys (Multi, Sliding, All). */
  check(policy: Policy, keys: Key | readonly Key[], o: AllOptions = {}): Promise<RateLimit> {
    if (policy instanceof All && this.transport.cluster) return this.allAcrossSlots(policy, keyList(keys), o);
    return this.run(policy.call(keyList(keys), o));
  }

  /** A local budget of a policy on its key (or keys): takes answered in this process
   * from batches the server grants with UPTO, none spent past a batch's deadline; what
   * is left then and on `close()` given back with REFUND (Fixed, Gcra, Multi of one
   * window, All of one rate rule) or dropped (Sliding, Log, several windows). */
  localBudget(policy: Policy, key: Key | readonly Key[], o: LocalBudgetOptions = {}): LocalBudget {
    return new LocalBudget(this, policy, key, { ...o, logger: o.logger ?? this.logger });
  }

  /** CL.THROTTLE key max_burst count period [quantity], as redis-cell: `period` in whole
   * seconds, the reply's times in whole seconds rounded up. */
  throttle(key: Key, maxBurst: number, count: number, periodSeconds: number, quantity = 1): Promise<Throttle> {
    return this.run({
      command: "CL.THROTTLE",
      keys: [key],
      args: [maxBurst, count, periodSeconds, quantity],
      twin: "cl_throttle",
      keysFirst: true,
      numkeys: false,
      parse: throttleParse,
    });
  }

  // -- keys without a TTL -------------------------------------------------------------

  /** RL.BULKEXPIRE seconds key...: the keys that got a TTL, as the caller gave them. */
  bulkexpire(seconds: Duration, keys: Key | readonly Key[]): Promise<Key[]> {
    const own = keyList(keys);
    return this.run({
      command: "RL.BULKEXPIRE",
      keys: own,
      args: [durationArg(seconds)],
      twin: "rl_bulkexpire",
      keysFirst: false,
      numkeys: false,
      parse: (reply, prefix) => (reply as unknown[]).map((k) => findKey(k, own, prefix) as Key),
    });
  }

  /** RL.SWEEP cursor seconds [MATCH p] [COUNT n] [TYPE t] [DRYRUN] on one server. In a
   * Cluster, sweep each primary: `for (const p of await rl.primaries()) ...`. */
  sweep(
    cursor: number | string,
    seconds: Duration,
    o: { match?: string; count?: number; type?: string; dryrun?: boolean } = {},
  ): Promise<Sweep> {
    if (this.transport.cluster) {
      throw new TypeError("RL.SWEEP is node-local: call it on each primary (await limiter.primaries())");
    }
    const args: Arg[] = [cursor, durationArg(seconds)];
    if (o.match !== undefined) args.push("MATCH", o.match);
    if (o.count !== undefined) args.push("COUNT", o.count);
    if (o.type !== undefined) args.push("TYPE", o.type);
    if (o.dryrun) args.push("DRYRUN");
    return this.run({
      command: "RL.SWEEP",
      keys: [],
      args,
      twin: null,
      keysFirst: true,
      numkeys: false,
      parse: (reply) => {
        const r = reply as unknown[];
        return { cursor: String(toText(r[0])), scanned: toInt(r[1]), expired: toInt(r[2]) };
      },
    });
  }

  /** One limiter per primary (one: this, outside a Cluster), for RL.SWEEP. */
  async primaries(): Promise<RateLimiter[]> {
    const nodes = await this.transport.primaries();
    return nodes.map((t) => new RateLimiter(t, { twins: this.twins, luaDir: this.luaDir, logger: this.logger }));
  }

  /** Whether the server has a command (COMMAND INFO). */
  async hasCommand(name: string): Promise<boolean> {
    const reply = await this.transport.send(["COMMAND", "INFO", name], []);
    return Array.isArray(reply) && reply.some((x) => x !== null && x !== undefined);
  }
}

/** The limiter an integration is given (`client`: a RateLimiter, used as it is), or one
 * made on the client it is given, with `opts`. */
export function limiterOf(client: Client | RateLimiter, opts: RateLimiterOptions): RateLimiter {
  return client instanceof RateLimiter ? client : new RateLimiter(client, opts);
}
