// express-rate-limit with this package's store against the same app on rate-limit-redis's
// RedisStore: the app changes its `store:` only, and keeps its limit, window and headers;
// a limit that is a function of the request on every client version; a server without
// the module (ModuleMissingError, the twins); a stalled server (the timeout and the
// breaker); shadow mode.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import express from "express";
import { rateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { Redis } from "ioredis";
import { Redis as Redis5 } from "ioredis5";
import { Redis as Redis6 } from "ioredis6";
import { createClient, createCluster } from "redis";
import { createClient as createClient5 } from "redis5";
import { createClient as createClient6 } from "redis6";
import { CircuitBreaker } from "redis-native-ratelimit";
import { RateLimitStore, ANY_LIMIT } from "redis-native-ratelimit/express-rate-limit";
import { Server, Cluster, tag, listen, memoryLogger, stallableServer } from "./helpers.mjs";

let server;
let bare; // a server without the module
let client; // node-redis
let io; // ioredis
before(async () => {
  server = await Server.start();
  bare = await Server.start({ module: false });
  client = await createClient({ url: server.url() }).connect();
  io = new Redis({ port: server.port, host: "127.0.0.1" });
});
after(async () => {
  await client?.close();
  io?.disconnect();
  await server?.remove();
  await bare?.remove();
});

// The timeout of calls that must be answered: far above any stall of a loaded machine
// (with the default 250 ms, a slow answer is served unlimited and the count is off).
const PATIENT = 30_000;

/** Our store, waiting for its answers. */
function patientStore(options) {
  return new RateLimitStore({ timeoutMs: PATIENT, ...options });
}

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
    retryAfter: r.headers.get("retry-after"),
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
      "redis-native-ratelimit": patientStore({ sendCommand: (...args) => client.sendCommand(args), prefix: prefix + "ours:" }),
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
    assert.deepEqual(shape(seen["redis-native-ratelimit"]), shape(seen["rate-limit-redis"]));
    assert.deepEqual(shape(seen["redis-native-ratelimit"]).map((r) => r[0]), [200, 200, 200, 429, 429]);
    for (const r of seen["redis-native-ratelimit"]) assert.ok(r.reset > 0 && r.reset <= 900, `reset ${r.reset}`);
    assert.equal(await client.get(prefix + "rlr:ivy"), "5"); // INCR counts the refusals
    assert.equal(await client.get(prefix + "ours:ivy"), "3"); // RL.FIXED does not
  });

  test("ioredis's call as sendCommand, resetKey, get", async () => {
    const prefix = tag();
    const store = patientStore({ sendCommand: (command, ...args) => io.call(command, ...args), prefix });
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
    const store = patientStore({ sendCommand: (...args) => client.sendCommand(args), prefix });
    const a = await app(store, { skipFailedRequests: true });
    try {
      for (let i = 0; i < 4; i++) assert.equal((await hit(a.url, "kim", "/fail")).status, 500);
      // Each failure is given back once its response ends; wait until the count is back
      // to 0 (bounded by polls, not time).
      for (let i = 0; i < 200 && (await client.get(prefix + "kim")) !== null; i++) await new Promise((r) => setImmediate(r));
      assert.equal(await client.get(prefix + "kim"), null);
      for (let i = 0; i < 3; i++) assert.equal((await hit(a.url, "kim")).status, 200);
      for (let i = 0; i < 3; i++) assert.equal((await hit(a.url, "kim")).status, 429);
      // A refusal's decrement runs once its response has finished: before the app serves
      // the next request (another client's, which leaves kim's count alone).
      assert.equal((await hit(a.url, "lou")).status, 200);
      assert.equal(await client.get(prefix + "kim"), "3");
    } finally {
      await a.close();
    }
  });

  for (const algorithm of ["sliding", "gcra"]) {
    test(`algorithm: "${algorithm}"`, async () => {
      const prefix = tag();
      const store = patientStore({ sendCommand: (...args) => client.sendCommand(args), prefix, algorithm });
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
    const cjs = require("redis-native-ratelimit/express-rate-limit");
    const s = new cjs.RateLimitStore({ sendCommand: async () => null });
    assert.equal(s.prefix, "rl:");
    assert.equal(typeof cjs.default, "function");
  });
});

test("a node-redis Cluster through sendCommandCluster, as rate-limit-redis takes it", async () => {
  const cluster = await Cluster.start();
  const c = await createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${cluster.port}` }] }).connect();
  try {
    const store = patientStore({
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

/** rate-limit-redis's sendCommand on each client version: ioredis 5 and 6, node-redis 5
 * and 6 (RESP2 and RESP3). Some read 2^53 - 1 back as 2^53. */
const CLIENTS = {
  "ioredis 5": async (port) => {
    const c = new Redis5({ port, host: "127.0.0.1" });
    return { sendCommand: (command, ...args) => c.call(command, ...args), close: () => c.disconnect() };
  },
  "ioredis 6": async (port) => {
    const c = new Redis6({ port, host: "127.0.0.1" });
    return { sendCommand: (command, ...args) => c.call(command, ...args), close: () => c.disconnect() };
  },
  "node-redis 5": async (port) => {
    const c = await createClient5({ url: `redis://127.0.0.1:${port}` }).connect();
    return { sendCommand: (...args) => c.sendCommand(args), close: () => c.close() };
  },
  "node-redis 6": async (port) => {
    const c = await createClient6({ url: `redis://127.0.0.1:${port}` }).connect();
    return { sendCommand: (...args) => c.sendCommand(args), close: () => c.close() };
  },
  "node-redis 6 RESP3": async (port) => {
    const c = await createClient6({ url: `redis://127.0.0.1:${port}`, RESP: 3 }).connect();
    return { sendCommand: (...args) => c.sendCommand(args), close: () => c.close() };
  },
};

describe("a limit that is a function of the request, as rate-limit-redis counts it", () => {
  for (const [name, connect] of Object.entries(CLIENTS)) {
    for (const algorithm of ["fixed", "sliding", "gcra"]) {
      test(`${name}, algorithm "${algorithm}": 200, 200, 429 with limit: () => 2`, async () => {
        const c = await connect(server.port);
        const log = memoryLogger();
        const store = patientStore({ sendCommand: c.sendCommand, prefix: tag(), algorithm, logger: log });
        const a = await app(store, { limit: () => 2 });
        try {
          const got = [];
          for (let i = 0; i < 4; i++) got.push(await hit(a.url, "fn"));
          assert.deepEqual(got.map((r) => [r.status, r.remaining]), [[200, "1"], [200, "0"], [429, "0"], [429, "0"]]);
          assert.equal(store.limit, ANY_LIMIT);
          // GCRA needs the rate, which a function hides: said once, counted in a sliding window.
          assert.equal(log.lines.warn.length, algorithm === "gcra" ? 1 : 0);
        } finally {
          await a.close();
          await c.close();
        }
      });
    }
  }
});

describe("a server without the module", () => {
  test("ModuleMissingError said once, loudly; requests served (fail open), never a 500", async () => {
    const c = new Redis({ port: bare.port, host: "127.0.0.1" });
    const log = memoryLogger();
    const store = patientStore({ sendCommand: (command, ...args) => c.call(command, ...args), prefix: tag(), logger: log, breaker: false });
    const a = await app(store);
    try {
      for (let i = 0; i < 5; i++) assert.equal((await hit(a.url, "nomod")).status, 200);
      assert.equal(log.lines.error.length, 1);
      assert.match(log.lines.error[0], /no RL\.FIXED.*MODULE LOAD.*twins/s);
      assert.equal(log.lines.warn.length, 0);
    } finally {
      await a.close();
      c.disconnect();
    }
  });

  for (const twins of [true, "fallback"]) {
    test(`twins: ${JSON.stringify(twins)} limits with the Lua twins`, async () => {
      const c = await createClient({ url: bare.url() }).connect();
      const log = memoryLogger();
      const prefix = tag();
      const store = patientStore({ sendCommand: (...args) => c.sendCommand(args), prefix, twins, logger: log });
      const a = await app(store);
      try {
        const got = [];
        for (let i = 0; i < 5; i++) got.push((await hit(a.url, "twin")).status);
        assert.deepEqual(got, [200, 200, 200, 429, 429]);
        assert.equal(await c.get(prefix + "twin"), "3"); // RL.FIXED's state, written by its twin
        assert.equal(log.lines.warn.length, twins === "fallback" ? 1 : 0);
        assert.equal(log.lines.error.length, 0);
      } finally {
        await a.close();
        await c.close();
      }
    });
  }
});

describe("a stalled server: the timeout and the circuit breaker", () => {
  for (const failOpen of [true, false]) {
    test(`each hit waits at most timeoutMs, then the breaker spares the next ones (failOpen: ${failOpen})`, async () => {
      const own = await stallableServer();
      let clock = 1_000_000;
      const log = memoryLogger();
      // Two apps on one key and one breaker: the stalled hit goes through a store with the
      // default timeout, which only ends it; the hits that must be answered through one
      // with a patient timeout.
      const options = {
        sendCommand: (command, ...args) => own.client.call(command, ...args),
        prefix: tag(),
        failOpen,
        logger: log,
        breaker: new CircuitBreaker({ now: () => clock }),
      };
      const a = await app(new RateLimitStore(options));
      const b = await app(patientStore(options));
      const breaker = options.breaker;
      const degraded = failOpen ? 200 : 503;
      try {
        assert.equal((await hit(b.url, "pat")).status, 200);
        await own.stall();
        const stalled = await hit(a.url, "pat"); // times out after 250 ms: nothing else can end it
        assert.equal(stalled.status, degraded);
        if (!failOpen) assert.equal(stalled.retryAfter, "1");
        assert.equal(breaker.state, "open");
        for (let i = 0; i < 3; i++) {
          for (const s of [a, b]) assert.equal((await hit(s.url, "pat")).status, degraded);
        }
        // While open, no hit called the server (none waited for it).
        assert.deepEqual([breaker.stats.calls, breaker.stats.outages, breaker.stats.skipped], [2, 1, 6]);
        assert.equal(log.lines.warn.length, 1);
        await own.resume();
        clock += 1000; // the default cooldown is over: the next hit probes, and closes it
        const probe = await hit(b.url, "pat");
        // Counted: the first hit, the stalled one (on its way when the pause ended), the probe.
        assert.deepEqual([probe.status, probe.remaining], [200, "0"]);
        assert.equal(breaker.state, "closed");
      } finally {
        await a.close();
        await b.close();
        await own.remove();
      }
    });
  }
});

test("shadow: would-be refusals pass, counted and said once per key and window; refusals count nowhere", async () => {
  const prefix = tag();
  const log = memoryLogger();
  const store = patientStore({ client: io, prefix, shadow: true, logger: log });
  const a = await app(store);
  try {
    const got = [];
    for (let i = 0; i < 5; i++) got.push(await hit(a.url, "sha"));
    assert.deepEqual(got.map((r) => [r.status, r.remaining]), [[200, "2"], [200, "1"], [200, "0"], [200, "0"], [200, "0"]]);
    assert.equal(store.stats.shadowDenials, 2);
    assert.equal(log.lines.warn.length, 1);
    assert.match(log.lines.warn[0], /shadow mode: the express-rate-limit store would refuse .*sha/);
    assert.equal(await io.get(prefix + "sha"), "3");
  } finally {
    await a.close();
  }
});

test("the client option: an ioredis or node-redis client itself", async () => {
  for (const c of [io, client]) {
    const prefix = tag();
    const a = await app(patientStore({ client: c, prefix }));
    try {
      const got = [];
      for (let i = 0; i < 4; i++) got.push((await hit(a.url, "cli")).status);
      assert.deepEqual(got, [200, 200, 200, 429]);
    } finally {
      await a.close();
    }
  }
});
