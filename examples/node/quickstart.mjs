// Typed calls of RL.GCRA, RL.MULTI and RL.ALL from Node, their results and HTTP headers,
// and the Lua twins behind the same calls.
//
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/quickstart.mjs [--check]
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { Fixed, Gcra, RateLimiter, ratelimitHeaders } from "redis-native-ratelimit";

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const rl = new RateLimiter(redis);
const prefix = `rl:quickstart:${process.pid}:`;

// RL.GCRA key max_burst count period: 1 request per 2 s, bursts of 3.
const result = await rl.gcra(prefix + "gcra:user:42", 2, 1, "2s");
if (!result.allowed) console.log("refused; retry in", result.retryAfterMs, "ms");
console.log(result.limit, result.remaining, result.resetAfterMs);

// 5 per minute and 20 per hour, for an address and an account at once. The result
// names the key and the window that decided.
const keys = [prefix + "multi:ip:10.0.0.1", prefix + "multi:user:42"];
const decision = await rl.multi(keys, [["1m", 5], ["1h", 20]], { names: ["ip", "user"] });
console.log(decision.allowed, decision.key, decision.windowMs, ratelimitHeaders(decision));

// A smooth rate per user AND a daily quota per account, all or nothing (RL.ALL).
const both = await rl.all([
  [`{${prefix}acme}:user:42`, new Gcra({ maxBurst: 2, count: 1, period: "1h", name: "user" })],
  [`{${prefix}acme}:daily`, new Fixed({ limit: 1000, window: "1d", name: "account" })],
]);
console.log(both.allowed, both.rule, both.key);

if (process.argv.includes("--check")) {
  const t = 1_900_000_000_000; // AT: replies that do not depend on the clock
  const key = prefix + "check";
  const first = await rl.gcra(key, 2, 1, "10s", { at: t });
  assert.deepEqual([first.allowed, first.limit, first.remaining, first.retryAfterMs, first.resetAfterMs], [true, 3, 2, -1, 10000]);
  await rl.gcra(key, 2, 1, "10s", { at: t });
  await rl.gcra(key, 2, 1, "10s", { at: t });
  const refused = await rl.gcra(key, 2, 1, "10s", { at: t });
  assert.deepEqual([refused.allowed, refused.remaining, refused.retryAfterMs], [false, 0, 10000]);
  assert.deepEqual(ratelimitHeaders(refused), {
    "RateLimit-Limit": "3",
    "RateLimit-Remaining": "0",
    "RateLimit-Reset": "30",
    "RateLimit-Policy": '"gcra";q=3;w=30',
    RateLimit: '"gcra";r=0;t=30',
    "Retry-After": "10",
  });
  assert.equal(decision.key, keys[0]); // the caller's own key
  assert.equal(decision.windowMs, 60_000);
  assert.equal(both.rule, 1);
  // The command and its twin taking turns on one key.
  const other = prefix + "user:7";
  await rl.gcra(other, 2, 1, "10s", { at: t });
  const scripted = await new RateLimiter(redis, { twins: true }).gcra(other, 2, 1, "10s", { at: t });
  assert.deepEqual([scripted.remaining, scripted.resetAfterMs], [1, 20000]);
  await redis.del(key, other, ...keys, `{${prefix}acme}:user:42`, `{${prefix}acme}:daily`, prefix + "gcra:user:42");
  console.log("self-check passed");
}
redis.disconnect();
