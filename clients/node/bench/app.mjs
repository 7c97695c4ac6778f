// One Express app, limited by one of the variants the benchmark compares, every one on
// the same Redis server through ioredis: node app.mjs VARIANT REDIS_PORT. It prints the
// port it listens on. Limits are far above the load, so every request is counted and
// allowed: what is measured is the cost of limiting a request.
import express from "express";
import { Redis } from "ioredis";

const [variant, redisPort] = process.argv.slice(2);
const redis = new Redis({ port: Number(redisPort), host: "127.0.0.1" });
const LIMIT = 1_000_000_000;
const WINDOW_MS = 60_000;
const app = express();
app.set("etag", false);
const key = () => "bench-client"; // one client: every request on one hot key, in every variant
// Every request is limited: no timeout short enough for a loaded machine to turn calls
// into fail-open requests, no breaker to skip them.
const patient = { timeoutMs: 60_000, breaker: false };

if (variant === "middleware") {
  const { Fixed } = await import("redis-native-ratelimit");
  const { rateLimit } = await import("redis-native-ratelimit/express");
  app.use(rateLimit({ client: redis, policy: new Fixed({ limit: LIMIT, window: `${WINDOW_MS}ms` }), key, prefix: `b:${variant}:`, ...patient }));
} else if (variant === "middleware-gcra") {
  const { Gcra } = await import("redis-native-ratelimit");
  const { rateLimit } = await import("redis-native-ratelimit/express");
  app.use(rateLimit({ client: redis, policy: new Gcra({ maxBurst: LIMIT - 1, count: 1_000_000, period: `${WINDOW_MS}ms` }), key, prefix: `b:${variant}:`, ...patient }));
} else if (variant === "express-rate-limit+store" || variant === "express-rate-limit+rate-limit-redis") {
  const { rateLimit } = await import("express-rate-limit");
  const sendCommand = (command, ...args) => redis.call(command, ...args);
  let store;
  if (variant === "express-rate-limit+store") {
    const { RateLimitStore } = await import("redis-native-ratelimit/express-rate-limit");
    store = new RateLimitStore({ sendCommand, prefix: `b:${variant}:` });
  } else {
    const { RedisStore } = await import("rate-limit-redis");
    store = new RedisStore({ sendCommand, prefix: `b:${variant}:` });
  }
  app.use(rateLimit({ windowMs: WINDOW_MS, limit: LIMIT, standardHeaders: "draft-8", legacyHeaders: false, keyGenerator: key, store }));
} else if (variant === "rate-limiter-flexible") {
  const { RateLimiterRedis } = await import("rate-limiter-flexible");
  const limiter = new RateLimiterRedis({ storeClient: redis, points: LIMIT, duration: WINDOW_MS / 1000, keyPrefix: `b:${variant}` });
  app.use((req, res, next) => {
    limiter
      .consume(key(req))
      .then((r) => {
        res.set("RateLimit-Remaining", String(r.remainingPoints));
        next();
      })
      .catch((r) => {
        if (r instanceof Error) return next(r);
        res.set("Retry-After", String(Math.ceil(r.msBeforeNext / 1000)));
        res.status(429).send("Too Many Requests");
      });
  });
} else if (variant !== "unlimited") {
  throw new Error(`unknown variant ${variant}`);
}
app.get("/", (req, res) => res.send("ok"));
const server = app.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
