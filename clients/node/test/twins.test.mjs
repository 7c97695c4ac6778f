// The Lua twins behind the same calls: on a server without the module they give the
// command's results; the Functions library first, scripts where FUNCTION is not allowed;
// "fallback" switches once, and says so; without twins the missing module is an error
// that says what to do.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Redis, Cluster as IoCluster } from "ioredis";
import { createClient, createCluster } from "redis";
import { RateLimiter, ModuleMissingError, Gcra, Fixed, Sliding, luaSources } from "redis-native-ratelimit";
import { Server, Cluster, tag, memoryLogger } from "./helpers.mjs";

const T = 1_900_000_000_000;
let native, bare, noFunctions;
before(async () => {
  native = await Server.start();
  bare = await Server.start({ module: false });
  noFunctions = await Server.start({ module: false, extra: ['rename-command FUNCTION ""', 'rename-command FCALL ""'] });
});
after(async () => {
  for (const s of [native, bare, noFunctions]) await s?.remove();
});

/** The same sequence of calls, each result with the fields the reply has. */
async function workload(rl, t) {
  const out = [];
  for (let i = 0; i < 4; i++) out.push(await rl.fixed(t + "f", 3, "10s", { at: T + i }));
  for (let i = 0; i < 4; i++) out.push(await rl.gcra(t + "g", 1, 2, "1s", { at: T + i * 100 }));
  out.push(await rl.gcra(t + "d", 0, 1, "1s", { at: T, delay: "3s" }));
  out.push(await rl.gcra(t + "d", 0, 1, "1s", { at: T, delay: "3s" }));
  for (let i = 0; i < 3; i++) out.push(await rl.multi([t + "a", t + "b"], [["1m", 2], ["1h", 9]], { at: T + i }));
  for (let i = 0; i < 3; i++) out.push(await rl.sliding(t + "s", [["10s", 2]], { at: T + i * 1000 }));
  for (let i = 0; i < 3; i++) out.push(await rl.log(t + "l", 2, "1m", { at: T + i, meta: "u" + i }));
  for (let i = 0; i < 3; i++) {
    out.push(await rl.all([[t + "x", new Gcra({ maxBurst: 1, count: 1, period: "1m" })], [t + "y", new Fixed({ limit: 9, window: "1d" })], [t + "z", new Sliding({ limits: [["1m", 9]] })]], { at: T + i }));
  }
  out.push(await rl.bulkexpire("60s", [t + "none"]));
  return out;
}

test("twins: true on a server without the module gives the module's results", async () => {
  const a = new Redis({ port: native.port, host: "127.0.0.1" });
  const b = new Redis({ port: bare.port, host: "127.0.0.1" });
  try {
    const t = tag();
    const twin = new RateLimiter(b, { twins: true });
    const expected = await workload(new RateLimiter(a), t);
    const got = await workload(twin, t);
    assert.deepEqual(got, expected);
    const sources = luaSources();
    assert.equal(twin.twinRunner.mode, sources.library ? "functions" : "scripts");
    const th = await twin.throttle(t + "cell", 2, 1, 10);
    assert.deepEqual([th.allowed, th.limit, th.remaining, th.retryAfterS, th.resetAfterS], [true, 3, 2, -1, 10]);
  } finally {
    a.disconnect();
    b.disconnect();
  }
});

test("the Functions library is loaded once and called with FCALL", async (t) => {
  const sources = luaSources();
  if (!sources.library) return t.skip("the Functions library lua/ratelimit.lua is not in this tree yet");
  const c = await createClient({ url: bare.url() }).connect();
  try {
    const rl = new RateLimiter(c, { twins: true });
    const r = await rl.fixed(tag() + "fn", 2, "1m", { at: T });
    assert.equal(r.remaining, 1);
    assert.equal(rl.twinRunner.mode, "functions");
    const libs = await c.sendCommand(["FUNCTION", "LIST", "LIBRARYNAME", "ratelimit"]);
    assert.equal(libs.length, 1);
  } finally {
    await c.close();
  }
});

test("where FUNCTION is not allowed the scripts run (EVALSHA, EVAL the first time)", async () => {
  const c = new Redis({ port: noFunctions.port, host: "127.0.0.1" });
  const n = new Redis({ port: native.port, host: "127.0.0.1" });
  try {
    const t = tag();
    const rl = new RateLimiter(c, { twins: true });
    const got = await workload(rl, t);
    assert.equal(rl.twinRunner.mode, "scripts");
    assert.deepEqual(got, await workload(new RateLimiter(n), t));
    const scripts = Object.keys(luaSources().scripts);
    assert.ok(scripts.includes("rl_fixed") && scripts.includes("rl_all"), scripts.join(","));
  } finally {
    c.disconnect();
    n.disconnect();
  }
});

test('twins: "fallback" runs the command where there is one, the twin elsewhere, and says so once', async () => {
  const log = memoryLogger();
  const c = new Redis({ port: bare.port, host: "127.0.0.1" });
  const m = new Redis({ port: native.port, host: "127.0.0.1" });
  try {
    const rl = new RateLimiter(c, { twins: "fallback", logger: log });
    const k = tag() + "fb";
    for (let i = 0; i < 3; i++) await rl.fixed(k, 2, "1m", { at: T + i });
    assert.equal(log.lines.warn.length, 1);
    assert.match(log.lines.warn[0], /no RL\.FIXED.*Lua twin/);
    assert.deepEqual([...rl.missing], ["RL.FIXED"]);
    assert.equal(await c.get(k), "2");
    const onModule = new RateLimiter(m, { twins: "fallback", logger: log });
    await onModule.fixed(k, 2, "1m", { at: T });
    assert.equal(onModule.missing.size, 0);
    assert.equal(log.lines.warn.length, 1);
  } finally {
    c.disconnect();
    m.disconnect();
  }
});

test("without twins, a server without the module is an error that says what to do", async () => {
  const c = await createClient({ url: bare.url() }).connect();
  try {
    const rl = new RateLimiter(c);
    await assert.rejects(rl.gcra(tag(), 1, 1, "1s"), (err) => err instanceof ModuleMissingError && /MODULE LOAD/.test(err.message) && /twins/.test(err.message));
    await assert.rejects(rl.sweep(0, "1h"), ModuleMissingError);
  } finally {
    await c.close();
  }
});

test("in a Cluster without the module: the library on every primary, calls routed by their keys", async () => {
  const cluster = await Cluster.start(3, { module: false });
  const io = new IoCluster([{ host: "127.0.0.1", port: cluster.port }]);
  const nr = await createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${cluster.port}` }] }).connect();
  const n = new Redis({ port: native.port, host: "127.0.0.1" });
  try {
    for (const client of [io, nr]) {
      const t = tag();
      const rl = new RateLimiter(client, { twins: true });
      assert.deepEqual(await workload(rl, t), await workload(new RateLimiter(n), t));
      // Keys in other slots, so that more than one primary answers.
      for (const k of ["a", "b", "c", "d", "e", "f"]) assert.equal((await rl.fixed(`untagged:${t.slice(1, -1)}:${k}`, 1, "1m")).allowed, true);
      assert.equal(rl.twinRunner.mode, luaSources().library ? "functions" : "scripts");
    }
  } finally {
    io.disconnect();
    await nr.close();
    n.disconnect();
    await cluster.remove();
  }
});
