// The guard every integration shares, without a server: a call bounded in time whose
// late answer still reaches `late`, outages told from bugs, and a circuit breaker that a
// call failing at once (bad arguments) leaves closed rather than stuck half-open.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { CircuitBreaker, Guard, LimiterTimeout, ModuleMissingError } from "redis-native-ratelimit";
import { memoryLogger } from "./helpers.mjs";

// The guard's timer does not hold the process open (an app's server does): this does,
// while a call waits here for an answer that never comes.
let alive;
before(() => (alive = setInterval(() => {}, 60_000)));
after(() => clearInterval(alive));

test("a call given up on: an outage now, its late answer handed to `late`", async () => {
  const log = memoryLogger();
  const guard = new Guard({ timeoutMs: 5, breaker: false, logger: log });
  let answer;
  const pending = new Promise((resolve) => (answer = resolve));
  const late = [];
  const outcome = await guard.call("a request", () => pending, (value) => late.push(value));
  assert.equal(outcome.kind, "outage");
  assert.ok(outcome.error instanceof LimiterTimeout);
  assert.equal(outcome.called, true);
  assert.equal(log.lines.warn.length, 1);
  answer("taken");
  await guard.settled();
  assert.deepEqual(late, ["taken"]);
  // An answer in time is not late.
  const onTime = await guard.call("a request", async () => "now", (value) => late.push(value));
  assert.deepEqual([onTime.kind, onTime.value], ["answer", "now"]);
  await guard.settled();
  assert.deepEqual(late, ["taken"]);
});

test("outages and bugs: a missing module is an outage said once, bad arguments are thrown", async () => {
  const log = memoryLogger();
  const guard = new Guard({ breaker: false, logger: log, failOpen: false });
  for (let i = 0; i < 3; i++) {
    const outcome = await guard.call("a request", async () => {
      throw new ModuleMissingError("RL.FIXED", "ERR unknown command 'RL.FIXED'");
    });
    assert.equal(outcome.kind, "outage");
  }
  assert.equal(log.lines.error.length, 1);
  assert.match(log.lines.error[0], /refused \(503\)/);
  await assert.rejects(guard.call("a request", async () => {
    throw new TypeError("bad arguments");
  }), /bad arguments/);
});

test("a probe that fails at once with a bug closes the breaker: it is not left half-open", async () => {
  let clock = 0;
  const guard = new Guard({ breaker: { now: () => clock }, logger: memoryLogger() });
  const down = await guard.call("a request", async () => {
    throw new Error("connection refused");
  });
  assert.equal(down.kind, "outage");
  assert.equal(guard.breaker.state, "open");
  assert.equal((await guard.call("a request", async () => "skipped")).called, false);
  clock += 1000; // the default cooldown
  await assert.rejects(
    guard.call("a request", () => {
      throw new TypeError("RL.ALL does not take DELAY in a GCRA rule"); // thrown before any call
    }),
    /DELAY/,
  );
  assert.equal(guard.breaker.state, "closed");
  const next = await guard.call("a request", async () => "answered");
  assert.deepEqual([next.kind, next.value], ["answer", "answered"]);
});

test("a breaker given is shared: an outage in one guard opens it for the other", async () => {
  let clock = 0;
  const breaker = new CircuitBreaker({ now: () => clock });
  const one = new Guard({ breaker, logger: memoryLogger() });
  const other = new Guard({ breaker, logger: memoryLogger() });
  assert.equal(one.breaker, breaker);
  const down = await one.call("a request", async () => {
    throw new Error("connection refused");
  });
  assert.equal(down.kind, "outage");
  assert.equal((await other.call("a request", async () => "skipped")).called, false);
  clock += 1000;
  const probe = await other.call("a request", async () => "answered");
  assert.deepEqual([probe.kind, breaker.state], ["answer", "closed"]);
  assert.ok(new Guard({ breaker: { failures: 2 } }).breaker instanceof CircuitBreaker);
  assert.equal(new Guard({ breaker: false }).breaker, undefined);
});
