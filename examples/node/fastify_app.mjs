// A Fastify app limited by the package's plugin, with a policy per route in the route's
// config, and a lease held while a slow report runs (RL.LEASE: at most 2 at once).
//
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/fastify_app.mjs [--port 3000 | --check]
import assert from "node:assert/strict";
import Fastify from "fastify";
import { createClient } from "redis";
import { Lease, RateLimiter, Sliding, Gcra, ipKey } from "redis-native-ratelimit";
import { fastifyRateLimit } from "redis-native-ratelimit/fastify";

/**
 * @param {import("redis-native-ratelimit").Client} redis a node-redis or ioredis client
 * @param {string} prefix
 * @param {number} [timeoutMs] how long a request waits for Redis (default 250 ms, then fail open)
 */
export async function createApp(redis, prefix = "rl:", timeoutMs = undefined) {
  const app = Fastify();
  await app.register(fastifyRateLimit, {
    client: redis,
    policy: new Gcra({ maxBurst: 9, count: 10, period: "1s" }), // every route: 10 per second
    key: (request) => String(request.headers["x-api-key"] ?? ipKey(request.ip)),
    prefix,
    timeoutMs,
  });
  // Sliding windows on this route: 3 per 10 s and 20 per minute.
  const search = new Sliding({ limits: [["10s", 3], ["1m", 20]], name: "search" });
  app.get("/search", { config: { rateLimit: search } }, async (request) => ({ results: [], remaining: request.rateLimit?.remaining }));
  // At most 2 reports at once per key: a slot held while the request runs.
  const reports = new Lease({ limit: 2, ttl: "2m", name: "report" });
  app.get("/report", { config: { rateLimit: reports } }, async () => ({ report: "done" }));
  app.get("/health", { config: { rateLimit: false } }, async () => ({ ok: true }));
  return app;
}

const redis = await createClient({ url: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" }).connect();
if (process.argv.includes("--check")) {
  const prefix = `rl:example:${process.pid}:`;
  // The check counts every answer: it waits for Redis as long as a busy machine may need.
  const app = await createApp(redis, prefix, 30_000);
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await app.inject({ method: "GET", url: "/search", headers: { "x-api-key": "k1" } })).statusCode);
  const last = await app.inject({ method: "GET", url: "/search", headers: { "x-api-key": "k1" } });
  statuses.push(last.statusCode);
  assert.deepEqual(statuses, [200, 200, 200, 429]);
  assert.equal(last.headers["ratelimit-policy"], '"search-10s";q=3;w=10, "search-1m";q=20;w=60');
  assert.ok(Number(last.headers["retry-after"]) >= 1);
  assert.equal((await app.inject({ url: "/health" })).statusCode, 200);
  const leases = await new RateLimiter(redis).hasCommand("RL.LEASE"); // without it, /report is served unlimited
  if (leases) assert.equal((await app.inject({ url: "/report", headers: { "x-api-key": "k1" } })).statusCode, 200);
  await app.close();
  for (const key of await redis.keys(prefix + "*")) await redis.del(key);
  console.log("self-check passed");
  await redis.close();
} else {
  const i = process.argv.indexOf("--port");
  const app = await createApp(redis);
  await app.listen({ port: i >= 0 ? Number(process.argv[i + 1]) : 3000, host: "127.0.0.1" });
  console.log("listening");
}
