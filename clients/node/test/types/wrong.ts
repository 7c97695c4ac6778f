// Compiled by test/typecheck.test.mjs: each marked line must NOT compile (tsc fails on a
// marker whose line compiles), so mistakes are caught before they run.
import { Redis } from "ioredis";
import { Fixed, Lease, RateLimiter, ratelimitHeaders } from "redis-native-ratelimit";
import { rateLimit } from "redis-native-ratelimit/express";
import { RateLimitStore } from "redis-native-ratelimit/express-rate-limit";

const redis = new Redis();
// @ts-expect-error: not a client
new RateLimiter({});
// @ts-expect-error: not a client
new RateLimiter("redis://127.0.0.1:6379");
// @ts-expect-error: a lease needs its ttl
new Lease({ limit: 2 });
// @ts-expect-error: no such draft
rateLimit({ client: redis, policy: new Fixed({ limit: 1, window: "1m" }), standardHeaders: "draft-9" });
// @ts-expect-error: the key function returns identifiers, not numbers
rateLimit({ client: redis, key: () => 42 });
// @ts-expect-error: the middleware needs a client
rateLimit({ policy: new Fixed({ limit: 1, window: "1m" }) });
// @ts-expect-error: no such algorithm
new RateLimitStore({ client: redis, algorithm: "leaky" });
// @ts-expect-error: legacyHeaders is a boolean (X-RateLimit-* or not)
ratelimitHeaders({ allowed: true, limited: false, limit: 1, remaining: 0, retryAfterMs: -1, resetAfterMs: 0, quotas: [] }, { legacyHeaders: "x" });
// @ts-expect-error: a take's cost is a number
new RateLimiter(redis).localBudget(new Fixed({ limit: 10, window: "1m" }), "k").take("2");
// @ts-expect-error: batch is a number of units
new RateLimiter(redis).localBudget(new Fixed({ limit: 10, window: "1m" }), "k", { batch: "100" });
// @ts-expect-error: upto is a flag; the most to take is the cost
new RateLimiter(redis).fixed("k", 10, "1m", { upto: 3 });
