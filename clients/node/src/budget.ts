/**
 * A local budget: a hot key's limit spent in this process from batches the server grants
 * with UPTO, so that most takes cost no round trip, and nothing is ever over-granted:
 *
 *     const budget = limiter.localBudget(new Fixed({ limit: 10_000, window: "1m" }), "tenant:7", { batch: 100 });
 *     const r = await budget.take();      // RL.FIXED tenant:7 10000 1m COST 100 UPTO, then 99 takes locally
 *     if (!r.allowed) wait(r.retryAfterMs);
 *     await budget.close();               // RL.FIXED ... COST <held> REFUND: what is left goes back
 *
 * - A take is answered from the units the budget holds. When it holds fewer than the
 *   take's cost it asks for `COST max(batch, cost - held) UPTO`: one request in flight at
 *   a time, which every take that needs units waits for; the units granted join the held.
 * - A unit is spent only once the server granted it, so the units taken across every
 *   process never exceed what the server granted.
 * - A grant of 0 is a refusal with the server's numbers (limit, remaining, retry after,
 *   reset); later takes are refused here, without a call, until its retry after.
 * - A batch has a deadline: the grant's reset after, at most the policy's shortest
 *   window, less a margin (the smaller of 1 s and a tenth of it), counted from when its
 *   call was sent. No unit is spent past it. What is held then (or on `giveBack()`, or
 *   `close()`) goes back with REFUND while at least half the margin is left, for a
 *   policy whose give-back lands in the window it came from (Fixed, Gcra, Multi of one
 *   window, All of one rate rule); later, and always for Sliding, Log and policies of
 *   several windows, it is dropped: its units stay counted until their window passes.
 */
import { type Key, keyList, toText } from "./args.js";
import { Guard, type GuardOptions, LimiterTimeout, LimiterUnavailableError, withTimeout } from "./guard.js";
import { All, Ban, type Call, Fixed, Gcra, Lease, Multi, Policy } from "./policies.js";
import type { RateLimit } from "./results.js";
import { keySlot } from "./slot.js";
import { type Logger, type Transport, certainlyNotRun, errorText, withPrefix } from "./transport.js";

/** What a budget needs of the limiter that makes it (a `RateLimiter`): its calls, and
 * the client they go through. */
export interface BudgetLimiter {
  readonly transport: Transport;
  run<T>(call: Call<T>): Promise<T>;
}

/** The timers a budget schedules a batch's deadline with (default: Node's, unref'd, so
 * that they do not hold the process open). Tests pass their own: `fn` returns the
 * promise of the give-back it starts (the units given back; 0 when they were dropped). */
export interface BudgetTimers {
  setTimeout(fn: () => Promise<number>, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface LocalBudgetOptions extends GuardOptions {
  /** Units asked of the server at a time (default 100): a refill is
   * `COST max(batch, cost - held) UPTO`. Up to this many units sit idle in each process
   * that holds them. */
  batch?: number;
  /** The guard of a middleware or a store (its timeout, circuit breaker and fail open or
   * closed) to share; default: a guard of this budget's own, made from the options. */
  guard?: Guard;
  /** A clock in Unix ms. When given, every call the budget makes is judged at its time
   * (`AT`), and the budget's own times (local refusals, the deadline) read it. */
  clock?: () => number;
  /** The timers of the deadline (default: Node's). */
  timers?: BudgetTimers;
}

/** What a budget did so far (the Python package's `stats()`, its names in camelCase).
 * `granted` = `spent` + `givenBack` + `dropped` + `held`, once no give-back is on its way. */
export interface LocalBudgetStats {
  /** Takes answered. */
  takes: number;
  /** Takes allowed (from held units, or unlimited while the server could not answer and
   * the budget fails open). */
  allowed: number;
  /** Takes refused: by the server, or here within a refusal's retry after, or for a
   * cost that the held and granted units did not cover. */
  denials: number;
  /** Of the denials, those decided here within a refusal's retry after, without a call. */
  localDenials: number;
  /** Units spent by allowed takes. */
  spent: number;
  /** Commands sent: refills (UPTO) and give-backs (REFUND), a give-back sent again
   * included. */
  serverCalls: number;
  /** Refills sent (batches asked for). */
  refills: number;
  /** Units the server granted. */
  granted: number;
  /** Units given back (REFUND answered). */
  givenBack: number;
  /** Units neither spent nor given back: held at a deadline or on close by a policy that
   * does not give back, too late to give back, or a give-back that failed. They return
   * to the limit when their window ends. */
  dropped: number;
  /** Takes decided without the server (an outage: allowed unspent when failing open,
   * refused when failing closed). */
  unavailable: number;
  /** Units held now. */
  held: number;
  /** Takes waiting now for the refill in flight. */
  waiting: number;
}

type Refill = { kind: "granted"; result: RateLimit } | { kind: "denied"; result: RateLimit } | { kind: "outage"; error: unknown };

/** A batch is spent and given back before its window ends, by this margin: a tenth of
 * the batch's life, at most this many ms. */
const MARGIN_MS = 1000;

/** The longest delay Node's setTimeout takes (a longer one fires at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

const NODE_TIMERS: BudgetTimers = {
  setTimeout(fn, ms) {
    // A window of weeks is longer than a timer can wait: waited for in steps.
    const handle: { timer?: NodeJS.Timeout } = {};
    const arm = (left: number) => {
      handle.timer = setTimeout(() => (left > MAX_TIMER_MS ? arm(left - MAX_TIMER_MS) : void fn()), Math.min(left, MAX_TIMER_MS));
      handle.timer.unref?.();
    };
    arm(ms);
    return handle;
  },
  clearTimeout(handle) {
    clearTimeout((handle as { timer?: NodeJS.Timeout }).timer);
  },
};

/** A reply of the server without the units it granted: what a take's result is made of. */
function withoutGranted(result: RateLimit): RateLimit {
  const { granted: _, ...rest } = result;
  return rest;
}

/** The rules that count units: the policy, or an All's rules but its Ban. */
function rateRules(policy: Policy): Policy[] {
  return policy instanceof All ? policy.rules.filter((r) => !(r instanceof Ban)) : [policy];
}

/** The largest cost a policy can ever allow at once. */
function capacityOf(policy: Policy): number {
  return Math.min(...rateRules(policy).flatMap((r) => r.quotas(1).map((q) => q.limit)));
}

/** The shortest window of a policy's limits (a GCRA's burst window), Infinity when none. */
function shortestWindowOf(policy: Policy): number {
  return Math.min(Infinity, ...rateRules(policy).flatMap((r) => r.quotas(1).map((q) => q.windowMs ?? Infinity)));
}

/** Whether what a budget holds can be given back (REFUND) into the window it came from:
 * one window (Fixed, Gcra, Multi of one limit, an All of one such rule beside a Ban),
 * whose end the grant's reply tells. A Sliding or Log window gives back from its newest
 * entries, which may be another process's (the units would come back into later windows
 * than theirs), and with several windows the reply tells when the binding one ends
 * only. */
function givesBack(policy: Policy): boolean {
  const rules = rateRules(policy);
  if (rules.length !== 1) return false;
  const [rule] = rules;
  return rule instanceof Fixed || rule instanceof Gcra || (rule instanceof Multi && rule.limits.length === 1);
}

/** A policy and keys a budget can take: a rate policy, its keys in one Cluster slot. */
function checkBudget(limiter: BudgetLimiter, policy: Policy, keys: Key[]): void {
  if (!(policy instanceof Policy)) {
    throw new TypeError(`a local budget takes a policy (Fixed, Gcra, Multi, Sliding, Log, All), not ${String(policy)}`);
  }
  const rules = policy instanceof All ? policy.rules : [policy];
  if (rules.some((r) => r instanceof Lease)) {
    throw new TypeError(
      "a local budget takes a rate policy (Fixed, Gcra, Multi, Sliding, Log, or All of them), not a Lease: a lease is one slot per request in flight, " +
        "held until released, which cannot be taken in batches",
    );
  }
  if (policy instanceof Ban) throw new TypeError("a Ban is a rule of All, not a policy of its own");
  if (rateRules(policy).length === 0) throw new TypeError("a local budget takes a rate rule: this All has only a Ban, which counts no units");
  if (rules.some((r) => r instanceof Gcra && r.delay !== undefined)) {
    throw new TypeError("a local budget takes no Gcra with delay: a booking (DELAY) cannot be taken in batches (UPTO)");
  }
  if (policy instanceof All && keys.length !== policy.rules.length) {
    throw new TypeError(`the All policy "${policy.name}" has ${policy.rules.length} rules: give one key per rule, not ${keys.length}`);
  }
  if (policy instanceof Multi && keys.length !== 1) {
    throw new TypeError(
      `a local budget of a Multi policy takes one key, not ${keys.length} (for several, an All policy with a Multi rule per key)`,
    );
  }
  if (policy.keyCount === 1 && keys.length !== 1) throw new TypeError(`the ${policy.kind} policy "${policy.name}" takes one key, not ${keys.length}`);
  if (keys.length === 0) throw new TypeError("a local budget needs a key");
  const transport = limiter.transport;
  if (transport.cluster) {
    const slots = new Set(keys.map((k) => keySlot(withPrefix(transport.prefix, k))));
    if (slots.size > 1) {
      throw new TypeError(
        "a local budget's keys must share a Cluster slot (UPTO takes one amount in one atomic call): give them one hash tag, e.g. {user42}",
      );
    }
  }
}

export class LocalBudget {
  readonly policy: Policy;
  readonly keys: readonly Key[];
  readonly batch: number;
  readonly guard: Guard;
  /** The largest cost one take can have: the policy's capacity. */
  readonly capacity: number;
  /** Whether what is held goes back (REFUND) at a deadline and on close (Fixed, Gcra,
   * Multi of one window, All of one rate rule), or is dropped (Sliding, Log, policies of
   * several windows). */
  readonly givesBack: boolean;
  private readonly limiter: BudgetLimiter;
  private readonly logger: Logger;
  private readonly clock: (() => number) | undefined;
  private readonly timers: BudgetTimers;
  private readonly shortestWindowMs: number;
  private readonly label: string;
  private readonly counts = {
    takes: 0,
    allowed: 0,
    denials: 0,
    localDenials: 0,
    spent: 0,
    serverCalls: 0,
    refills: 0,
    granted: 0,
    givenBack: 0,
    dropped: 0,
    unavailable: 0,
  };
  private held = 0;
  private waiting = 0;
  /** From when no held unit is spent, and until when they may still be given back (half
   * the margin later): the earliest of the held batches'. */
  private deadline: number | undefined;
  private sendBy: number | undefined;
  private timer: unknown;
  /** The last grant's reply (without its `granted`: a take's result is its own) and when
   * its call was sent. */
  private last: { result: RateLimit; at: number } | undefined;
  /** The last refusal (without its `granted`), and until when takes are refused without
   * a call. */
  private denial: { result: RateLimit; until: number; resetAt: number } | undefined;
  private refilling: Promise<Refill> | undefined;
  private readonly pending = new Set<Promise<number>>();
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(limiter: BudgetLimiter, policy: Policy, key: Key | readonly Key[], o: LocalBudgetOptions = {}) {
    const keys = keyList(key);
    checkBudget(limiter, policy, keys);
    const batch = o.batch ?? 100;
    if (!Number.isSafeInteger(batch) || batch < 1) throw new TypeError(`batch must be a whole number of at least 1, not ${String(o.batch)}`);
    this.limiter = limiter;
    this.policy = policy;
    this.keys = keys;
    this.batch = batch;
    this.guard = o.guard ?? new Guard(o);
    this.logger = o.logger ?? this.guard.logger;
    this.clock = o.clock;
    this.timers = o.timers ?? NODE_TIMERS;
    this.capacity = capacityOf(policy);
    this.givesBack = givesBack(policy);
    this.shortestWindowMs = shortestWindowOf(policy);
    this.label = keys.map(toText).join(", ");
  }

  private now(): number {
    return this.clock ? this.clock() : Date.now();
  }

  /** Units held now, ready for takes without a call. */
  get holding(): number {
    return this.held;
  }

  /**
   * Take `cost` units (default 1): allowed from the held units, or after a refill
   * (`COST max(batch, cost - held) UPTO`) that this take asks for or waits for. A
   * refusal carries the server's numbers. While the server cannot answer, the take is
   * allowed without spending anything (fail open, the default), or refused with a
   * `LimiterUnavailableError` (503, `Retry-After: 1`) when failing closed.
   */
  async take(cost = 1): Promise<RateLimit> {
    if (!Number.isSafeInteger(cost) || cost < 1) throw new TypeError(`a take's cost is a whole number of at least 1, not ${String(cost)}`);
    if (cost > this.capacity) {
      throw new RangeError(`a take of ${cost} can never be allowed: the policy's capacity is ${this.capacity}`);
    }
    if (this.closed) throw this.closedError();
    this.counts.takes++;
    let asked = false;
    for (;;) {
      const now = this.now();
      this.expire(now);
      if (this.held >= cost) return this.spend(cost, now);
      if (this.denial && now < this.denial.until) {
        this.counts.localDenials++;
        return this.refuse(this.localDenial(now));
      }
      if (this.refilling) {
        this.waiting++;
        let shared: Refill;
        try {
          shared = await this.refilling;
        } finally {
          this.waiting--;
        }
        if (shared.kind === "outage") return this.outage(shared.error);
        continue;
      }
      if (this.closed) throw this.closedError(); // closed while it waited: what came went back
      // This take's own refill did not cover it: refused; the units stay for smaller takes.
      if (asked) return this.refuse(this.shortDenial(now));
      asked = true;
      this.refilling = this.refill(cost - this.held).finally(() => {
        this.refilling = undefined;
      });
      const own = await this.refilling;
      if (own.kind === "outage") return this.outage(own.error);
      if (own.kind === "denied") return this.refuse(this.withHeld(own.result));
    }
  }

  private closedError(): Error {
    return new Error(`the local budget of ${this.label} is closed`);
  }

  /** Ask the server for a batch; its times count from when the call is sent. */
  private async refill(need: number): Promise<Refill> {
    const cost = Math.max(this.batch, need);
    let at = this.now();
    const outcome = await this.guard.call(
      `a take of the local budget of ${this.label}`,
      () => {
        at = this.now();
        this.counts.refills++;
        this.counts.serverCalls++;
        return this.limiter.run(this.policy.call([...this.keys], { cost, upto: true, at: this.clock ? at : undefined }));
      },
      (late) => this.grant(late, at), // granted after the take stopped waiting: still ours
    );
    if (outcome.kind === "outage") return { kind: "outage", error: outcome.error };
    const result = outcome.value;
    if (result.allowed && (result.granted ?? 0) > 0) {
      void this.grant(result, at);
      return { kind: "granted", result };
    }
    const denied = withoutGranted(result);
    this.denial = { result: denied, until: at + Math.max(1, result.retryAfterMs), resetAt: at + Math.max(0, result.resetAfterMs) };
    return { kind: "denied", result: denied };
  }

  /** Units the server granted to a call sent at `at` join the held ones. A batch's life
   * is the grant's reset after (a GCRA's: until the server forgets the grant), at most
   * the policy's shortest window, from when its call was sent (never later than the
   * server counted it); it is spent until its deadline, a margin before the end (the
   * smaller of 1 s and a tenth of the life), and may be given back until half the margin
   * before it. Held units keep the earliest deadline of their batches. Returns the
   * give-back of a grant that came too late to be spent. */
  private grant(result: RateLimit, at: number): Promise<number> | undefined {
    const k = result.granted ?? 0;
    if (!result.allowed || k <= 0) return undefined;
    this.counts.granted += k;
    this.last = { result: withoutGranted(result), at };
    this.denial = undefined;
    const life = Math.min(Math.max(0, result.resetAfterMs), this.shortestWindowMs);
    const margin = Math.min(MARGIN_MS, life / 10);
    const deadline = at + life - margin;
    if (this.held === 0 || this.deadline === undefined || deadline < this.deadline) {
      this.deadline = deadline;
      this.sendBy = at + life - margin / 2;
      this.arm(deadline);
    }
    this.held += k;
    const now = this.now();
    // Closed meanwhile (a late answer), or its deadline passed on the way.
    if (this.closed || now >= deadline) return this.release(now);
    return undefined;
  }

  /** The timer of the deadline: what is held then is released. */
  private arm(deadline: number): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = this.timers.setTimeout(
      () => {
        this.timer = undefined;
        return this.release(this.now());
      },
      Math.max(0, Math.ceil(deadline - this.now())),
    );
  }

  /** Held units past their deadline are released before anything is spent (a take that
   * finds it passed: an event loop too busy for the timer). */
  private expire(now: number): void {
    if (this.deadline !== undefined && now >= this.deadline) void this.release(now);
  }

  /** The held units stop being spent: given back while at least half the margin is
   * left and the policy gives back, else dropped (they return with their window).
   * Resolves to the units given back. */
  private release(now: number): Promise<number> {
    const units = this.held;
    const sendBy = this.sendBy;
    this.held = 0;
    this.deadline = undefined;
    this.sendBy = undefined;
    if (this.timer !== undefined) {
      this.timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (units === 0) return Promise.resolve(0);
    if (this.givesBack && sendBy !== undefined && now < sendBy) return this.track(this.refund(units, sendBy));
    this.counts.dropped += units;
    return Promise.resolve(0);
  }

  private spend(cost: number, now: number): RateLimit {
    this.held -= cost;
    this.counts.spent += cost;
    this.counts.allowed++;
    const last = this.last as { result: RateLimit; at: number };
    return {
      ...last.result,
      allowed: true,
      limited: false,
      remaining: this.held + last.result.remaining,
      retryAfterMs: -1,
      resetAfterMs: Math.max(0, last.at + last.result.resetAfterMs - now),
    };
  }

  /** A refusal's numbers, with what the budget still holds counted as remaining. */
  private withHeld(result: RateLimit): RateLimit {
    return { ...result, remaining: result.remaining + this.held };
  }

  /** A take refused here within the server's refusal: its numbers, at this time. */
  private localDenial(now: number): RateLimit {
    const d = this.denial as { result: RateLimit; until: number; resetAt: number };
    return { ...this.withHeld(d.result), retryAfterMs: Math.max(1, d.until - now), resetAfterMs: Math.max(0, d.resetAt - now) };
  }

  /** A take its own refill did not cover: refused until the grant's window is full
   * again, when any cost up to the capacity fits (never early). */
  private shortDenial(now: number): RateLimit {
    const last = this.last as { result: RateLimit; at: number };
    const reset = Math.max(1, last.at + last.result.resetAfterMs - now);
    return { ...this.withHeld(last.result), allowed: false, limited: true, retryAfterMs: reset, resetAfterMs: reset };
  }

  private refuse(result: RateLimit): RateLimit {
    this.counts.denials++;
    return result;
  }

  private outage(error: unknown): RateLimit {
    this.counts.unavailable++;
    if (!this.guard.failOpen) {
      this.counts.denials++;
      throw new LimiterUnavailableError(error);
    }
    this.counts.allowed++;
    const quotas = this.last?.result.quotas ?? this.policy.quotas(this.keys.length);
    return {
      allowed: true,
      limited: false,
      limit: this.last?.result.limit ?? this.capacity,
      remaining: this.held,
      retryAfterMs: -1,
      resetAfterMs: 0,
      quotas,
    };
  }

  /**
   * Give back now what the budget holds (`REFUND`), as it does by itself at a batch's
   * deadline and on `close()`; resolves to the units given back. Units whose deadline is
   * less than half the margin away are dropped instead (a refund could land in the next
   * window). A budget that does not give back (`givesBack` false: Sliding, Log, several
   * windows) keeps them until their deadline.
   */
  giveBack(): Promise<number> {
    const now = this.now();
    if (this.givesBack) return this.release(now);
    this.expire(now);
    return Promise.resolve(0);
  }

  /** A give-back on its way: `close()` waits for it, as does `guard.settled()`. */
  private track(p: Promise<number>): Promise<number> {
    this.pending.add(p);
    this.guard.track(p);
    void p.finally(() => this.pending.delete(p));
    return p;
  }

  /** REFUND of `units`, waiting at most the guard's `timeoutMs` for its answer. One that
   * certainly did not run (an error reply, a connection that could not be opened) is
   * sent again once, while there is time; one whose fate is unknown (a timeout, a
   * connection lost during the call) never is, as a refund applied twice would hand out
   * units that were spent: a timed-out one is counted when its answer comes. */
  private async refund(units: number, sendBy: number): Promise<number> {
    for (let attempt = 1; ; attempt++) {
      this.counts.serverCalls++;
      const at = this.clock ? this.now() : undefined;
      const sent = (async () => this.limiter.run(this.policy.call([...this.keys], { cost: units, refund: true, at })))();
      try {
        await withTimeout(sent, this.guard.timeoutMs);
        this.counts.givenBack += units;
        return units;
      } catch (err) {
        if (err instanceof LimiterTimeout) {
          this.guard.track(
            sent.then(
              () => (this.counts.givenBack += units),
              (late) => this.dropped(units, late),
            ),
          );
          return 0;
        }
        if (attempt === 1 && certainlyNotRun(err) && this.now() < sendBy) continue;
        this.dropped(units, err);
        return 0;
      }
    }
  }

  private dropped(units: number, err: unknown): void {
    this.counts.dropped += units;
    this.logger.warn(
      `redis-ratelimit: the local budget of ${this.label} could not give back ${units} units (${errorText(err)}); they return to the limit when its window ends`,
    );
  }

  /** Stop: wait for a refill on its way, release what is held (given back, or dropped
   * by a budget that does not give back), wait for the give-backs (each at most the
   * guard's `timeoutMs`: one still unanswered then is counted when its answer comes;
   * `guard.settled()` waits for it). Takes after it throw. */
  close(): Promise<void> {
    if (!this.closing) {
      this.closed = true;
      this.closing = (async () => {
        while (this.refilling) await this.refilling.catch(() => undefined);
        await this.release(this.now());
        while (this.pending.size > 0) await Promise.all([...this.pending]);
      })();
    }
    return this.closing;
  }

  /** What the budget did so far. */
  stats(): LocalBudgetStats {
    return { ...this.counts, held: this.held, waiting: this.waiting };
  }
}
