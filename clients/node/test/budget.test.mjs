// Local budgets (UPTO) against real servers with the module, on ioredis and node-redis,
// standalone and Cluster (keys of one slot): concurrent takers and several processes on
// one key never take more than the limit, and the server holds exactly what was spent
// and dropped once the leftovers are given back; which policies give back (REFUND) and
// which drop what they hold (server calls counted by INFO commandstats or a counting
// client); a refill in flight is shared; the deadline, counted from when the refill was
// sent, and the half margin within which a give-back is still sent, driven by an
// injected clock and timers; refusals with the server's numbers and headers; outages,
// late answers, and give-backs sent again only when they certainly did not run.
//
// No assertion depends on how fast the machine is: calls that must be answered wait up
// to PATIENT; a call that must fail ends by a stall only its timeout can end (CLIENT
// PAUSE), an error reply, or a connection that is gone; a background answer is waited
// for (guard.settled()), never slept on.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { Redis, Cluster as IoCluster } from "ioredis";
import {
  All,
  Ban,
  Fixed,
  Gcra,
  Guard,
  Lease,
  LimiterUnavailableError,
  LocalBudget,
  Log,
  Multi,
  RateLimiter,
  Sliding,
  ratelimitHeaders,
} from "redis-native-ratelimit";
import { once } from "node:events";
import { PKG, Server, clientVariants, memoryLogger, serversOfFile, stallableServer, tag } from "./helpers.mjs";

const T = 1_900_000_000_000; // AT: every call judged at a time of the test's choosing
// The timeout of calls that must be answered: far above any stall of a loaded machine.
const PATIENT = 30_000;

const servers = serversOfFile();
const VARIANTS = clientVariants(servers);

/** Calls of a command on every primary since the last reset (INFO commandstats). */
async function commandCalls(primaries, command) {
  const name = command.replace(".", "\\.");
  let n = 0;
  for (const node of primaries) {
    const m = new RegExp(`^cmdstat_${name}:calls=(\\d+)`, "mi").exec(await node.info("commandstats"));
    n += m ? Number(m[1]) : 0;
  }
  return n;
}

async function resetStats(primaries) {
  for (const node of primaries) await node.config("RESETSTAT");
}

/** Timers the test fires itself: what the budget scheduled, and when. */
function fakeTimers() {
  const timers = {
    scheduled: [],
    setTimeout(fn, ms) {
      const handle = { fn, ms, cleared: false };
      timers.scheduled.push(handle);
      return handle;
    },
    clearTimeout(handle) {
      if (handle) handle.cleared = true;
    },
    live() {
      return timers.scheduled.filter((h) => !h.cleared);
    },
    /** Run the one live timer now; its give-back's promise. */
    fire() {
      const live = timers.live();
      assert.equal(live.length, 1, `one live timer, not ${live.length}`);
      live[0].cleared = true;
      return live[0].fn();
    },
  };
  return timers;
}

/** A clock the test moves. */
function fakeClock(start = T) {
  const clock = () => clock.t;
  clock.t = start;
  return clock;
}

/** A budget whose calls wait for their answer, on a clock and timers of the test's. */
function budgetOf(rl, policy, key, o = {}) {
  return rl.localBudget(policy, key, { timeoutMs: PATIENT, clock: fakeClock(), timers: fakeTimers(), ...o });
}

/** A budget of a Fixed window of 1000 on a key of its own, on a clock and timers of the
 * test's, that took `cost` at T. */
async function fixedTookOnce(rl, window, batch, cost = 1) {
  const key = tag() + "fixed";
  const clock = fakeClock();
  const timers = fakeTimers();
  const budget = budgetOf(rl, new Fixed({ limit: 1000, window }), key, { batch, clock, timers });
  assert.ok((await budget.take(cost)).allowed);
  return { key, clock, timers, budget };
}

/** A RateLimiter on an ioredis connection that records each command it sends (as
 * strings), after running `before(argv)` when given. */
function counting(conn, before) {
  const sent = [];
  const rl = new RateLimiter(async (argv) => {
    const args = argv.map(String);
    sent.push(args);
    await before?.(args);
    return conn.call(args[0], ...args.slice(1));
  });
  return { rl, sent, refunds: () => sent.filter((a) => a.includes("REFUND")).length };
}

/** `n` takes at once; the results in order. */
function takeAll(budget, n, cost = 1) {
  return Promise.all(Array.from({ length: n }, () => budget.take(cost)));
}

const numbers = (r) => [r.allowed, r.limited, r.limit, r.remaining, r.retryAfterMs, r.resetAfterMs];

/** Policies whose state the test can read back: the units the server holds as taken. */
const POLICIES = {
  fixed: {
    make: (k) => ({ policy: new Fixed({ limit: 300, window: "1h" }), keys: [k + "f"] }),
    taken: async (raw, keys) => Number((await raw.get(keys[0])) ?? 0),
  },
  gcra: {
    make: (k) => ({ policy: new Gcra({ maxBurst: 299, count: 300, period: "1h" }), keys: [k + "g"] }),
    taken: async (raw, keys, rl) => 300 - (await rl.gcra(keys[0], 299, 300, "1h", { cost: 0, at: T })).remaining,
  },
  "all (fixed and gcra)": {
    make: (k) => ({
      policy: new All([new Fixed({ limit: 300, window: "1h" }), new Gcra({ maxBurst: 499, count: 500, period: "1h" })]),
      keys: [k + "af", k + "ag"],
    }),
    taken: async (raw, keys, rl) => {
      const fixed = Number((await raw.get(keys[0])) ?? 0);
      const gcra = 500 - (await rl.gcra(keys[1], 499, 500, "1h", { cost: 0, at: T })).remaining;
      assert.equal(gcra, fixed, "both rules hold the same units");
      return fixed;
    },
  },
};

const HOUR = "1h";
const MONTH = "30d"; // a GCRA period so long that no unit comes back while a test runs

/** Every policy a budget takes: how many keys, and whether it gives back (REFUND) what it
 * holds, or drops it (a Sliding or Log window gives back from its newest entries, which
 * may be another process's; with several windows the reply tells when one ends only). */
const GIVING_BACK = {
  fixed: [new Fixed({ limit: 20, window: HOUR }), 1, true],
  gcra: [new Gcra({ maxBurst: 19, count: 20, period: MONTH }), 1, true],
  "multi of one window": [new Multi({ limits: [[HOUR, 20]] }), 1, true],
  "multi of two windows": [new Multi({ limits: [[HOUR, 20], ["1d", 50]] }), 1, false],
  sliding: [new Sliding({ limits: [[HOUR, 20]] }), 1, false],
  log: [new Log({ limit: 20, window: HOUR }), 1, false],
  "all of one rule": [new All([new Fixed({ limit: 20, window: HOUR })]), 1, true],
  "all of a rule and a ban": [new All([new Fixed({ limit: 20, window: HOUR }), new Ban({ strikes: 3, window: "1m", duration: "1h" })]), 2, true],
  "all of two rules": [new All([new Gcra({ maxBurst: 19, count: 20, period: MONTH }), new Fixed({ limit: 30, window: "1d" })]), 2, false],
};

for (const [name, connect] of Object.entries(VARIANTS)) {
  describe(name, () => {
    let v;
    let rl;
    before(async () => {
      v = await connect();
      rl = new RateLimiter(v.client);
    });
    after(async () => v?.close());

    test("typed calls with upto: as much as fits, and `granted`", async () => {
      const k = tag() + "upto";
      const got = [];
      for (let i = 0; i < 4; i++) got.push(await rl.fixed(k, 100, "1m", { cost: 30, upto: true, at: T + i }));
      assert.deepEqual(got.map((r) => [r.allowed, r.remaining, r.granted]), [[true, 70, 30], [true, 40, 30], [true, 10, 30], [true, 0, 10]]);
      const refused = await rl.fixed(k, 100, "1m", { cost: 30, upto: true, at: T + 4 });
      assert.deepEqual([...numbers(refused), refused.granted], [false, true, 100, 0, 59996, 59996, 0]);
      const all = await rl.all([[k + ":a", new Gcra({ maxBurst: 9, count: 10, period: "1s" })], [k + ":b", new Fixed({ limit: 4, window: "1m" })]], {
        cost: 7,
        upto: true,
        at: T,
      });
      assert.deepEqual([all.allowed, all.rule, all.granted], [true, 2, 4]);
      const sliding = await rl.sliding(k + ":s", [["1m", 5]], { cost: 9, upto: true, at: T });
      assert.equal(sliding.granted, 5);
      await assert.rejects(async () => rl.lease(k + ":l", 2, "1m", { upto: true }), /neither REFUND, FORCE nor UPTO/);
      if (v.cluster) {
        // Keys in several slots: one amount cannot be taken atomically.
        await assert.rejects(
          rl.all([["a:upto", new Fixed({ limit: 5, window: "1m" })], ["b:upto", new Fixed({ limit: 5, window: "1m" })]], { cost: 2, upto: true }),
          /UPTO cannot span Cluster slots/,
        );
      }
    });

    test("a refill in flight is shared: concurrent takers wait for it, one server call a batch", async () => {
      const k = tag() + "shared";
      const budget = budgetOf(rl, new Fixed({ limit: 1000, window: "1h" }), k, { batch: 100 });
      const primaries = await v.primaries();
      await resetStats(primaries);
      const taking = takeAll(budget, 60);
      assert.equal(budget.stats().waiting, 59); // the first asked; the others wait for its batch
      const first = await taking;
      assert.ok(first.every((r) => r.allowed));
      assert.equal(await commandCalls(primaries, "RL.FIXED"), 1); // 60 takes, one refill
      assert.deepEqual([budget.stats().serverCalls, budget.stats().refills, budget.stats().held, budget.stats().waiting], [1, 1, 40, 0]);
      assert.equal(await v.raw.get(k), "100");
      // 40 held; the other 210 need three refills of 100, one after the other.
      const second = await takeAll(budget, 250);
      assert.ok(second.every((r) => r.allowed));
      assert.equal(await commandCalls(primaries, "RL.FIXED"), 4);
      assert.deepEqual([budget.stats().refills, budget.stats().held, budget.stats().spent], [4, 90, 310]);
      assert.equal(await v.raw.get(k), "400");
      // What the allowed takes say: the budget's units and the server's, and the window.
      const last = second.at(-1);
      assert.deepEqual(numbers(last), [true, false, 1000, 90 + 600, -1, 3_600_000]);
      await budget.close();
      assert.equal(await v.raw.get(k), "310"); // the 90 left given back: the server holds what was spent
      assert.equal(await commandCalls(primaries, "RL.FIXED"), 5);
      assert.deepEqual(budget.stats(), {
        takes: 310,
        allowed: 310,
        denials: 0,
        localDenials: 0,
        spent: 310,
        serverCalls: 5,
        refills: 4,
        granted: 400,
        givenBack: 90,
        dropped: 0,
        unavailable: 0,
        held: 0,
        waiting: 0,
      });
      await assert.rejects(budget.take(), /closed/);
      await budget.close(); // again: nothing to do
    });

    for (const [policyName, [policy, nkeys, gives]] of Object.entries(GIVING_BACK)) {
      test(`${policyName}: takes come from batches; close ${gives ? "gives back what is left (REFUND)" : "sends nothing and drops what is left"}`, async () => {
        const k = tag();
        const keys = Array.from({ length: nkeys }, (_, i) => `${k}:${i}`);
        const key = nkeys === 1 ? keys[0] : keys;
        const command = `RL.${policy.kind.toUpperCase()}`;
        const primaries = await v.primaries();
        const peek = async () => (await rl.check(policy, key, { cost: 0, at: T })).remaining;
        const budget = budgetOf(rl, policy, key, { batch: 6 });
        assert.equal(budget.givesBack, gives);
        const taken = [];
        for (let i = 0; i < 10; i++) taken.push(await budget.take());
        assert.ok(taken.every((t) => t.allowed));
        // Two batches of 6: the server counts 12, the budget holds 2; remaining is what the
        // server had left at the last batch plus what the budget holds.
        assert.equal(await peek(), 8);
        assert.deepEqual([taken.at(-1).remaining, taken[0].remaining, budget.stats().held], [8 + 2, 14 + 5, 2]);
        const calls = await commandCalls(primaries, command);
        await budget.close();
        assert.equal((await commandCalls(primaries, command)) - calls, gives ? 1 : 0); // the REFUND, or none
        // Given back: the server counts what was spent. Dropped: the 2 stay counted until
        // their window passes.
        assert.equal(await peek(), gives ? 10 : 8);
        const s = budget.stats();
        assert.deepEqual([s.givenBack, s.dropped], gives ? [2, 0] : [0, 2]);
        assert.deepEqual([s.takes, s.spent, s.granted, s.held, s.refills, s.serverCalls], [10, 10, 12, 0, 2, gives ? 3 : 2]);
      });
    }

    for (const [policyName, p] of Object.entries(POLICIES)) {
      test(`${policyName}: concurrent takers of several budgets on one key never take more than the limit`, async () => {
        const { policy, keys } = p.make(tag());
        // Five budgets, as five processes would hold them, 100 takes each at once: 500
        // wanted of 300.
        const budgets = Array.from({ length: 5 }, () => budgetOf(rl, policy, policy instanceof All ? keys : keys[0], { batch: 40 }));
        const results = await Promise.all(budgets.map((b) => takeAll(b, 100)));
        const stats = () => budgets.map((b) => b.stats());
        const sum = (field) => stats().reduce((n, s) => n + s[field], 0);
        const allowed = results.flat().filter((r) => r.allowed).length;
        assert.equal(allowed, sum("spent"));
        assert.ok(allowed <= 300, `${allowed} taken of 300`);
        // The server ran out (some budget was refused by it): it granted all it had.
        assert.ok(sum("granted") >= 300, `granted ${sum("granted")}`);
        assert.ok(results.flat().some((r) => !r.allowed));
        // The server holds what was granted and not given back: spent or held.
        assert.equal(await p.taken(v.raw, keys, rl), sum("granted") - sum("givenBack"));
        assert.equal(sum("spent") + sum("held"), sum("granted") - sum("givenBack"));
        for (const b of budgets) await b.close();
        for (const s of stats()) assert.equal(s.granted, s.spent + s.givenBack + s.dropped, JSON.stringify(s));
        // Every leftover given back, or (an All of two rate rules) dropped: the server holds
        // exactly what was spent, and what was dropped until its window passes.
        assert.equal(sum(budgets[0].givesBack ? "dropped" : "givenBack"), 0);
        assert.equal(await p.taken(v.raw, keys, rl), allowed + sum("dropped"));
      });
    }

    test("the deadline: no unit is spent past it; given back while half the margin is left, else dropped", async () => {
      const primaries = await v.primaries();
      const { key: k, clock, timers, budget } = await fixedTookOnce(rl, "10s", 100);
      // The window ends in 10 s: its deadline 1 s before (the smaller of 1 s and a tenth),
      // and its give-back may be sent until half a second before.
      assert.deepEqual(timers.live().map((h) => h.ms), [9000]);
      assert.equal(await v.raw.get(k), "100");
      clock.t = T + 8_999;
      assert.ok((await budget.take()).allowed);
      assert.deepEqual([budget.stats().refills, budget.stats().held], [1, 98]);
      // At the deadline the held units are not spent: given back (REFUND), then a new batch.
      clock.t = T + 9_000;
      assert.ok((await budget.take()).allowed);
      await budget.guard.settled(); // the give-back, sent beside the refill
      assert.deepEqual([budget.stats().refills, budget.stats().givenBack, budget.stats().held, budget.stats().spent], [2, 98, 99, 3]);
      assert.equal(await v.raw.get(k), "102"); // 2 spent, 98 given back, a new batch of 100
      // A batch sent at 9 s lives until the window ends, at 10 s: 1 s, less a tenth.
      assert.deepEqual(timers.live().map((h) => h.ms), [900]);
      // Half its margin (50 ms) before the end, a give-back is no longer sent: dropped.
      clock.t = T + 9_950;
      const calls = await commandCalls(primaries, "RL.FIXED");
      assert.equal(await budget.giveBack(), 0);
      assert.equal(await commandCalls(primaries, "RL.FIXED"), calls);
      assert.deepEqual([budget.stats().dropped, budget.stats().held], [99, 0]);
      assert.equal(await v.raw.get(k), "102"); // the dropped 99 stay counted until the window ends
      await budget.close();
      const s = budget.stats();
      assert.equal(s.granted, s.spent + s.givenBack + s.dropped);

      // One millisecond earlier, it is sent.
      const early = await fixedTookOnce(rl, "10s", 100);
      early.clock.t = T + 9_499;
      assert.equal(await early.budget.giveBack(), 99);
      assert.equal(await v.raw.get(early.key), "1");
      await early.budget.close();

      // The timer gives back at the deadline by itself.
      const timed = await fixedTookOnce(rl, "1m", 10, 3);
      assert.deepEqual(timed.timers.live().map((h) => h.ms), [59_000]);
      timed.clock.t = T + 59_000;
      assert.equal(await timed.timers.fire(), 7);
      assert.equal(await v.raw.get(timed.key), "3");
      await timed.budget.close();

      // GCRA: the grant's reset is when the server forgets it.
      const g = tag() + "gcra";
      const timersG = fakeTimers();
      const gcra = budgetOf(rl, new Gcra({ maxBurst: 99, count: 100, period: "1s" }), g, { batch: 10, timers: timersG });
      assert.ok((await gcra.take(3)).allowed);
      assert.deepEqual(timersG.live().map((h) => h.ms), [90]); // 10 units of 10 ms, less a tenth
      assert.equal((await rl.gcra(g, 99, 100, "1s", { cost: 0, at: T })).remaining, 90);
      assert.equal(await timersG.fire(), 7);
      assert.equal((await rl.gcra(g, 99, 100, "1s", { cost: 0, at: T })).remaining, 97);
      await gcra.close();
    });

    test("a budget that does not give back holds its units to the deadline, then drops them", async () => {
      const k = tag() + "sliding";
      const primaries = await v.primaries();
      const clock = fakeClock();
      const timers = fakeTimers();
      const budget = budgetOf(rl, new Sliding({ limits: [["10s", 50]] }), k, { batch: 10, clock, timers });
      assert.ok((await budget.take()).allowed);
      const remaining = async () => (await rl.sliding(k, [["10s", 50]], { cost: 0, at: clock.t })).remaining;
      assert.equal(await remaining(), 40);
      assert.equal(await budget.giveBack(), 0); // kept: a REFUND could take another process's units
      assert.equal(budget.stats().held, 9);
      assert.deepEqual(timers.live().map((h) => h.ms), [9000]);
      const calls = await commandCalls(primaries, "RL.SLIDING");
      clock.t = T + 9_000;
      assert.equal(await timers.fire(), 0);
      assert.equal(await commandCalls(primaries, "RL.SLIDING"), calls); // nothing sent
      assert.deepEqual([budget.stats().dropped, budget.stats().held, budget.stats().givenBack], [9, 0, 0]);
      assert.equal(await remaining(), 40); // counted until the window passes
      await budget.close();
    });

    test("Node's own timers: a window longer than a timer can wait is not given back at once", async () => {
      const k = tag() + "month";
      const budget = rl.localBudget(new Fixed({ limit: 1000, window: "30d" }), k, { batch: 10, timeoutMs: PATIENT });
      assert.ok((await budget.take()).allowed);
      // Node fires timers in the order they fall due: a timer of 30 days less a second,
      // overflowing to 1 ms, would have fired before this one.
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual([budget.stats().held, budget.stats().givenBack], [9, 0]);
      await budget.close();
      assert.equal(await v.raw.get(k), "1");
    });

    test("refusals carry the server's numbers and headers; within their retry after, no call", async () => {
      const k = tag() + "denied";
      const clock = fakeClock();
      const budget = budgetOf(rl, new Fixed({ limit: 5, window: "10s", name: "api" }), k, { batch: 3, clock });
      const got = [];
      for (let i = 0; i < 6; i++) got.push(await budget.take());
      assert.deepEqual(got.map((r) => r.allowed), [true, true, true, true, true, false]);
      const refused = got[5];
      const direct = await rl.fixed(k, 5, "10s", { at: T, name: "api" }); // the server's own refusal
      assert.deepEqual(numbers(refused), numbers(direct));
      assert.deepEqual(numbers(refused), [false, true, 5, 0, 10000, 10000]);
      assert.deepEqual(ratelimitHeaders(refused), ratelimitHeaders(direct));
      assert.equal(ratelimitHeaders(refused)["Retry-After"], "10");
      const calls = budget.stats().serverCalls;
      clock.t = T + 4_000;
      const local = await budget.take();
      assert.equal(budget.stats().serverCalls, calls); // refused here
      const later = await rl.fixed(k, 5, "10s", { at: T + 4_000, name: "api" });
      assert.deepEqual(numbers(local), numbers(later));
      assert.deepEqual(ratelimitHeaders(local), ratelimitHeaders(later));
      assert.deepEqual([budget.stats().denials, budget.stats().localDenials, budget.stats().takes], [2, 1, 7]);
      // After the retry after, the server is asked again: a new window.
      clock.t = T + 10_000;
      assert.ok((await budget.take()).allowed);
      assert.equal(budget.stats().serverCalls, calls + 1);
      await budget.close();

      // A take larger than what the server can grant now: refused, the units kept for
      // smaller takes.
      const g = tag() + "short";
      const small = budgetOf(rl, new Gcra({ maxBurst: 9, count: 1, period: "1h" }), g, { batch: 4 });
      assert.ok((await small.take(4)).allowed); // 6 left on the server
      assert.ok((await small.take(4)).allowed); // 2 left
      const short = await small.take(3); // a batch of 4 asked, 2 granted: not 3
      assert.deepEqual([short.allowed, short.limit, short.remaining], [false, 10, 2]);
      assert.equal(short.retryAfterMs, short.resetAfterMs); // when the whole burst is back: never early
      assert.ok(short.retryAfterMs > 0);
      assert.deepEqual([small.stats().held, small.stats().denials, small.stats().localDenials], [2, 1, 0]);
      assert.ok((await small.take(2)).allowed); // from the held units, no call
      assert.equal(small.stats().refills, 3);
      await small.close();
    });

    test("what a budget refuses to take", async () => {
      const k = tag();
      assert.throws(() => rl.localBudget(new Lease({ limit: 5, ttl: "1m" }), k), /not a Lease/);
      assert.throws(() => rl.localBudget(new All([new Fixed({ limit: 5, window: "1m" }), new Lease({ limit: 5, ttl: "1m" })]), [k + "a", k + "b"]), /not a Lease/);
      assert.throws(() => rl.localBudget(new Gcra({ maxBurst: 1, count: 1, period: "1s", delay: "1s" }), k), /delay/);
      assert.throws(() => rl.localBudget(new Multi({ limits: [["1m", 5]] }), [k + "a", k + "b"]), /Multi policy takes one key/);
      assert.throws(() => rl.localBudget(new Fixed({ limit: 5, window: "1m" }), [k + "a", k + "b"]), /takes one key/);
      assert.throws(() => rl.localBudget(new All([new Fixed({ limit: 5, window: "1m" })]), [k + "a", k + "b"]), /one key per rule/);
      assert.throws(() => rl.localBudget(new Ban({ strikes: 1, window: "1m", duration: "1m" }), k), /Ban/);
      assert.throws(() => rl.localBudget(new All([new Ban({ strikes: 1, window: "1m", duration: "1m" })]), k), /only a Ban/);
      assert.throws(() => rl.localBudget(new Fixed({ limit: 5, window: "1m" }), k, { batch: 0 }), /batch/);
      if (v.cluster) {
        assert.throws(
          () => rl.localBudget(new All([new Fixed({ limit: 5, window: "1m" }), new Fixed({ limit: 5, window: "1m" })]), ["a:budget", "b:budget"]),
          /share a Cluster slot/,
        );
      }
      const budget = budgetOf(rl, new Gcra({ maxBurst: 4, count: 1, period: "1m" }), k);
      await assert.rejects(budget.take(0), TypeError);
      await assert.rejects(budget.take(1.5), TypeError);
      await assert.rejects(budget.take(6), /can never be allowed: the policy's capacity is 5/);
      assert.equal(await v.raw.exists(k), 0); // nothing asked
      await budget.close();
    });
  });
}

describe("several Node processes on one key", () => {
  // Each process: its own client and budget on the same key, its takes from 10
  // concurrent loops, then close; it prints what it did.
  const WORKER = `
    import { Redis } from "ioredis";
    import { createCluster } from "redis";
    import { Fixed, RateLimiter } from "redis-native-ratelimit";
    const o = JSON.parse(process.env.BUDGET_WORKER);
    const url = "redis://127.0.0.1:" + o.port;
    const client =
      o.kind === "ioredis" ? new Redis(url)
      : o.kind === "node-redis Cluster" ? await createCluster({ rootNodes: [{ url }] }).connect()
      : null;
    const budget = new RateLimiter(client).localBudget(new Fixed({ limit: o.limit, window: "1h" }), o.key, { batch: o.batch, clock: () => o.at, timeoutMs: o.timeoutMs });
    let allowed = 0;
    await Promise.all(Array.from({ length: 10 }, async () => {
      for (let i = 0; i < o.takes / 10; i++) if ((await budget.take()).allowed) allowed++;
    }));
    await budget.close();
    console.log(JSON.stringify({ allowed, stats: budget.stats() }));
    if (o.kind === "ioredis") client.disconnect(); else await client.close();
  `;

  function runWorker(options) {
    const child = spawn(process.execPath, ["--input-type=module", "-e", WORKER], {
      cwd: PKG,
      env: { ...process.env, BUDGET_WORKER: JSON.stringify(options) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => child.kill(), 120_000);
    return new Promise((resolve, reject) =>
      child.once("exit", (code) => {
        clearTimeout(timer);
        if (code !== 0) reject(new Error(`worker exited with ${code}:\n${out}\n${err}`));
        else resolve(JSON.parse(out.trim().split("\n").at(-1)));
      }),
    );
  }

  for (const kind of ["ioredis", "node-redis Cluster"]) {
    // 600 takes of a limit of 300: the server runs out; 160 takes: it does not, and each
    // process gives back the 10 units of its second batch of 25 it did not spend.
    for (const takes of [150, 40]) {
      test(`${kind}: four processes, ${4 * takes} takes of a limit of 300`, async () => {
        const onCluster = kind.includes("Cluster");
        const key = tag() + "processes";
        const port = onCluster ? servers.cluster.port : servers.server.port;
        const raw = onCluster ? new IoCluster([{ host: "127.0.0.1", port }]) : new Redis({ port, host: "127.0.0.1" });
        try {
          const done = await Promise.all([0, 1, 2, 3].map(() => runWorker({ kind, port, key, limit: 300, batch: 25, takes, at: T, timeoutMs: PATIENT })));
          const sum = (f) => done.reduce((n, d) => n + d.stats[f], 0);
          const allowed = done.reduce((n, d) => n + d.allowed, 0);
          assert.ok(allowed <= 300, `${allowed} taken of 300`);
          assert.equal(allowed, sum("spent"));
          for (const d of done) assert.equal(d.stats.granted, d.stats.spent + d.stats.givenBack, JSON.stringify(d.stats));
          assert.equal(sum("held") + sum("dropped"), 0);
          if (takes === 150) {
            assert.ok(sum("granted") >= 300, `granted ${sum("granted")}`); // the server ran out
          } else {
            assert.equal(allowed, 160);
            assert.deepEqual(done.map((d) => [d.stats.granted, d.stats.givenBack, d.stats.serverCalls]), done.map(() => [50, 10, 3]));
          }
          // Every leftover given back: the server's count is exactly what the processes spent.
          assert.equal(Number(await raw.get(key)), allowed);
        } finally {
          raw.disconnect();
        }
      });
    }
  }
});

describe("outages", () => {
  test("a server that cannot be reached: fail open allows without spending, fail closed refuses; the breaker spares the calls", async () => {
    const gone = await Server.start();
    const port = gone.port;
    await gone.remove(); // nothing answers there now
    const client = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    client.on("error", () => {});
    try {
      const rl = new RateLimiter(client);
      const log = memoryLogger();
      const open = rl.localBudget(new Fixed({ limit: 5, window: "1m" }), "k", { logger: log, timers: fakeTimers() });
      const r = await open.take();
      assert.deepEqual([r.allowed, r.limit, r.remaining], [true, 5, 0]);
      await open.take(); // the breaker is open: no call
      assert.deepEqual([open.stats().unavailable, open.stats().allowed, open.stats().spent, open.stats().serverCalls], [2, 2, 0, 1]);
      assert.equal(open.guard.breaker.stats.skipped, 1);
      assert.equal(log.lines.warn.length, 1);
      const closed = rl.localBudget(new Fixed({ limit: 5, window: "1m" }), "k", { failOpen: false, logger: log, timers: fakeTimers() });
      await assert.rejects(closed.take(), (err) => err instanceof LimiterUnavailableError && err.status === 503);
      assert.deepEqual([closed.stats().unavailable, closed.stats().denials], [1, 1]);
      // A guard shared with a middleware: its breaker, already open, decides.
      const guard = new Guard({ logger: log });
      guard.breaker.failure();
      const shared = rl.localBudget(new Fixed({ limit: 5, window: "1m" }), "k", { guard });
      assert.equal(shared.guard, guard);
      assert.ok((await shared.take()).allowed);
      assert.equal(shared.stats().serverCalls, 0);
      await Promise.all([open.close(), closed.close(), shared.close()]);
    } finally {
      client.disconnect();
    }
  });

  test("a grant that comes after the take stopped waiting joins the held units; a give-back that times out is not sent again, and counts once answered", async () => {
    const s = await stallableServer();
    try {
      const { rl, refunds } = counting(s.client);
      const key = tag() + "late";
      const short = { batch: 10, timeoutMs: 50, breaker: false, timers: fakeTimers(), logger: memoryLogger() };
      const budget = rl.localBudget(new Fixed({ limit: 100, window: "1h" }), key, { ...short, clock: () => T });
      // Every write waits until resume(): the refill can only end by its timeout.
      await s.stall();
      const r = await budget.take(); // served unlimited (fail open)
      assert.deepEqual([r.allowed, budget.stats().unavailable, budget.stats().spent], [true, 1, 0]);
      await s.resume();
      await budget.guard.settled(); // the late answer: 10 granted
      assert.deepEqual([budget.stats().granted, budget.stats().held], [10, 10]);
      assert.equal(await s.admin.get(key), "10");
      assert.ok((await budget.take()).allowed);
      assert.equal(budget.stats().refills, 1);
      // Stalled again: close()'s give-back can only end by its timeout. Whether it ran is
      // unknown then: it is not sent again, and counts as given back once its answer comes.
      await s.stall();
      await budget.close();
      assert.deepEqual([refunds(), budget.stats().givenBack, budget.stats().dropped, budget.stats().held], [1, 0, 0, 0]);
      await s.resume();
      await budget.guard.settled();
      assert.deepEqual([refunds(), budget.stats().givenBack, budget.stats().dropped], [1, 9, 0]);
      assert.equal(await s.admin.get(key), "1");

      // A grant that comes after its deadline: not spent; given back at once while half
      // the margin is left (a minute's window: until 59.5 s), else dropped.
      for (const [arrives, given, dropped] of [
        [59_499, 10, 0],
        [59_500, 0, 10],
      ]) {
        const other = `${tag()}later${arrives}`;
        const clock = fakeClock();
        const late = rl.localBudget(new Fixed({ limit: 100, window: "1m" }), other, { ...short, clock });
        await s.stall();
        assert.ok((await late.take()).allowed);
        clock.t = T + arrives;
        await s.resume();
        await late.guard.settled();
        const st = late.stats();
        assert.deepEqual([st.granted, st.held, st.givenBack, st.dropped], [10, 0, given, dropped], String(arrives));
        assert.equal(Number((await s.admin.get(other)) ?? 0), 10 - given);
        await late.close();
      }
    } finally {
      await s.remove();
    }
  });

  test("a give-back the server refuses (an error reply: it did not run) is sent again once, while half the margin is left", async () => {
    const own = await Server.start();
    const conn = new Redis({ port: own.port, host: "127.0.0.1" });
    const admin = new Redis({ port: own.port, host: "127.0.0.1" });
    try {
      // The server refuses the next `refuse` REFUNDs as out of memory (maxmemory 1 while
      // each is sent); `during` runs while the first is on its way.
      let refuse = 0;
      let during;
      const { rl, refunds } = counting(conn, async (argv) => {
        if (!argv.includes("REFUND")) return;
        await admin.config("SET", "maxmemory", refuse-- > 0 ? "1" : "0");
        during?.();
        during = undefined;
      });
      const cases = [
        // [refusals, the clock moves past the half margin meanwhile, REFUNDs sent, given back]
        [1, false, 2, 9],
        [2, false, 2, 0],
        [1, true, 1, 0],
      ];
      for (const [refusals, late, sent, given] of cases) {
        const key = tag() + "refused";
        const clock = fakeClock();
        const log = memoryLogger();
        const budget = budgetOf(rl, new Fixed({ limit: 100, window: "10s" }), key, { batch: 10, clock, logger: log });
        assert.ok((await budget.take()).allowed);
        const before = refunds();
        refuse = refusals;
        if (late) during = () => (clock.t = T + 9_500);
        await budget.close();
        await admin.config("SET", "maxmemory", "0");
        const what = JSON.stringify({ refusals, late });
        assert.equal(refunds() - before, sent, what);
        const st = budget.stats();
        assert.deepEqual([st.givenBack, st.dropped, st.serverCalls], [given, 9 - given, 1 + sent], what);
        assert.equal(await conn.get(key), String(10 - given), what);
        assert.equal(log.lines.warn.length, given ? 0 : 1, what);
      }
    } finally {
      await admin.config("SET", "maxmemory", "0").catch(() => {});
      conn.disconnect();
      admin.disconnect();
      await own.remove();
    }
  });

  test("a give-back the client could not send (its connection gone, no offline queue) is sent again once, then dropped", async () => {
    const own = await Server.start();
    const conn = new Redis({ port: own.port, host: "127.0.0.1", enableOfflineQueue: false, retryStrategy: () => 60_000 });
    conn.on("error", () => {});
    try {
      await once(conn, "ready");
      const { rl, refunds } = counting(conn);
      const log = memoryLogger();
      const budget = budgetOf(rl, new Fixed({ limit: 100, window: "1h" }), tag() + "gone", { batch: 10, logger: log });
      assert.ok((await budget.take()).allowed);
      const closed = once(conn, "close");
      await own.stop();
      await closed;
      await budget.close();
      assert.equal(refunds(), 2);
      assert.deepEqual([budget.stats().givenBack, budget.stats().dropped, budget.stats().serverCalls], [0, 9, 3]);
      assert.equal(log.lines.warn.length, 1);
      assert.match(log.lines.warn[0], /could not give back 9 units .*enableOfflineQueue/);
    } finally {
      conn.disconnect();
      await own.remove();
    }
  });

  test("a batch's deadline counts from when its call was sent", async () => {
    const c = new Redis({ port: servers.server.port, host: "127.0.0.1" });
    try {
      const clock = fakeClock();
      // Each refill's answer comes 700 ms (of the budget's clock) after it was sent.
      const { rl } = counting(c, async (argv) => {
        if (argv.includes("UPTO")) clock.t += 700;
      });
      const timers = fakeTimers();
      const key = tag() + "sent";
      const budget = rl.localBudget(new Fixed({ limit: 1000, window: "10s" }), key, { batch: 100, timeoutMs: PATIENT, clock, timers });
      assert.ok((await budget.take()).allowed);
      // Sent at T: its window ends at T + 10 s, its deadline 1 s earlier, 8.3 s after the
      // answer came (9 s from the answer would be past it).
      assert.equal(clock.t, T + 700);
      assert.deepEqual(timers.live().map((h) => h.ms), [8300]);
      clock.t = T + 8_999;
      assert.ok((await budget.take()).allowed);
      assert.deepEqual([budget.stats().refills, budget.stats().held], [1, 98]);
      clock.t = T + 9_000;
      assert.ok((await budget.take()).allowed);
      await budget.guard.settled();
      assert.deepEqual([budget.stats().refills, budget.stats().givenBack], [2, 98]);
      await budget.close();
    } finally {
      c.disconnect();
    }
  });

  test("one refill in flight at a time (a counting client)", async () => {
    const c = new Redis({ port: servers.server.port, host: "127.0.0.1" });
    let inFlight = 0;
    let most = 0;
    let sent = 0;
    const rl = new RateLimiter(async (argv) => {
      sent++;
      most = Math.max(most, ++inFlight);
      try {
        return await c.call(String(argv[0]), ...argv.slice(1).map(String));
      } finally {
        inFlight--;
      }
    });
    try {
      const key = tag() + "counted";
      const budget = budgetOf(rl, new Gcra({ maxBurst: 999, count: 1000, period: "1h" }), key, { batch: 7 });
      const got = await takeAll(budget, 100);
      assert.ok(got.every((r) => r.allowed));
      assert.deepEqual([sent, most, budget.stats().refills], [15, 1, 15]); // ceil(100 / 7)
      await budget.close();
      assert.equal(sent, 16);
      assert.equal((await rl.gcra(key, 999, 1000, "1h", { cost: 0, at: T })).remaining, 900);
      assert.ok(budget instanceof LocalBudget);
    } finally {
      c.disconnect();
    }
  });
});
