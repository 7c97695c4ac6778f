// A tenant's quota shared by worker processes, each spending it from batches it takes
// from the server (a local budget): most calls cost no round trip, and the server never
// grants more than the limit. Four workers make 1 600 calls against a limit of 1 000.
//
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/local_budget.mjs [--check]
import assert from "node:assert/strict";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { Fixed, RateLimiter } from "redis-native-ratelimit";

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const policy = new Fixed({ limit: 1000, window: "1h", name: "tenant" });
const key = process.env.BUDGET_KEY;

if (key) {
  // A worker: 400 calls, 20 at a time, each decided by the budget.
  const redis = new Redis(url);
  // A refill waits 250 ms for Redis, then the take is allowed uncounted (fail open); the
  // self-check counts every unit, so its workers wait as long as a busy machine may need.
  const timeoutMs = process.argv.includes("--check") ? 30_000 : 250;
  const budget = new RateLimiter(redis).localBudget(policy, key, { batch: 50, timeoutMs });
  let allowed = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      for (let i = 0; i < 20; i++) if ((await budget.take()).allowed) allowed++;
    }),
  );
  await budget.close(); // what it still holds goes back to the tenant's quota
  process.send?.({ allowed, stats: budget.stats() });
  redis.disconnect();
} else {
  const tenant = `rl:example:budget:${process.pid}:tenant:7`;
  /** @returns {Promise<{ allowed: number, stats: import("redis-native-ratelimit").LocalBudgetStats }>} */
  const worker = () =>
    new Promise((resolve, reject) => {
      const child = fork(fileURLToPath(import.meta.url), process.argv.slice(2), { env: { ...process.env, BUDGET_KEY: tenant } });
      /** @type {any} */
      let report;
      child.on("message", (m) => (report = m));
      child.on("exit", (code) => (code === 0 && report ? resolve(report) : reject(new Error(`a worker exited with ${code}`))));
    });
  const done = await Promise.all([worker(), worker(), worker(), worker()]);
  done.forEach(({ allowed, stats }, i) =>
    console.log(`worker ${i + 1}: ${allowed} of 400 allowed, ${stats.serverCalls} server calls, ${stats.givenBack} units given back`),
  );
  const allowed = done.reduce((n, d) => n + d.allowed, 0);
  const calls = done.reduce((n, d) => n + d.stats.serverCalls, 0);
  const redis = new Redis(url);
  const counted = Number(await redis.get(tenant));
  console.log(`1600 calls: ${allowed} allowed (the limit is 1000) with ${calls} server calls; the server counted ${counted}`);
  if (process.argv.includes("--check")) {
    assert.ok(allowed <= 1000, `${allowed} allowed`);
    assert.equal(counted, allowed); // every unit not spent was given back
    assert.ok(calls <= 1600 / 10, `${calls} server calls`);
    for (const { allowed: a, stats } of done) {
      assert.equal(stats.spent, a);
      assert.equal(stats.granted, stats.spent + stats.givenBack);
    }
    console.log("self-check passed");
  }
  await redis.del(tenant);
  redis.disconnect();
}
