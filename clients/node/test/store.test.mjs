// express-rate-limit with this package's store against the same app on rate-limit-redis's
// RedisStore: the app changes its `store:` only, and keeps its limit, window and headers.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import express from "express";
import { rateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { Redis } from "ioredis";
import { createClient, createCluster } from "redis";
import { RateLimitStore } from "redis-ratelimit/express-rate-limit";
import { Server, Cluster, tag, listen } from "./helpers.mjs";

let server;
let client; // node-redis
let io; // ioredis
before(async () => {
  server = await Server.start();
  client = await createClient({ url: server.url() }).connect();
  io = new Redis({ port: server.port, host: "127.0.0.1" });
});
after(async () => {
  await client?.close();
  io?.disconnect();
  await server?.remove();
});

/** An app as express-rate-limit's documentation writes one; only `store` changes. */
async function app(store, extra = {}) {
  const a = express();
  const limiter = rateLimit({
    windowMs: 15 * 60 * 1000,
    limit: 3,
    standardHeaders: "draft-8",
    legacyHeaders: true,
    keyGenerator: (req) => String(req.headers["x-user"] ?? "anonymous"),
    store,
    ...extra,
  });
  a.use(limiter);
  a.get("/", (req, res) => res.send("ok"));
  a.get("/fail", (req, res) => res.status(500).send("failed"));
  const http = createServer(a);
  const url = await listen(http);
  return { url, limiter, close: () => new Promise((r) => http.close(r)) };
}

async function hit(url, user, path = "/") {
  const r = await fetch(url + path, { headers: { "x-user": user } });
  await r.text();
  return {
    status: r.status,
    remaining: r.headers.get("x-ratelimit-remaining"),
    limit: r.headers.get("x-ratelimit-limit"),
    policy: r.headers.get("ratelimit-policy"),
    reset: Number(/t=(\d+)/.exec(r.headers.get("ratelimit") ?? "")?.[1]),
  };
}

describe("switched by store only", () => {
  test("the same statuses and headers as rate-limit-redis; a refused hit counts nowhere", async () => {
    const prefix = tag();
    const stores = {
      "rate-limit-redis": new RedisStore({ sendCommand: (...args) => client.sendCommand(args), prefix: prefix + "rlr:" }),
      "redis-ratelimit": new RateLimitStore({ sendCommand: (...args) => client.sendCommand(args), prefix: prefix + "ours:" }),
    };
    const seen = {};
    for (const [name, store] of Object.entries(stores)) {
      const a = await app(store);
      try {
        const got = [];
        for (let i = 0; i < 5; i++) got.push(await hit(a.url, "ivy"));
        seen[name] = got;
      } finally {
        await a.close();
      }
    }
    const shape = (rs) => rs.map((r) => [r.status, r.limit, r.remaining, r.policy]);
    assert.deepEqual(shape(seen["redis-ratelimit"]), shape(seen["rate-limit-redis"]));
    assert.deepEqual(shape(seen["redis-ratelimit"]).map((r) => r[0]), [200, 200, 200, 429, 429]);
    for (const r of seen["redis-ratelimit"]) assert.ok(r.reset > 0 && r.reset <= 900, `reset ${r.reset}`);
    assert.equal(await client.get(prefix + "rlr:ivy"), "5"); // INCR counts the refusals
    assert.equal(await client.get(prefix + "ours:ivy"), "3"); // RL.FIXED does not
  });

  test("ioredis's call as sendCommand, resetKey, get", async () => {
    const prefix = tag();
    const store = new RateLimitStore({ sendCommand: (command, ...args) => io.call(command, ...args), prefix });
    const a = await app(store);
    try {
      for (let i = 0; i < 3; i++) assert.equal((await hit(a.url, "jo")).status, 200);
      assert.equal((await hit(a.url, "jo")).status, 429);
      const info = await store.get("jo");
      assert.equal(info.totalHits, 3);
      assert.ok(info.resetTime instanceof Date);
      assert.equal(await store.get("nobody"), undefined);
      await a.limiter.resetKey("jo");
      assert.equal((await hit(a.url, "jo")).status, 200);
    } finally {
      await a.close();
    }
  });

  test("skipFailedRequests: a failed request is given back, a refused one was never counted", async () => {
    const prefix = tag();
    const store = new RateLimitStore({ sendCommand: (...args) => client.sendCommand(args), prefix });
    const a = await app(store, { skipFailedRequests: true });
    try {
      for (let i = 0; i < 4; i++) assert.equal((await hit(a.url, "kim", "/fail")).status, 500);
      // Each failure is given back once its response ends; wait until the count is back
      // to 0 (bounded by polls, not time).
      for (let i = 0; i < 200 && (await client.get(prefix + "kim")) !== null; i++) await new Promise((r) => setImmediate(r));
      assert.equal(await client.get(prefix + "kim"), null);
      for (let i = 0; i < 3; i++) assert.equal((await hit(a.url, "kim")).status, 200);
      for (let i = 0; i < 3; i++) assert.equal((await hit(a.url, "kim")).status, 429);
      for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
      assert.equal(await client.get(prefix + "kim"), "3");
    } finally {
      await a.close();
    }
  });

  for (const algorithm of ["sliding", "gcra"]) {
    test(`algorithm: "${algorithm}"`, async () => {
      const prefix = tag();
      const store = new RateLimitStore({ sendCommand: (...args) => client.sendCommand(args), prefix, algorithm });
      const a = await app(store);
      try {
        const got = [];
        for (let i = 0; i < 4; i++) got.push(await hit(a.url, "lee"));
        assert.deepEqual(got.map((r) => [r.status, r.remaining]), [[200, "2"], [200, "1"], [200, "0"], [429, "0"]]);
      } finally {
        await a.close();
      }
    });
  }

  test("require() gives the same store", () => {
    const require = createRequire(import.meta.url);
    const cjs = require("redis-ratelimit/express-rate-limit");
    const s = new cjs.RateLimitStore({ sendCommand: async () => null });
    assert.equal(s.prefix, "rl:");
    assert.equal(typeof cjs.default, "function");
  });
});

test("a node-redis Cluster through sendCommandCluster, as rate-limit-redis takes it", async () => {
  const cluster = await Cluster.start();
  const c = await createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${cluster.port}` }] }).connect();
  try {
    const store = new RateLimitStore({
      sendCommandCluster: ({ key, isReadOnly, command }) => c.sendCommand(key, isReadOnly, command),
      prefix: tag(),
    });
    const a = await app(store);
    try {
      const got = [];
      for (let i = 0; i < 4; i++) got.push((await hit(a.url, "max")).status);
      assert.deepEqual(got, [200, 200, 200, 429]);
    } finally {
      await a.close();
    }
  } finally {
    await c.close();
    await cluster.remove();
  }
});
