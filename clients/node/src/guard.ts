/**
 * What stands between a request and the limiter, shared by the middleware, the
 * express-rate-limit store and the NestJS storage: one call bounded in time, an outage
 * of the limiter told from a bug in the call, the circuit breaker, the missing module
 * said once, and what to do with an answer that comes after the request stopped waiting.
 */
import { type BreakerOptions, CircuitBreaker } from "./breaker.js";
import { type Logger, ModuleMissingError, errorText, isReplyError } from "./transport.js";
import { TwinUnavailable } from "./twins.js";

/** How long a request waits for the limiter by default, in ms, before it is served
 * unlimited (fail open) or refused (fail closed). */
export const DEFAULT_TIMEOUT_MS = 250;

export class LimiterTimeout extends Error {
  override name = "LimiterTimeout";
}

/** A request refused because the limiter could not answer and `failOpen` is false:
 * status 503 with `Retry-After: 1`, as Express's error handler and NestJS's exception
 * filter read an error (`status`, `statusCode`, `headers`). */
export class LimiterUnavailableError extends Error {
  override name = "LimiterUnavailableError";
  readonly status = 503;
  readonly statusCode = 503;
  readonly expose = true;
  readonly headers = { "Retry-After": "1" };
  constructor(cause: unknown) {
    super("rate limiter unavailable", { cause });
  }
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

/** `p`, or a `LimiterTimeout` rejection once `ms` have passed without its answer (then
 * `onTimeout` runs first). The timer does not hold the process open. */
export function withTimeout<T>(p: Promise<T>, ms: number, onTimeout?: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout?.();
      reject(new LimiterTimeout(`no answer within ${ms} ms`));
    }, ms);
    timer.unref?.();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** The `breaker` setting: a breaker to share, its settings, or false for none. */
export type BreakerSetting = BreakerOptions | CircuitBreaker | false;

export interface GuardOptions {
  /** Serve requests unlimited when the limiter cannot answer (default true); false
   * refuses them (503 with `Retry-After: 1`). */
  failOpen?: boolean;
  /** How long to wait for the limiter, in ms (default 250). */
  timeoutMs?: number;
  /** The circuit breaker: its settings (default: open on one outage for 1 s), a
   * `CircuitBreaker` to share with other middlewares, stores or budgets, or false for
   * none. */
  breaker?: BreakerSetting;
  /** Where outages and the missing module are said (default `console`). */
  logger?: Logger;
}

/** A call's outcome: the limiter's answer, or an outage (the call failed or was not
 * made: the breaker was open). */
export type Outcome<T> = { kind: "answer"; value: T } | { kind: "outage"; error: unknown; called: boolean };

export class Guard {
  readonly breaker: CircuitBreaker | undefined;
  readonly timeoutMs: number;
  readonly failOpen: boolean;
  readonly logger: Logger;
  /** Set once the server was found without the module (said loudly, once). */
  moduleMissing: string | undefined;
  private readonly pending = new Set<Promise<unknown>>();

  constructor(o: GuardOptions = {}) {
    this.timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.timeoutMs > 0)) throw new TypeError("timeoutMs must be a positive number of milliseconds");
    this.failOpen = o.failOpen !== false;
    this.logger = o.logger ?? console;
    this.breaker = o.breaker === false ? undefined : o.breaker instanceof CircuitBreaker ? o.breaker : new CircuitBreaker(o.breaker ?? {});
  }

  /**
   * One call of the limiter, bounded by `timeoutMs`. An answer, or an outage (said in
   * the log, `what` naming the request); an error in the call itself (bad arguments) is
   * thrown, a bug rather than an outage. `late(value)` runs when the answer comes after
   * the call timed out: what that answer took (a lease) is given back there.
   */
  async call<T>(what: string, run: () => Promise<T>, late?: (value: T) => unknown): Promise<Outcome<T>> {
    if (this.breaker && !this.breaker.allow()) {
      return { kind: "outage", error: new LimiterTimeout("the circuit breaker is open"), called: false };
    }
    const call = (async () => run())(); // a call that throws at once rejects, as a late failure does
    // Only a call given up on can answer late: tracked from its timeout (a failure then is
    // not unhandled).
    const onTimeout = () => this.track(call.then((value) => late?.(value)));
    try {
      const value = await withTimeout(call, this.timeoutMs, onTimeout);
      this.breaker?.success();
      this.moduleMissing = undefined;
      return { kind: "answer", value };
    } catch (err) {
      if (!isOutage(err)) {
        this.breaker?.success(); // the limiter answered: a bug in the call, not an outage
        throw err;
      }
      this.breaker?.failure();
      this.tell(err, what);
      return { kind: "outage", error: err, called: true };
    }
  }

  /** Say an outage: the missing module once, loudly; any other outage as a warning. */
  private tell(err: unknown, what: string): void {
    const served = this.failOpen ? "served UNLIMITED" : "refused (503)";
    if (err instanceof ModuleMissingError) {
      if (this.moduleMissing === undefined) {
        this.moduleMissing = err.message;
        this.logger.error(`\n*** redis-ratelimit: ${err.message}.\n*** Every request is ${served} until the module is loaded. ***\n`);
      }
      return;
    }
    this.logger.warn(`redis-ratelimit: rate limiter unavailable (${errorText(err)}): ${what} ${this.failOpen ? "served unlimited" : "refused"}`);
  }

  /** Keep a promise of work in the background (a release), for `settled()`. */
  track(p: Promise<unknown>): void {
    const kept = p.catch(() => undefined).finally(() => this.pending.delete(kept));
    this.pending.add(kept);
  }

  /** Resolves once every late answer and background release started so far is done
   * (for tests and a graceful shutdown). */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }
}

/** Whether to say something about a key again: at most once until the time it gave
 * (shadow mode's would-be refusals, once per key and window). */
export class OncePerKey {
  private readonly until = new Map<string, number>();

  /** True (and remembered for `forMs`) when nothing was said of `key` in that time. */
  due(key: string, forMs: number, now = Date.now()): boolean {
    if ((this.until.get(key) ?? 0) > now) return false;
    if (this.until.size >= 10_000) {
      for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
    }
    this.until.set(key, now + Math.max(1, forMs));
    return true;
  }
}
