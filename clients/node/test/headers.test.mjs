// The HTTP headers of a result, as the Python package gives them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ratelimitHeaders, ceilSeconds, Gcra, Multi, All, Fixed } from "redis-ratelimit";

const result = (allowed, limit, remaining, retry, reset, quotas = [], quota) => ({
  allowed, limited: !allowed, limit, remaining, retryAfterMs: retry, resetAfterMs: reset, quotas, quota,
});

test("allowed: the three legacy fields and the draft's two, times rounded up", () => {
  const q = new Gcra({ maxBurst: 9, count: 10, period: "1s", name: "api" }).quotas();
  assert.deepEqual(ratelimitHeaders(result(true, 10, 9, -1, 100, q, q[0])), {
    "RateLimit-Limit": "10",
    "RateLimit-Remaining": "9",
    "RateLimit-Reset": "1",
    "RateLimit-Policy": '"api";q=10;w=1',
    RateLimit: '"api";r=9;t=1',
  });
});

test("refused: Retry-After rounded up, at least 1", () => {
  const h = ratelimitHeaders(result(false, 5, 0, 1001, 30_000));
  assert.equal(h["Retry-After"], "2");
  assert.equal(h["RateLimit-Reset"], "30");
  assert.equal(ratelimitHeaders(result(false, 5, 0, 0, 0))["Retry-After"], "1");
  assert.equal(h["RateLimit-Policy"], '"default";q=5');
});

test("several quotas: the policy lists them all, RateLimit names the binding one", () => {
  const m = new Multi({ limits: [["1m", 5], ["1h", 20]], names: ["ip", "user"] });
  const q = m.quotas(2);
  assert.deepEqual(q.map((x) => x.name), ["ip-1m", "ip-1h", "user-1m", "user-1h"]);
  const h = ratelimitHeaders(result(true, 20, 3, -1, 3_600_000, q, q[3]));
  assert.equal(h["RateLimit-Policy"], '"ip-1m";q=5;w=60, "ip-1h";q=20;w=3600, "user-1m";q=5;w=60, "user-1h";q=20;w=3600');
  assert.equal(h.RateLimit, '"user-1h";r=3;t=3600');
  const all = new All([new Fixed({ limit: 5, window: "1d", name: "day" }), new Gcra({ maxBurst: 0, count: 1, period: "1s" })]);
  assert.deepEqual(all.quotas().map((x) => x.name), ["day", "gcra"]);
});

test("options: X- prefix, families off, names escaped", () => {
  const q = [{ name: 'we"ird\\', limit: 3, windowMs: 1500 }];
  const h = ratelimitHeaders(result(true, 3, 1, -1, 1, q, q[0]), { xPrefix: true });
  assert.deepEqual(Object.keys(h), ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"]);
  assert.equal(h["RateLimit-Policy"], '"we\\"ird\\\\";q=3;w=2');
  assert.deepEqual(Object.keys(ratelimitHeaders(result(false, 3, 0, 5, 5), { legacy: false, draft: false })), ["Retry-After"]);
  assert.deepEqual(Object.keys(ratelimitHeaders(result(false, 3, 0, 5, 5), { retryAfter: false, draft: false })).length, 3);
});

test("CL.THROTTLE's result: its own seconds", () => {
  const h = ratelimitHeaders({ allowed: false, limited: true, limit: 3, remaining: 0, retryAfterS: 4, resetAfterS: 9 });
  assert.equal(h["Retry-After"], "4");
  assert.equal(h["RateLimit-Reset"], "9");
  assert.equal(ceilSeconds(1), 1);
  assert.equal(ceilSeconds(0), 0);
});
