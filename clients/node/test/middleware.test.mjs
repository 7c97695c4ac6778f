// The Express middleware and the Fastify plugin in real apps served over HTTP on
// loopback, against real servers: N allowed then 429 with the headers, a policy and a key
// per route (RL.MULTI, RL.ALL, a lease held while the request runs), a body of one's own,
// fail open behind a circuit breaker when the server is stopped, fail closed, the missing
// module said once, and bugs surfaced rather than served.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import express from "express";
import Fastify from "fastify";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { All, Fixed, Gcra, Lease, Multi, RateLimiter } from "redis-ratelimit";
import { rateLimit } from "redis-ratelimit/express";
import { fastifyRateLimit } from "redis-ratelimit/fastify";
import { Server, tag, notYet, memoryLogger, listen } from "./helpers.mjs";

// 5 per hour, no burst beyond them: every request is judged by the counts alone.
const POLICY = new Gcra({ maxBurst: 4, count: 5, period: "1h" });
const PATIENT = 30_000; // the normal path must never take the outage path

let server;
let bare;
before(async () => {
  server = await Server.start();
  bare = await Server.start({ module: false });
});
after(async () => {
  await server?.remove();
  await bare?.remove();
});

function keyOf(req) {
  const user = req.headers["x-user"] ?? "anonymous";
  const path = req.path ?? req.url.split("?")[0];
  if (path === "/login") return [user, req.headers["x-account"] ?? "nobody"];
  if (path === "/report") return [user, req.headers["x-account"] ?? "nobody"];
  return user;
}

/** Both frameworks, the same app: `/`, `POST /login`, `/report`, `/health`, `/slow`. */
const FRAMEWORKS = {
  express: async (options, gate) => {
    const app = express();
    const mw = rateLimit({ key: keyOf, timeoutMs: PATIENT, ...options });
    app.use(mw);
    app.get("/", (req, res) => res.json({ remaining: res.locals.rateLimit?.remaining ?? null }));
    app.post("/login", (req, res) => res.json({ ok: true }));
    app.get("/report", (req, res) => res.json({ ok: true }));
    app.get("/health", (req, res) => res.json({ ok: true }));
    app.get("/slow", async (req, res) => {
      await gate?.();
      res.json({ ok: true });
    });
    app.use((err, req, res, next) => res.status(500).json({ error: String(err.message) }));
    const http = createServer(app);
    const url = await listen(http);
    return { url, state: mw, close: () => new Promise((r) => http.close(r)) };
  },
  fastify: async (options, gate) => {
    const app = Fastify();
    await app.register(fastifyRateLimit, { key: keyOf, timeoutMs: PATIENT, ...options });
    app.get("/", async (req) => ({ remaining: req.rateLimit?.remaining ?? null }));
    app.post("/login", async () => ({ ok: true }));
    app.get("/report", async () => ({ ok: true }));
    app.get("/health", { config: { rateLimit: false } }, async () => ({ ok: true }));
    app.get("/slow", async () => {
      await gate?.();
      return { ok: true };
    });
    const url = await app.listen({ port: 0, host: "127.0.0.1" });
    return { url, state: app.rateLimit, close: () => app.close() };
  },
};

async function get(url, path, headers = {}, method = "GET") {
  const res = await fetch(url + path, { method, headers });
  const text = await res.text();
  let body = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, body };
}

for (const [name, make] of Object.entries(FRAMEWORKS)) {
  describe(name, () => {
    let redis;
    before(() => {
      redis = new Redis({ port: server.port, host: "127.0.0.1" });
    });
    after(() => redis.disconnect());

    test("N allowed, then 429 with Retry-After and the rate limit headers; another key has its own", async () => {
      const app = await make({ client: redis, policy: POLICY, prefix: tag() });
      try {
        for (let i = 0; i < 5; i++) {
          const r = await get(app.url, "/", { "x-user": "alice" });
          assert.equal(r.status, 200);
          assert.equal(r.body.remaining, 4 - i);
          assert.equal(r.headers.get("ratelimit-limit"), "5");
          assert.equal(r.headers.get("ratelimit-remaining"), String(4 - i));
          assert.equal(r.headers.get("ratelimit-policy"), '"gcra";q=5;w=3600');
        }
        const refused = await get(app.url, "/", { "x-user": "alice" });
        assert.equal(refused.status, 429);
        assert.equal(refused.headers.get("ratelimit-remaining"), "0");
        assert.equal(refused.headers.get("retry-after"), "720"); // one emission interval: 1 h / 5
        assert.equal(refused.headers.get("ratelimit"), '"gcra";r=0;t=3600');
        assert.equal(refused.body.error, "too many requests");
        assert.ok(refused.body.retry_after_ms > 719_000 && refused.body.retry_after_ms <= 720_000);
        assert.equal((await get(app.url, "/", { "x-user": "bob" })).status, 200);
      } finally {
        await app.close();
      }
    });

    test("a policy per route: RL.MULTI on two keys, none on /health, RL.ALL with a body of one's own", async () => {
      const prefix = tag();
      const all = new All([new Gcra({ maxBurst: 9, count: 10, period: "1h", name: "user" }), new Fixed({ limit: 2, window: "1d", name: "account" })]);
      const app = await make({
        client: redis,
        policy: POLICY,
        prefix,
        routes: { "POST /login": new Multi({ limits: [["1m", 2]], names: ["user", "account"] }), "/health": null, "/report": all },
        message: (result, req) => ({ slow_down: true, rule: result.rule, key: result.key }),
        statusCode: 429,
      });
      try {
        const h = { "x-user": "carol", "x-account": "acme" };
        assert.equal((await get(app.url, "/login", h, "POST")).status, 200);
        const second = await get(app.url, "/login", h, "POST");
        assert.equal(second.headers.get("ratelimit-policy"), '"user-1m";q=2;w=60, "account-1m";q=2;w=60');
        const refused = await get(app.url, "/login", { ...h, "x-user": "dave" }, "POST"); // the account's counter
        assert.equal(refused.status, 429);
        assert.equal(refused.body.key, `${prefix}multi:acme`);
        for (let i = 0; i < 12; i++) {
          const r = await get(app.url, "/health", h);
          assert.equal(r.status, 200);
          assert.equal(r.headers.get("ratelimit-limit"), null);
        }
        assert.equal((await get(app.url, "/report", h)).status, 200);
        assert.equal((await get(app.url, "/report", { ...h, "x-user": "erin" })).status, 200);
        const daily = await get(app.url, "/report", h);
        assert.equal(daily.status, 429);
        assert.deepEqual(daily.body, { slow_down: true, rule: 2, key: `${prefix}all:acme` });
        assert.equal(daily.headers.get("ratelimit"), '"account";r=0;t=86400');
      } finally {
        await app.close();
      }
    });

    test("a lease is held while the request runs and released when it ends", async (t) => {
      const prefix = tag();
      try {
        await new RateLimiter(redis).lease(prefix + "probe", 1, "1s", { cost: 0 });
      } catch (err) {
        const why = notYet(err, "RL.LEASE is not in this module yet");
        if (why) return t.skip(why);
        throw err;
      }
      let open;
      let entered;
      let inside = new Promise((r) => (entered = r));
      const gate = () => {
        entered();
        return new Promise((r) => (open = r));
      };
      const app = await make({ client: redis, prefix, routes: { "/slow": new Lease({ limit: 1, ttl: "1m" }) } }, gate);
      try {
        const first = get(app.url, "/slow", { "x-user": "frank" });
        await inside;
        const busy = await get(app.url, "/slow", { "x-user": "frank" });
        assert.equal(busy.status, 429);
        assert.equal(busy.headers.get("ratelimit-limit"), "1");
        open();
        assert.equal((await first).status, 200);
        // The release runs when the response ends: wait for the slot to be free (bounded
        // by the count of polls, not by time).
        let freed = false;
        for (let i = 0; i < 200 && !freed; i++) {
          freed = (await redis.zcard(`${prefix}lease:frank`)) === 0;
          if (!freed) await new Promise((r) => setImmediate(r));
        }
        assert.ok(freed, "the lease was not released");
        // Open the gate once this request is inside (its own gate, not the first's).
        inside = new Promise((r) => (entered = r));
        const again = get(app.url, "/slow", { "x-user": "frank" });
        await inside;
        open();
        assert.equal((await again).status, 200);
      } finally {
        open?.();
        await app.close();
      }
    });

    test("fail open with a stopped server: the breaker opens, then requests skip the limiter until a probe succeeds", async () => {
      const own = await Server.start();
      const client = new Redis({ port: own.port, host: "127.0.0.1", retryStrategy: () => 20 });
      client.on("error", () => {});
      let clock = 1_000_000;
      const log = memoryLogger();
      const app = await make({
        client,
        policy: POLICY,
        prefix: tag(),
        timeoutMs: 500,
        breaker: { failures: 1, cooldownMs: 60_000, now: () => clock },
        logger: log,
      });
      const breaker = app.state.breaker;
      try {
        const ok = await get(app.url, "/", { "x-user": "gina" });
        assert.equal(ok.headers.get("ratelimit-remaining"), "4");
        await own.stop();
        const down = await get(app.url, "/", { "x-user": "gina" });
        assert.equal(down.status, 200); // served unlimited
        assert.equal(down.headers.get("ratelimit-limit"), null);
        assert.equal(breaker.state, "open");
        assert.deepEqual([breaker.stats.calls, breaker.stats.outages], [2, 1]);
        for (let i = 0; i < 5; i++) {
          const r = await get(app.url, "/", { "x-user": "gina" });
          assert.equal(r.status, 200);
          assert.equal(r.headers.get("ratelimit-limit"), null);
        }
        // While open, no request called the limiter (so none waited for it).
        assert.deepEqual([breaker.stats.calls, breaker.stats.skipped], [2, 5]);
        assert.equal(log.lines.warn.length, 1);
        clock += 60_000; // the cooldown is over: the next request probes; the server is still down
        assert.equal((await get(app.url, "/", { "x-user": "gina" })).status, 200);
        assert.deepEqual([breaker.state, breaker.stats.calls, breaker.stats.opened], ["open", 3, 2]);
        await own.restart(); // back on the same port
        for (let i = 0; i < 100; i++) {
          if ((await client.ping().catch(() => null)) === "PONG") break;
        }
        clock += 60_000;
        const back = await get(app.url, "/", { "x-user": "gina" });
        assert.equal(breaker.state, "closed");
        assert.equal(back.headers.get("ratelimit-limit"), "5");
      } finally {
        await app.close();
        client.disconnect();
        await own.remove();
      }
    });

    test("fail closed: 503 with Retry-After: 1 while the limiter cannot answer", async () => {
      const own = await Server.start();
      const client = await createClient({ url: own.url(), socket: { reconnectStrategy: false } }).on("error", () => {}).connect();
      const app = await make({ client, policy: POLICY, prefix: tag(), failOpen: false, timeoutMs: 500, logger: memoryLogger() });
      try {
        assert.equal((await get(app.url, "/")).status, 200);
        await own.stop();
        for (let i = 0; i < 3; i++) {
          const r = await get(app.url, "/");
          assert.equal(r.status, 503);
          assert.equal(r.headers.get("retry-after"), "1");
        }
        assert.equal(app.state.breaker.state, "open");
      } finally {
        await app.close();
        await client.close().catch(() => {});
        await own.remove();
      }
    });

    test("a server without the module: said loudly once, requests served", async () => {
      const client = new Redis({ port: bare.port, host: "127.0.0.1" });
      const log = memoryLogger();
      const app = await make({ client, policy: POLICY, breaker: false, logger: log });
      try {
        for (let i = 0; i < 4; i++) assert.equal((await get(app.url, "/")).status, 200);
        assert.equal(log.lines.error.length, 1);
        assert.match(log.lines.error[0], /no RL\.GCRA.*MODULE LOAD/s);
        assert.match(log.lines.error[0], /UNLIMITED/);
        assert.equal(log.lines.warn.length, 0);
      } finally {
        await app.close();
        client.disconnect();
      }
    });

    test('twins: "fallback" limits on a server without the module', async () => {
      const client = new Redis({ port: bare.port, host: "127.0.0.1" });
      const log = memoryLogger();
      const app = await make({ client, policy: POLICY, prefix: tag(), twins: "fallback", logger: log });
      try {
        for (let i = 0; i < 5; i++) assert.equal((await get(app.url, "/", { "x-user": "hal" })).status, 200);
        assert.equal((await get(app.url, "/", { "x-user": "hal" })).status, 429);
        assert.equal(log.lines.warn.length, 1);
      } finally {
        await app.close();
        client.disconnect();
      }
    });

    test("a bad policy is a bug, surfaced (500), not served unlimited", async () => {
      const app = await make({ client: redis, policy: new Fixed({ limit: 0, window: "1m" }), prefix: tag(), logger: memoryLogger() });
      try {
        const r = await get(app.url, "/");
        assert.equal(r.status, 500);
        assert.equal(app.state.breaker.state, "closed");
      } finally {
        await app.close();
      }
    });
  });
}
