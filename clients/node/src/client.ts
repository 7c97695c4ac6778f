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
import { All, type Call, Fixed, Gcra, Lease, Log, Multi, type Policy, Sliding, type WindowLimit, nativeArgv } from "./policies.js";
import type { RateLimit, Sweep, Throttle } from "./results.js";
import { type Client, type SendCommand, type Transport, errorText, isReplyError, transportOf, withPrefix } from "./transport.js";
import { type LuaSources, TwinRunner, TwinUnavailable, luaSources } from "./twins.js";

/** Where the package says what it did about the server (the module missing, the twins
 * in use): `console` by default. */
export interface Logger {
  warn(message: string): void;
  error(message: string): void;
}

export interface RateLimiterOptions {
  /** false (default): the module's commands; true: the Lua twins; "fallback": the
   * commands, and the twins for any the server does not have. */
  twins?: boolean | "fallback";
  /** A directory laid out as the repository's `lua/` (default: the package's own). */
  luaDir?: string;
  logger?: Logger;
}

/** The server has no such command: the module is not loaded (or is older). */
export class ModuleMissingError extends Error {
  override name = "ModuleMissingError";
  constructor(
    readonly command: string,
    readonly reply: string,
  ) {
    super(
      `the Redis server has no ${command} (${reply}): the redis-ratelimit module is not loaded ` +
        "(MODULE LOAD /path/to/libredis_ratelimit.so, or loadmodule in redis.conf), or is older than this command; " +
        'pass twins: "fallback" (or true) to run the Lua twins instead',
    );
  }
}

/** "unknown command" replies: the module (or one of its commands) is missing. */
export function isUnknownCommand(err: unknown): boolean {
  return isReplyError(err) && /unknown command/i.test(errorText(err));
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
   * Ban). The result names the binding `rule` (1-based) and its `key`. */
  all(rules: ReadonlyArray<readonly [Key, Policy]>, o: CallOptions & { id?: Arg } = {}): Promise<RateLimit> {
    const policy = new All(rules.map(([, p]) => p));
    return this.run(policy.call(rules.map(([k]) => k), o));
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
  check(policy: Policy, keys: Key | readonly Key[], o: CallOptions & { id?: Arg } = {}): Promise<RateLimit> {
    return this.run(policy.call(keyList(keys), o));
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
