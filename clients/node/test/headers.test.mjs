// The HTTP headers of a result, in the families express-rate-limit 8 names, as the
// Python package gives them; the key of a client address; the hash slot of a key.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ratelimitHeaders, ceilSeconds, ipKey, keySlot, Gcra, Multi, All, Fixed } from "redis-native-ratelimit";

const result = (allowed, limit, remaining, retry, reset, quotas = [], quota) => ({
  allowed, limited: !allowed, limit, remaining, retryAfterMs: retry, resetAfterMs: reset, quotas, quota,
});

test("the default: draft-6's three fields and draft-8's two, times rounded up", () => {
  const q = new Gcra({ maxBurst: 9, count: 10, period: "1s", name: "api" }).quotas();
  assert.deepEqual(ratelimitHeaders(result(true, 10, 9, -1, 100, q, q[0])), {
    "RateLimit-Policy": '"api";q=10;w=1',
    "RateLimit-Limit": "10",
    "RateLimit-Remaining": "9",
    "RateLimit-Reset": "1",
    RateLimit: '"api";r=9;t=1',
  });
});

test("each draft as express-rate-limit 8 writes it, legacy X-RateLimit-*, none", () => {
  const q = [{ name: "api", limit: 5, windowMs: 60_000 }];
  const r = result(true, 5, 4, -1, 59_001, q, q[0]);
  assert.deepEqual(ratelimitHeaders(r, { standardHeaders: "draft-6" }), {
    "RateLimit-Policy": "5;w=60",
    "RateLimit-Limit": "5",
    "RateLimit-Remaining": "4",
    "RateLimit-Reset": "60",
  });
  assert.deepEqual(ratelimitHeaders(r, { standardHeaders: "draft-7" }), {
    "RateLimit-Policy": "5;w=60",
    RateLimit: "limit=5, remaining=4, reset=60",
  });
  assert.deepEqual(ratelimitHeaders(r, { standardHeaders: "draft-8" }), {
    "RateLimit-Policy": '"api";q=5;w=60',
    RateLimit: '"api";r=4;t=60',
  });
  assert.deepEqual(ratelimitHeaders(r, { standardHeaders: true }), ratelimitHeaders(r, { standardHeaders: "draft-6" }));
  assert.deepEqual(ratelimitHeaders(r, { standardHeaders: false, legacyHeaders: true }), {
    "X-RateLimit-Limit": "5",
    "X-RateLimit-Remaining": "4",
    "X-RateLimit-Reset": "60",
  });
  assert.deepEqual(ratelimitHeaders(result(false, 5, 0, 5, 5), { standardHeaders: false }), { "Retry-After": "1" });
  assert.throws(() => ratelimitHeaders(r, { standardHeaders: "draft-9" }), /draft-9.*draft-6, draft-7, draft-8/);
});

test("refused: Retry-After rounded up, at least 1, or the lease's own", () => {
  const h = ratelimitHeaders(result(false, 5, 0, 1001, 30_000));
  assert.equal(h["Retry-After"], "2");
  assert.equal(h["RateLimit-Reset"], "30");
  assert.equal(ratelimitHeaders(result(false, 5, 0, 0, 0))["Retry-After"], "1");
  assert.equal(h["RateLimit-Policy"], '"default";q=5');
  // A lease's refusal, as the middleware shows it: the result's wait is the lease's retryAfter.
  assert.equal(ratelimitHeaders({ ...result(false, 2, 0, 120_000, 120_000), retryAfterMs: 1000 })["Retry-After"], "1");
  assert.equal(ratelimitHeaders(result(false, 5, 0, 5, 5), { retryAfter: false })["Retry-After"], undefined);
});

test("several quotas: the policy lists them all, RateLimit names the binding one", () => {
  const m = new Multi({ limits: [["1m", 5], ["1h", 20]], names: ["ip", "user"] });
  const q = m.quotas(2);
  assert.deepEqual(q.map((x) => x.name), ["ip-1m", "ip-1h", "user-1m", "user-1h"]);
  const h = ratelimitHeaders(result(true, 20, 3, -1, 3_600_000, q, q[3]));
  assert.equal(h["RateLimit-Policy"], '"ip-1m";q=5;w=60, "ip-1h";q=20;w=3600, "user-1m";q=5;w=60, "user-1h";q=20;w=3600');
  assert.equal(h.RateLimit, '"user-1h";r=3;t=3600');
  assert.equal(ratelimitHeaders(result(true, 20, 3, -1, 3_600_000, q, q[3]), { standardHeaders: "draft-6" })["RateLimit-Policy"], "20;w=3600");
  const all = new All([new Fixed({ limit: 5, window: "1d", name: "day" }), new Gcra({ maxBurst: 0, count: 1, period: "1s" })]);
  assert.deepEqual(all.quotas().map((x) => x.name), ["day", "gcra"]);
});

test("names are escaped as Structured Fields strings", () => {
  const q = [{ name: 'we"ird\\', limit: 3, windowMs: 1500 }];
  const h = ratelimitHeaders(result(true, 3, 1, -1, 1, q, q[0]), { standardHeaders: "draft-8" });
  assert.equal(h["RateLimit-Policy"], '"we\\"ird\\\\";q=3;w=2');
});

test("CL.THROTTLE's result: its own seconds", () => {
  const h = ratelimitHeaders({ allowed: false, limited: true, limit: 3, remaining: 0, retryAfterS: 4, resetAfterS: 9 });
  assert.equal(h["Retry-After"], "4");
  assert.equal(h["RateLimit-Reset"], "9");
  assert.equal(ceilSeconds(1), 1);
  assert.equal(ceilSeconds(0), 0);
});

test("ipKey: an IPv6 address as its /56 network (as express-rate-limit 8), IPv4 as it is", () => {
  assert.equal(ipKey("2001:db8:1:1ff::2"), "2001:db8:1:100::/56");
  assert.equal(ipKey("2001:db8:1:100:ffff:ffff:ffff:ffff"), "2001:db8:1:100::/56");
  assert.equal(ipKey("2001:db8:1:200::1"), "2001:db8:1:200::/56");
  assert.equal(ipKey("2001:DB8:0:0:1:0:0:1", 64), "2001:db8::/64");
  assert.equal(ipKey("2001:db8:0:0:1:0:0:1", 128), "2001:db8::1:0:0:1/128");
  assert.equal(ipKey("2001:db8:0:0:1:0:0:1", false), "2001:db8::1:0:0:1");
  assert.equal(ipKey("fe80::1%eth0", 48), "fe80::/48");
  assert.equal(ipKey("::ffff:10.1.2.3"), "10.1.2.3");
  assert.equal(ipKey("::ffff:a01:203"), "10.1.2.3");
  assert.equal(ipKey("::10.1.2.3"), "10.1.2.3");
  assert.equal(ipKey("::1"), "::/56");
  assert.equal(ipKey("10.1.2.3"), "10.1.2.3");
  assert.equal(ipKey("not an address"), "not an address");
  assert.equal(ipKey(undefined), "unknown");
  assert.throws(() => ipKey("::1", 129), /ipv6Subnet/);
});

test("keySlot: CRC16 of the key or of its hash tag, as the servers compute it", () => {
  // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
  assert.equal(keySlot("foo"), 12182);
  assert.equal(keySlot("bar"), 5061);
  assert.equal(keySlot("123456789"), 0x31c3);
  assert.equal(keySlot("{user1000}.following"), keySlot("user1000"));
  assert.equal(keySlot("foo{}{bar}"), keySlot("foo{}{bar}")); // an empty tag: the whole key
  assert.notEqual(keySlot("foo{}{bar}"), keySlot("bar"));
  assert.equal(keySlot("foo{{bar}}zap"), keySlot("{bar"));
  assert.equal(keySlot(Buffer.from("foo")), 12182);
});
