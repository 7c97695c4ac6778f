// The Express middleware and the Fastify plugin in real apps served over HTTP on
// loopback, against real servers: N allowed then 429 with the headers, a policy and a key
// per route (RL.MULTI, RL.ALL, a lease held while the request runs), a body of one's own,
// fail open behind a circuit breaker when the server is stopped, fail closed, the missing
// module said once, and bugs surfaced rather than served; skip, handler, the header
// drafts, IPv6 networks, RL.ALL keys per rule, the ban option, a lease's Retry-After,
// shadow mode, and no lease slot left behind by a stall.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import express from "express";
import Fastify from "fastify";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { All, Ban, Fixed, Gcra, Lease, Multi, RateLimiter } from "redis-native-ratelimit";
import { rateLimit } from "redis-native-ratelimit/express";
import { fastifyRateLimit } from "redis-native-ratelimit/fastify";
import { Server, tag, notYet, memoryLogger, listen, stallableServer } from "./helpers.mjs";

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
    app.set("trust proxy", true); // X-Forwarded-For names the client (the IPv6 tests)
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
    const app = Fastify({ trustProxy: true });
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

/** A handler of a refusal in each framework's terms: 418 with a body of its own. */
const HANDLERS = {
  express: (req, res, next, result) => res.status(418).json({ teapot: true, remaining: result.remaining }),
  fastify: (request, reply, result) => reply.code(418).send({ teapot: true, remaining: result.remaining }),
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
        assert.deepEqual(daily.body, { slow_down: true, rule: 2, key: `${prefix}all:fixed2:acme` });
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
        // The policy's retryAfter (1 s by default), not the oldest lease's ttl (1 min).
        assert.equal(busy.headers.get("retry-after"), "1");
        assert.equal(busy.body.retry_after_ms, 1000);
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
      // Reconnecting every 20 ms: a call to the stopped server fails once ioredis gave up
      // on its reconnections (maxRetriesPerRequest), with the patient timeout unspent.
      const client = new Redis({ port: own.port, host: "127.0.0.1", retryStrategy: () => 20 });
      client.on("error", () => {});
      let clock = 1_000_000;
      const log = memoryLogger();
      const app = await make({
        client,
        policy: POLICY,
        prefix: tag(),
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
      // Without reconnections, a call once the server stopped fails at once.
      const client = await createClient({ url: own.url(), socket: { reconnectStrategy: false } }).on("error", () => {}).connect();
      const app = await make({ client, policy: POLICY, prefix: tag(), failOpen: false, logger: memoryLogger() });
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

    test("skip: a request it says true to is not limited, nor counted", async () => {
      const prefix = tag();
      const app = await make({ client: redis, prefix, policy: new Fixed({ limit: 1, window: "1h" }), skip: (req) => req.headers["x-skip"] === "yes" });
      try {
        for (let i = 0; i < 3; i++) {
          const r = await get(app.url, "/", { "x-user": "sam", "x-skip": "yes" });
          assert.equal(r.status, 200);
          assert.equal(r.headers.get("ratelimit-limit"), null);
        }
        assert.equal(await redis.exists(`${prefix}fixed:sam`), 0);
        assert.deepEqual([(await get(app.url, "/", { "x-user": "sam" })).status, (await get(app.url, "/", { "x-user": "sam" })).status], [200, 429]);
      } finally {
        await app.close();
      }
    });

    test("handler answers a refusal instead of the 429, after the headers are set", async () => {
      const app = await make({ client: redis, prefix: tag(), policy: new Fixed({ limit: 1, window: "1h" }), handler: HANDLERS[name] });
      try {
        assert.equal((await get(app.url, "/", { "x-user": "tea" })).status, 200);
        const r = await get(app.url, "/", { "x-user": "tea" });
        assert.deepEqual([r.status, r.body], [418, { teapot: true, remaining: 0 }]);
        assert.equal(r.headers.get("ratelimit-remaining"), "0");
        assert.ok(Number(r.headers.get("retry-after")) > 3500, r.headers.get("retry-after"));
        assert.equal(app.state.stats.limited, 1);
      } finally {
        await app.close();
      }
    });

    test("standardHeaders picks the draft, legacyHeaders adds X-RateLimit-*, false sends none", async () => {
      const policy = new Fixed({ limit: 5, window: "1h", name: "api" });
      const seven = await make({ client: redis, prefix: tag(), policy, standardHeaders: "draft-7", legacyHeaders: true });
      try {
        const r = await get(seven.url, "/", { "x-user": "uma" });
        assert.equal(r.headers.get("ratelimit"), "limit=5, remaining=4, reset=3600");
        assert.equal(r.headers.get("ratelimit-policy"), "5;w=3600");
        assert.equal(r.headers.get("ratelimit-limit"), null);
        assert.deepEqual(
          ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"].map((h) => r.headers.get(h)),
          ["5", "4", "3600"],
        );
      } finally {
        await seven.close();
      }
      const none = await make({ client: redis, prefix: tag(), policy: new Fixed({ limit: 1, window: "1h" }), standardHeaders: false });
      try {
        const ok = await get(none.url, "/", { "x-user": "uma" });
        const refused = await get(none.url, "/", { "x-user": "uma" });
        assert.deepEqual([ok.status, refused.status], [200, 429]);
        for (const r of [ok, refused]) {
          assert.deepEqual([...r.headers.keys()].filter((h) => h.includes("ratelimit")), []);
        }
        assert.equal(refused.headers.get("retry-after"), "3600");
      } finally {
        await none.close();
      }
      await assert.rejects(async () => make({ client: redis, policy, standardHeaders: "draft-9" }), /standardHeaders/);
    });

    test("the default key groups IPv6 clients by their /56 network (ipv6Subnet), as express-rate-limit 8", async () => {
      const policy = new Fixed({ limit: 2, window: "1h" });
      const from = (ip) => get(app.url, "/", { "x-forwarded-for": ip });
      let app = await make({ client: redis, prefix: tag(), policy, key: undefined });
      try {
        assert.equal((await from("2001:db8:1:100::1")).status, 200);
        assert.equal((await from("2001:db8:1:1ff::2")).status, 200); // the same /56
        assert.equal((await from("2001:db8:1:1ab::3")).status, 429);
        assert.equal((await from("2001:db8:1:200::1")).status, 200); // the next /56
        assert.equal((await from("10.0.0.1")).status, 200);
      } finally {
        await app.close();
      }
      app = await make({ client: redis, prefix: tag(), policy, key: undefined, ipv6Subnet: false });
      try {
        for (const ip of ["2001:db8:1:100::1", "2001:db8:1:100::1", "2001:db8:1:100::2", "2001:db8:1:100::2"]) {
          assert.equal((await from(ip)).status, 200);
        }
      } finally {
        await app.close();
      }
    });

    test("an All policy: each rule's key names its rule, so one identifier takes a rate and a slot", async () => {
      const prefix = tag();
      let open;
      let entered;
      const inside = new Promise((r) => (entered = r));
      const gate = () => {
        entered();
        return new Promise((r) => (open = r));
      };
      const both = new All([new Gcra({ maxBurst: 9, count: 10, period: "1h", name: "rate" }), new Lease({ limit: 1, ttl: "1m", name: "slot" })]);
      const app = await make({ client: redis, prefix, routes: { "/slow": both }, key: (req) => [req.headers["x-user"], req.headers["x-user"]] }, gate);
      try {
        const first = get(app.url, "/slow", { "x-user": "vic" });
        await inside;
        assert.equal(await redis.zcard(`${prefix}all:lease2:vic`), 1);
        assert.equal(await redis.exists(`${prefix}all:gcra1:vic`), 1);
        const busy = await get(app.url, "/slow", { "x-user": "vic" });
        assert.deepEqual([busy.status, busy.headers.get("retry-after")], [429, "1"]);
        open();
        assert.equal((await first).status, 200);
        await app.state.core.settled();
        assert.equal(await redis.zcard(`${prefix}all:lease2:vic`), 0);
      } finally {
        open?.();
        await app.close();
      }
    });

    test("a key that does not fit its policy is an error that says why, at start-up or on first use", async () => {
      const two = new All([new Gcra({ maxBurst: 9, count: 10, period: "1h" }), new Fixed({ limit: 5, window: "1d" })]);
      await assert.rejects(async () => make({ client: redis, policy: two, key: undefined }), /All policy "all" has 2 rules.*default key/);
      await assert.rejects(async () => make({ client: redis, policy: new Ban({ strikes: 1, window: "1m", duration: "1h" }) }), /Ban is a rule of All/);
      const app = await make({ client: redis, prefix: tag(), policy: two, key: (req) => req.headers["x-user"], logger: memoryLogger() });
      try {
        const r = await get(app.url, "/", { "x-user": "walt" });
        assert.equal(r.status, 500);
        assert.match(JSON.stringify(r.body), /one identifier for the All policy \\"all\\" of 2 rules: return a list of 2/);
        assert.doesNotMatch(JSON.stringify(r.body), /ERR /);
      } finally {
        await app.close();
      }
      const single = await make({ client: redis, prefix: tag(), policy: POLICY, key: () => ["a", "b"], logger: memoryLogger() });
      try {
        const r = await get(single.url, "/");
        assert.equal(r.status, 500);
        assert.match(JSON.stringify(r.body), /a list of 2 for the gcra policy/);
      } finally {
        await single.close();
      }
    });

    test("ban: a caller refused `strikes` times is refused everywhere for the ban's duration", async () => {
      const prefix = tag();
      const app = await make({
        client: redis,
        prefix,
        routes: { "/report": new Fixed({ limit: 100, window: "1h", name: "loose" }) },
        policy: new Fixed({ limit: 1, window: "1h", name: "tight" }),
        key: (req) => req.headers["x-user"],
        ban: new Ban({ strikes: 2, window: "1h", duration: "1h" }),
      });
      try {
        assert.equal((await get(app.url, "/report", { "x-user": "xena" })).status, 200);
        assert.equal((await get(app.url, "/", { "x-user": "xena" })).status, 200);
        assert.equal((await get(app.url, "/", { "x-user": "xena" })).status, 429); // strike 1
        const banned = await get(app.url, "/", { "x-user": "xena" }); // strike 2: banned
        assert.equal(banned.status, 429);
        assert.equal(banned.headers.get("retry-after"), "3600");
        assert.equal(await redis.exists(`${prefix}ban:xena`), 1);
        // The loose route would allow her: the ban refuses her there too.
        assert.equal((await get(app.url, "/report", { "x-user": "xena" })).status, 429);
        assert.equal((await get(app.url, "/report", { "x-user": "yuri" })).status, 200);
        await assert.rejects(async () => make({ client: redis, ban: { strikes: 1 } }), /ban takes a Ban/);
      } finally {
        await app.close();
      }
    });

    test("shadow: would-be refusals pass with the headers as computed, counted, said once per key and window", async () => {
      const prefix = tag();
      const log = memoryLogger();
      const app = await make({ client: redis, prefix, policy: new Fixed({ limit: 2, window: "1h", name: "trial" }), shadow: true, logger: log });
      try {
        const got = [];
        for (let i = 0; i < 5; i++) got.push(await get(app.url, "/", { "x-user": "zoe" }));
        assert.deepEqual(got.map((r) => r.status), [200, 200, 200, 200, 200]);
        assert.deepEqual(got.map((r) => r.headers.get("ratelimit-remaining")), ["1", "0", "0", "0", "0"]);
        assert.ok(got.every((r) => r.headers.get("retry-after") === null));
        assert.equal(await redis.get(`${prefix}trial:zoe`), "2"); // counted as usual: refusals count nowhere
        assert.equal(app.state.stats.shadowDenials, 3);
        assert.equal(log.lines.warn.length, 1);
        assert.match(log.lines.warn[0], /shadow mode: policy "trial" would refuse .*trial:zoe/);
        for (let i = 0; i < 3; i++) await get(app.url, "/", { "x-user": "amy" });
        assert.equal(app.state.stats.shadowDenials, 4);
        assert.equal(log.lines.warn.length, 2);
      } finally {
        await app.close();
      }
    });

    test("lease slots do not leak after a stall: requests that failed open release what their late RL.LEASE took", async () => {
      const own = await stallableServer();
      const prefix = tag();
      const lease = { client: own.client, prefix, policy: new Lease({ limit: 2, ttl: "30s" }), key: () => "one", logger: memoryLogger() };
      // The stalled requests go through an app with the default timeout, which only ends
      // them; the one after, which must be answered, through an app with a patient one.
      const app = await make({ ...lease, timeoutMs: 250 });
      const patient = await make(lease);
      try {
        // Every write waits until resume(): the two requests can only end by their timeout.
        await own.stall();
        const stalled = await Promise.all([get(app.url, "/"), get(app.url, "/")]);
        assert.deepEqual(stalled.map((r) => [r.status, r.headers.get("ratelimit-limit")]), [[200, null], [200, null]]);
        await own.resume(); // the queued RL.LEASE calls run, and answer late
        await app.state.core.settled?.();
        assert.deepEqual(await own.admin.zrange(`${prefix}lease:one`, 0, -1), []);
        const next = await get(patient.url, "/"); // both slots free
        assert.deepEqual([next.status, next.headers.get("ratelimit-limit"), next.headers.get("ratelimit-remaining")], [200, "2", "1"]);
      } finally {
        await app.close();
        await patient.close();
        await own.remove();
      }
    });
  });
}
