// Every typed call on both clients, ioredis and node-redis, standalone and Cluster,
// against real servers with the module: results, keys as given, errors.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { RateLimiter, Gcra, Fixed, Lease, Ban, Sliding, Multi, Log, isReplyError } from "redis-native-ratelimit";
import { clientVariants, serversOfFile, tag, notYet } from "./helpers.mjs";

const T = 1_900_000_000_000; // AT: a time ahead of now, so that keys stay while the test runs

const servers = serversOfFile();
const VARIANTS = clientVariants(servers);

for (const [name, make] of Object.entries(VARIANTS)) {
  describe(name, () => {
    let v;
    let rl;
    before(async () => {
      v = await make();
      rl = new RateLimiter(v.client);
    });
    after(async () => v.close());

    test("RL.FIXED: allowed until the limit, then refused with the window's end", async () => {
      const k = tag() + "fixed";
      const got = [];
      for (let i = 0; i < 4; i++) got.push(await rl.fixed(k, 3, "10s", { at: T + i }));
      assert.deepEqual(
        got.map((r) => [r.allowed, r.limited, r.limit, r.remaining, r.retryAfterMs, r.resetAfterMs]),
        [
          [true, false, 3, 2, -1, 10000],
          [true, false, 3, 1, -1, 9999],
          [true, false, 3, 0, -1, 9998],
          [false, true, 3, 0, 9997, 9997],
        ],
      );
      assert.equal(await v.raw.get(k), "3"); // the refused request counted nowhere
      assert.deepEqual(got[0].quotas, [{ name: "fixed", limit: 3, windowMs: 10000 }]);
      const peek = await rl.fixed(k, 3, "10s", { at: T + 4, cost: 0 });
      assert.equal(peek.remaining, 0);
      const aligned = await rl.fixed(tag() + "a", 5, "1m", { at: T + 30_000, align: true });
      assert.equal(aligned.resetAfterMs, 60_000 - ((T + 30_000) % 60_000));
    });

    test("RL.GCRA, with DELAY: capacity max_burst + 1, bookings spaced by the interval", async () => {
      const k = tag() + "gcra";
      const a = await rl.gcra(k, 2, 1, "10s", { at: T });
      const b = await rl.gcra(k, 2, 1, "10s", { at: T });
      assert.deepEqual([a.limit, a.remaining, a.resetAfterMs, b.remaining, b.resetAfterMs], [3, 2, 10000, 1, 20000]);
      assert.equal(a.delayMs, undefined);
      assert.deepEqual(a.quotas, [{ name: "gcra", limit: 3, windowMs: 30000 }]);
      const q = tag() + "queue";
      const booked = [];
      for (let i = 0; i < 4; i++) booked.push(await rl.gcra(q, 0, 1, "1s", { at: T, delay: "2s" }));
      assert.deepEqual(booked.map((r) => [r.allowed, r.delayMs]), [[true, 0], [true, 1000], [true, 2000], [false, -1]]);
    });

    test("RL.MULTI and RL.SLIDING: the binding key is the caller's object, a string is one key", async () => {
      const t = tag();
      const keys = [t + "ip", Buffer.from(t + "user\xff", "latin1")];
      const limits = [["1m", 2], ["1h", 5]];
      const first = await rl.multi(keys, limits, { at: T, names: ["ip", "user"] });
      assert.equal(first.allowed, true);
      assert.equal(first.key, keys[0]);
      assert.equal(first.windowMs, 60_000);
      assert.equal(first.remaining, 1);
      assert.deepEqual(first.quota, { name: "ip-1m", limit: 2, windowMs: 60000 });
      await rl.multi(keys, limits, { at: T + 1 });
      const third = await rl.multi(keys, limits, { at: T + 2 });
      assert.equal(third.limited, true);
      assert.ok(third.key === keys[0] || third.key === keys[1]);
      assert.equal(third.retryAfterMs, 59_998);
      const one = t + "one";
      const s = await rl.sliding(one, [["10s", 2]], { at: T });
      assert.equal(s.key, one); // not split into characters
      assert.deepEqual([s.limit, s.remaining, s.windowMs], [2, 1, 10_000]);
      const bucketed = await rl.sliding([t + "b"], [["10s", 4]], { at: T, buckets: 5 });
      assert.equal(bucketed.remaining, 3);
    });

    test("RL.LOG: META recorded, readable with ZRANGE", async () => {
      const k = tag() + "log";
      const r = await rl.log(k, 2, "1m", { at: T, meta: "user-7" });
      assert.deepEqual([r.allowed, r.limit, r.remaining], [true, 2, 1]);
      const members = await v.raw.zrange(k, 0, -1);
      assert.equal(members.length, 1);
      assert.match(members[0], /user-7$/);
    });

    test("RL.ALL: rules of different kinds, all or nothing, the binding rule named", async () => {
      const t = tag();
      const rules = [
        [t + "user", new Gcra({ maxBurst: 2, count: 1, period: "1h", name: "user" })],
        [t + "daily", new Fixed({ limit: 5, window: "1d", name: "account" })],
        [t + "search", new Sliding({ limits: [["1m", 10]] })],
        [t + "mlt", new Multi({ limits: [["1m", 10]] })],
        [t + "lg", new Log({ limit: 10, window: "1m" })],
      ];
      const r = await rl.all(rules, { at: T });
      assert.deepEqual([r.allowed, r.rule, r.key, r.limit, r.remaining], [true, 1, rules[0][0], 3, 2]);
      assert.equal(r.quota.name, "user");
      for (let i = 1; i < 3; i++) await rl.all(rules, { at: T });
      const refused = await rl.all(rules, { at: T });
      assert.equal(refused.limited, true);
      assert.equal(refused.rule, 1);
      assert.equal(await v.raw.get(t + "daily"), "3"); // nothing written by the refusal
    });

    test("CL.THROTTLE: redis-cell's reply in seconds", async () => {
      const k = tag() + "cell";
      const r = await rl.throttle(k, 2, 1, 10);
      assert.deepEqual([r.allowed, r.limit, r.remaining, r.retryAfterS, r.resetAfterS], [true, 3, 2, -1, 10]);
    });

    test("RL.BULKEXPIRE: the keys that got a TTL, as given; RL.SWEEP on each primary", async () => {
      const t = tag();
      const [a, b, c] = [t + "a", Buffer.from(t + "b"), t + "c"];
      await v.raw.set(a, "1");
      await v.raw.set(b, "1", "EX", 100);
      const got = await rl.bulkexpire("60s", [a, b, c]);
      assert.deepEqual(got, [a]);
      assert.ok(got[0] === a);
      const ttl = await v.raw.ttl(a);
      assert.ok(ttl > 0 && ttl <= 60, `ttl ${ttl}`);
      const s = tag();
      for (let i = 0; i < 5; i++) await v.raw.set(`${s}sweep:${i}`, "x");
      if (v.cluster) assert.throws(() => rl.sweep(0, "1h"), /node-local/);
      let expired = 0;
      for (const node of await rl.primaries()) {
        let cursor = "0";
        do {
          const r = await node.sweep(cursor, "1h", { match: `${s}sweep:*`, count: 1000 });
          assert.equal(typeof r.cursor, "string");
          expired += r.expired;
          cursor = r.cursor;
        } while (cursor !== "0");
      }
      assert.equal(expired, 5);
    });

    test("errors are the server's one-line replies", async () => {
      await assert.rejects(rl.fixed(tag() + "bad", 0, "1s"), (err) => isReplyError(err) && /limit/i.test(err.message));
      await assert.rejects(rl.gcra(tag() + "bad", 1, 1, "-1s"), (err) => isReplyError(err) && /period/i.test(err.message));
      assert.throws(() => rl.fixed(tag(), 1, 1.5), TypeError);
    });

    test("RL.LEASE and RL.RELEASE: slots held, refused at the limit, released", async (t) => {
      const k = tag() + "lease";
      let a;
      try {
        a = await rl.lease(k, 2, "30s");
      } catch (err) {
        const why = notYet(err, "RL.LEASE is not in this module yet");
        if (why) return t.skip(why);
        throw err;
      }
      assert.equal(a.allowed, true);
      assert.equal(typeof a.leaseId, "string");
      const b = await rl.lease(k, 2, "30s", { id: "worker-2" });
      assert.equal(b.leaseId, "worker-2");
      const c = await rl.lease(k, 2, "30s");
      assert.deepEqual([c.allowed, c.leaseId, c.remaining], [false, null, 0]);
      const renewed = await rl.lease(k, 2, "30s", { id: "worker-2" });
      assert.equal(renewed.allowed, true); // a heartbeat never loses its own slot
      assert.equal(await rl.release(k, a.leaseId), true);
      assert.equal(await rl.release(k, a.leaseId), false);
      const d = await rl.lease(k, 2, "30s");
      assert.equal(d.allowed, true);
      const t2 = tag();
      const all = await rl.all([[t2 + "conc", new Lease({ limit: 1, ttl: "30s" })], [t2 + "rate", new Fixed({ limit: 9, window: "1m" })]], { id: "req-1" });
      assert.deepEqual([all.allowed, all.leaseId], [true, "req-1"]);
    });

    test("REFUND and FORCE settle a request after the fact", async (t) => {
      const k = tag() + "settle";
      await rl.fixed(k, 3, "10s", { at: T, cost: 2 });
      let refunded;
      try {
        refunded = await rl.fixed(k, 3, "10s", { at: T + 1, refund: true });
      } catch (err) {
        const why = notYet(err, "REFUND is not in this module yet");
        if (why) return t.skip(why);
        throw err;
      }
      assert.deepEqual([refunded.allowed, refunded.remaining], [true, 2]);
      const forced = await rl.fixed(k, 3, "10s", { at: T + 2, cost: 5, force: true });
      assert.equal(forced.limited, true);
      assert.equal(forced.remaining, 0);
      assert.equal((await rl.fixed(k, 3, "10s", { at: T + 3 })).limited, true);
      assert.throws(() => rl.fixed(k, 3, "10s", { refund: true, force: true }), TypeError);
    });

    test("RL.ALL with a BAN rule: strikes then a ban", async (t) => {
      const t2 = tag();
      const rules = [
        [t2 + "rate", new Fixed({ limit: 1, window: "1m" })],
        [t2 + "box", new Ban({ strikes: 2, window: "1m", duration: "1h" })],
      ];
      try {
        await rl.all(rules, { at: T });
      } catch (err) {
        const why = notYet(err, "BAN rules are not in this module yet");
        if (why) return t.skip(why);
        throw err;
      }
      await rl.all(rules, { at: T + 1 }); // strike 1
      const banned = await rl.all(rules, { at: T + 2 }); // strike 2: the ban starts
      assert.deepEqual([banned.limited, banned.rule, banned.limit], [true, 2, 2]);
      assert.equal(banned.quota.name, "ban");
    });
  });
}

test("ioredis keyPrefix applies to the module's commands, and the binding key comes back as given", async () => {
  const c = new Redis({ port: servers.server.port, host: "127.0.0.1", keyPrefix: "app:" });
  const raw = new Redis({ port: servers.server.port, host: "127.0.0.1" });
  try {
    const rl = new RateLimiter(c);
    const t = tag();
    const r = await rl.multi([t + "x", t + "y"], [["1m", 3]], { at: T });
    assert.equal(r.key, t + "x");
    assert.equal(await raw.exists("app:" + t + "x"), 1);
    await rl.fixed(t + "f", 3, "1m", { at: T });
    assert.equal(await raw.get("app:" + t + "f"), "1");
  } finally {
    c.disconnect();
    raw.disconnect();
  }
});
