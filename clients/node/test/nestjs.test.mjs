// The @nestjs/throttler storage in a real Nest app (Express platform) served over HTTP on
// loopback: the throttler's limit counted by the module, 429 with Retry-After, a block
// duration, a refused hit counted nowhere, fail open and fail closed, and the Lua twins
// on a server without the module.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { RateLimitThrottlerStorage } from "redis-native-ratelimit/nestjs";
import { Server, tag, memoryLogger } from "./helpers.mjs";

// The timeout of calls that must be answered: far above any stall of a loaded machine
// (with the default 250 ms, a slow answer is served unlimited and the count is off).
const PATIENT = 30_000;

/** Our storage, waiting for its answers. */
function patientStorage(client, options = {}) {
  return new RateLimitThrottlerStorage(client, { timeoutMs: PATIENT, ...options });
}

// Nest is CommonJS, and its decorators are applied by hand here (plain JavaScript).
const require = createRequire(import.meta.url);
require("reflect-metadata");
const { Controller, Get, Module } = require("@nestjs/common");
const { APP_GUARD, NestFactory } = require("@nestjs/core");
const { Throttle, ThrottlerGuard, ThrottlerModule } = require("@nestjs/throttler");

class HelloController {
  hello() {
    return { hello: "world" };
  }
  strict() {
    return { strict: true };
  }
}
Controller()(HelloController);
for (const [method, path] of [["hello", "/"], ["strict", "/strict"]]) {
  Get(path)(HelloController.prototype, method, Object.getOwnPropertyDescriptor(HelloController.prototype, method));
}
// One a minute, and a refusal blocks the caller for 5 minutes.
Throttle({ default: { limit: 1, ttl: 60_000, blockDuration: 300_000 } })(
  HelloController.prototype,
  "strict",
  Object.getOwnPropertyDescriptor(HelloController.prototype, "strict"),
);

/** A Nest app with the throttler guard on every route (3 a minute), on `storage`. */
async function nestApp(storage) {
  class AppModule {}
  Module({
    imports: [ThrottlerModule.forRoot({ throttlers: [{ ttl: 60_000, limit: 3 }], storage })],
    controllers: [HelloController],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })(AppModule);
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, "127.0.0.1");
  const url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  return { url, close: () => app.close() };
}

async function get(url, path = "/") {
  const r = await fetch(url + path);
  return { status: r.status, remaining: r.headers.get("x-ratelimit-remaining"), retryAfter: r.headers.get("retry-after"), body: await r.json() };
}

let server;
let bare;
let redis;
before(async () => {
  server = await Server.start();
  bare = await Server.start({ module: false });
  redis = new Redis({ port: server.port, host: "127.0.0.1" });
});
after(async () => {
  redis?.disconnect();
  await server?.remove();
  await bare?.remove();
});

/** The tracker's hit counter: the one key under the prefix without `:block`. */
async function counter(prefix) {
  const keys = (await redis.keys(`${prefix}*`)).filter((k) => !k.endsWith(":block"));
  assert.equal(keys.length, 1, keys.join(","));
  return redis.get(keys[0]);
}

describe("a Nest app with the throttler on the module's commands", () => {
  test("the throttler's limit, then 429 with Retry-After; a refused hit counts nowhere", async () => {
    const prefix = `${tag()}:`;
    const app = await nestApp(patientStorage(redis, { prefix }));
    try {
      const got = [];
      for (let i = 0; i < 5; i++) got.push(await get(app.url));
      assert.deepEqual(got.map((r) => [r.status, r.remaining]), [[200, "2"], [200, "1"], [200, "0"], [429, null], [429, null]]);
      assert.equal(got[3].retryAfter, "60"); // the block duration: the throttler's ttl by default
      assert.equal(got[3].body.statusCode, 429);
      assert.equal(await counter(prefix), "3");
    } finally {
      await app.close();
    }
  });

  test("blockDuration: the first refusal blocks the caller for it", async () => {
    const prefix = `${tag()}:`;
    const nr = await createClient({ url: server.url() }).connect();
    const app = await nestApp(patientStorage(nr, { prefix }));
    try {
      const got = [];
      for (let i = 0; i < 3; i++) got.push(await get(app.url, "/strict"));
      assert.deepEqual(got.map((r) => r.status), [200, 429, 429]);
      assert.deepEqual([got[1].retryAfter, got[2].retryAfter], ["300", "300"]);
      assert.equal(await counter(prefix), "1");
    } finally {
      await app.close();
      await nr.close();
    }
  });

  test("algorithm: gcra and sliding count the same limit", async () => {
    for (const algorithm of ["gcra", "sliding"]) {
      const app = await nestApp(patientStorage(redis, { prefix: `${tag()}:`, algorithm }));
      try {
        const got = [];
        for (let i = 0; i < 4; i++) got.push((await get(app.url)).status);
        assert.deepEqual(got, [200, 200, 200, 429], algorithm);
      } finally {
        await app.close();
      }
    }
  });
});

describe("when the limiter cannot answer", () => {
  test("a stopped server: requests served (fail open), said once, then the breaker skips the calls", async () => {
    const own = await Server.start();
    // Reconnecting every 20 ms: a call to the stopped server fails once ioredis gave up on
    // its reconnections (maxRetriesPerRequest), with the patient timeout unspent.
    const client = new Redis({ port: own.port, host: "127.0.0.1", retryStrategy: () => 20 });
    client.on("error", () => {});
    const log = memoryLogger();
    let clock = 1_000_000;
    const storage = patientStorage(client, { prefix: `${tag()}:`, logger: log, breaker: { now: () => clock } });
    const app = await nestApp(storage);
    try {
      assert.equal((await get(app.url)).status, 200);
      await own.stop();
      for (let i = 0; i < 4; i++) assert.equal((await get(app.url)).status, 200);
      assert.equal(storage.guard.breaker.state, "open");
      assert.deepEqual([storage.guard.breaker.stats.outages, storage.guard.breaker.stats.skipped], [1, 3]);
      assert.equal(log.lines.warn.length, 1);
    } finally {
      await app.close();
      client.disconnect();
      await own.remove();
    }
  });

  test("failOpen: false: 503", async () => {
    const own = await Server.start();
    const client = new Redis({ port: own.port, host: "127.0.0.1", retryStrategy: () => 20 });
    client.on("error", () => {});
    const app = await nestApp(patientStorage(client, { prefix: `${tag()}:`, failOpen: false, logger: memoryLogger() }));
    try {
      assert.equal((await get(app.url)).status, 200);
      await own.stop();
      const r = await get(app.url);
      assert.deepEqual([r.status, r.body.message], [503, "rate limiter unavailable"]);
    } finally {
      await app.close();
      client.disconnect();
      await own.remove();
    }
  });

  test("a server without the module: said once; twins: true limits with the Lua twins", async () => {
    const client = new Redis({ port: bare.port, host: "127.0.0.1" });
    const log = memoryLogger();
    const missing = await nestApp(patientStorage(client, { prefix: `${tag()}:`, logger: log, breaker: false }));
    try {
      for (let i = 0; i < 4; i++) assert.equal((await get(missing.url)).status, 200);
      assert.equal(log.lines.error.length, 1);
      assert.match(log.lines.error[0], /no RL\.ALL.*MODULE LOAD/s);
    } finally {
      await missing.close();
    }
    const twins = await nestApp(patientStorage(client, { prefix: `${tag()}:`, twins: true }));
    try {
      const got = [];
      for (let i = 0; i < 4; i++) got.push((await get(twins.url)).status);
      assert.deepEqual(got, [200, 200, 200, 429]);
    } finally {
      await twins.close();
      client.disconnect();
    }
  });
});
