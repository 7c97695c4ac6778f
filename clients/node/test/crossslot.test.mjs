// RL.ALL calls whose keys live in several Cluster slots, on a real three-node Cluster
// with the module on each node: settled slot by slot (one RL.ALL per slot, ascending),
// with what the earlier slots took given back when a later one denies. Concurrent
// clients never get any rule above its limit, and every refund is applied: the final
// counts equal the allowed calls exactly.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import express from "express";
import { Cluster as IoCluster } from "ioredis";
import { All, Ban, Fixed, Gcra, Lease, RateLimiter, keySlot } from "redis-native-ratelimit";
import { rateLimit } from "redis-native-ratelimit/express";
import { Cluster, clientVariants, tag, listen } from "./helpers.mjs";

const servers = { cluster: undefined };
let raw; // an ioredis Cluster client that reads the keys
before(async () => {
  servers.cluster = await Cluster.start();
  raw = new IoCluster([{ host: "127.0.0.1", port: servers.cluster.port }]);
});
after(async () => {
  raw?.disconnect();
  await servers.cluster?.remove();
});

// The Cluster clients: ioredis's and node-redis's.
const CLIENTS = Object.fromEntries(Object.entries(clientVariants(servers)).filter(([name]) => name.endsWith("Cluster")));

/** `n` keys, each in a slot of its own, in ascending slot order (one per node's range
 * when n is 3: 0-5460, 5461-10922, 10923-16383). */
function keysInSlots(n) {
  const t = tag().slice(1, -1); // no hash tag: each key hashes as a whole
  const keys = [];
  for (let i = 0; keys.length < n; i++) {
    const key = `${t}:${i}`;
    const range = Math.floor((keySlot(key) * n) / 16384);
    if (!keys.some((k) => Math.floor((keySlot(k) * n) / 16384) === range)) keys.push(key);
  }
  return keys.sort((a, b) => keySlot(a) - keySlot(b));
}

test("keySlot is the slot the servers compute (CLUSTER KEYSLOT)", async () => {
  const keys = ["foo", "{user1000}.following", "a{b}c", "{}x", "x{}", `${tag()}:k`, "ключ", "emoji😀", ...keysInSlots(3)];
  for (const key of keys) assert.equal(keySlot(key), await raw.cluster("KEYSLOT", key), key);
});

for (const [name, connect] of Object.entries(CLIENTS)) {
  describe(name, () => {
    test("concurrent clients across three slots: no rule above its limit, every refund applied", async () => {
      const [a, b, c] = keysInSlots(3);
      // The tightest rule is in the last slot, so that each of its refusals makes the
      // two earlier slots give back what they took.
      const rules = [
        [c, new Gcra({ maxBurst: 19, count: 20, period: "1h", name: "tight" })],
        [a, new Fixed({ limit: 30, window: "1h", name: "first" })],
        [b, new Fixed({ limit: 40, window: "1h", name: "second" })],
      ];
      const clients = await Promise.all([0, 1, 2, 3].map(() => connect()));
      try {
        const results = await Promise.all(
          clients.map(async ({ client }) => {
            const rl = new RateLimiter(client);
            const got = [];
            for (let i = 0; i < 15; i++) got.push(await rl.all(rules));
            return got;
          }),
        );
        const all = results.flat();
        const allowed = all.filter((r) => r.allowed).length;
        assert.equal(allowed, 20); // the GCRA's capacity: the only rule that denies
        for (const r of all.filter((x) => !x.allowed)) {
          assert.deepEqual([r.rule, r.key, r.quota.name, r.remaining], [1, c, "tight", 0]);
        }
        // Every refund applied: the fixed windows hold exactly the allowed calls.
        assert.equal(Number(await raw.get(a)), allowed);
        assert.equal(Number(await raw.get(b)), allowed);
      } finally {
        for (const { close } of clients) await close();
      }
    });

    test("allowed: the rule with the least remaining across slots; a lease an earlier slot took is released", async () => {
      const { client, close } = await connect();
      const rl = new RateLimiter(client);
      try {
        const [a, b] = keysInSlots(2);
        const ok = await rl.all([[b, new Fixed({ limit: 3, window: "1h", name: "three" })], [a, new Fixed({ limit: 10, window: "1h", name: "ten" })]]);
        assert.deepEqual([ok.allowed, ok.rule, ok.key, ok.remaining, ok.limit, ok.quota.name], [true, 1, b, 2, 3, "three"]);
        assert.deepEqual(ok.quotas.map((q) => q.name), ["three", "ten"]);
        const [slot, rate] = keysInSlots(2);
        const rules = [[slot, new Lease({ limit: 5, ttl: "1m" })], [rate, new Fixed({ limit: 1, window: "1h" })]];
        const first = await rl.all(rules);
        assert.equal(first.allowed, true);
        assert.equal(typeof first.leaseId, "string");
        const second = await rl.all(rules); // its lease is taken in the first slot, then the second denies
        assert.deepEqual([second.allowed, second.rule, second.key], [false, 2, rate]);
        assert.deepEqual(await raw.zrange(slot, 0, -1), [first.leaseId]);
        assert.equal(await raw.get(rate), "1");
      } finally {
        await close();
      }
    });

    test("a BAN rule across slots is refused with a clear error, and nothing is written", async () => {
      const { client, close } = await connect();
      try {
        const [a, b] = keysInSlots(2);
        const rl = new RateLimiter(client);
        await assert.rejects(
          rl.all([[a, new Fixed({ limit: 1, window: "1h" })], [b, new Ban({ strikes: 1, window: "1h", duration: "1h" })]]),
          /BAN rule cannot span Cluster slots.*hash tag/,
        );
        assert.deepEqual([await raw.exists(a), await raw.exists(b)], [0, 0]);
        // In one slot (a hash tag), the same rules are one RL.ALL.
        const t = tag();
        const one = await rl.all([[`${t}a`, new Fixed({ limit: 1, window: "1h" })], [`${t}b`, new Ban({ strikes: 1, window: "1h", duration: "1h" })]]);
        assert.equal(one.allowed, true);
      } finally {
        await close();
      }
    });

    test("the Express middleware's All policy on a Cluster client: rule keys in several slots", async () => {
      const { client, close } = await connect();
      let prefix;
      do prefix = `${tag().slice(1, -1)}:`;
      while (keySlot(`${prefix}all:gcra1:ann`) === keySlot(`${prefix}all:fixed2:ann`));
      const app = express();
      app.use(
        rateLimit({
          client,
          prefix,
          policy: new All([new Gcra({ maxBurst: 9, count: 10, period: "1h" }), new Fixed({ limit: 2, window: "1h" })]),
          key: (req) => [String(req.headers["x-user"]), String(req.headers["x-user"])],
          timeoutMs: 30_000,
        }),
      );
      app.get("/", (req, res) => res.send("ok"));
      const http = createServer(app);
      const url = await listen(http);
      try {
        const statuses = [];
        for (let i = 0; i < 3; i++) statuses.push((await fetch(url, { headers: { "x-user": "ann" } })).status);
        assert.deepEqual(statuses, [200, 200, 429]);
        assert.equal(await raw.get(`${prefix}all:fixed2:ann`), "2");
      } finally {
        await new Promise((r) => http.close(r));
        await close();
      }
    });
  });
}
