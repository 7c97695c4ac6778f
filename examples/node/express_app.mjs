// An Express app limited by the package's middleware: a GCRA policy on every route, a
// stricter one on POST /login (per address AND per account, one RL.MULTI call), none on
// /health; 429 with Retry-After and the rate limit headers; fail open behind a circuit
// breaker when Redis cannot answer.
//
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/express_app.mjs [--port 3000 | --check]
import assert from "node:assert/strict";
import { once } from "node:events";
import express from "express";
import { Redis } from "ioredis";
import { Gcra, Multi, ipKey } from "redis-native-ratelimit";
import { rateLimit } from "redis-native-ratelimit/express";

/**
 * @param {Redis} redis
 * @param {string} prefix
 * @param {number} timeoutMs
 */
export function createApp(redis, prefix = "rl:", timeoutMs = 250) {
  const app = express();
  app.use(express.urlencoded({ extended: false }));
  app.use(
    rateLimit({
      client: redis, // ioredis or node-redis, or their Cluster clients
      policy: new Gcra({ maxBurst: 4, count: 5, period: "1m" }), // every route: 5 per minute
      routes: {
        "POST /login": new Multi({ limits: [["1m", 3], ["1h", 10]], names: ["ip", "user"] }),
        "/health": null, // not limited
      },
      // The key of a request: its address (set Express's "trust proxy" behind a proxy;
      // ipKey groups an IPv6 address by its /56 network), and for the login form the
      // account too.
      key: (req) => (req.path === "/login" ? [ipKey(req.ip), String(req.body?.user ?? "")] : ipKey(req.ip)),
      prefix, // keys are <prefix><policy name>:<key>
      timeoutMs, // 250 ms, then fail open (failOpen: false refuses with 503)
      message: (result) => ({ error: "slow down", retry_in_ms: result.retryAfterMs }),
    }),
  );
  app.get("/", (req, res) => res.json({ hello: "world", remaining: res.locals.rateLimit?.remaining }));
  app.post("/login", (req, res) => res.json({ welcome: req.body?.user }));
  app.get("/health", (req, res) => res.json({ ok: true }));
  return app;
}

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
if (process.argv.includes("--check")) {
  const prefix = `rl:example:${process.pid}:`;
  // The check counts every answer: it waits for Redis as long as a busy machine may need.
  const server = createApp(redis, prefix, 30_000).listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  const statuses = [];
  for (let i = 0; i < 5; i++) statuses.push((await fetch(url + "/")).status);
  const last = await fetch(url + "/");
  statuses.push(last.status);
  assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
  assert.equal(last.headers.get("ratelimit-limit"), "5");
  assert.equal(last.headers.get("retry-after"), "12"); // one request every 12 s
  const body = /** @type {{ error: string }} */ (await last.json());
  assert.equal(body.error, "slow down");
  assert.equal((await fetch(url + "/health")).status, 200);
  const login = (/** @type {string} */ user) => fetch(url + "/login", { method: "POST", body: new URLSearchParams({ user }) });
  assert.deepEqual([(await login("ann")).status, (await login("bob")).status, (await login("cid")).status, (await login("dan")).status], [200, 200, 200, 429]);
  server.close();
  await redis.del(...(await redis.keys(prefix + "*")));
  console.log("self-check passed");
  redis.disconnect();
} else {
  const i = process.argv.indexOf("--port");
  const port = i >= 0 ? Number(process.argv[i + 1]) : 3000;
  createApp(redis).listen(port, () => console.log(`listening on http://127.0.0.1:${port}`));
}
