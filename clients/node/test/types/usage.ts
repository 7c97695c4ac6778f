// Compiled (not run) by test/typecheck.test.mjs: the declarations fit the frameworks' own
// types and the clients', and a handler or a key function gets the framework's request.
import express from "express";
import Fastify from "fastify";
import { Redis, Cluster } from "ioredis";
import { createClient, createCluster } from "redis";
import { rateLimit as erl } from "express-rate-limit";
import {
  All,
  Ban,
  Fixed,
  Gcra,
  Lease,
  type LocalBudget,
  type LocalBudgetStats,
  RateLimiter,
  type RateLimit,
  ipKey,
  ratelimitHeaders,
} from "redis-native-ratelimit";
import { rateLimit } from "redis-native-ratelimit/express";
import { fastifyRateLimit } from "redis-native-ratelimit/fastify";
import { RateLimitStore } from "redis-native-ratelimit/express-rate-limit";
import { RateLimitThrottlerStorage } from "redis-native-ratelimit/nestjs";
import type { ThrottlerStorage } from "@nestjs/throttler";

async function main(): Promise<void> {
  const io = new Redis();
  const nr = createClient();
  const limiters = [new RateLimiter(io), new RateLimiter(new Cluster([])), new RateLimiter(nr), new RateLimiter(createCluster({ rootNodes: [] }))];
  const r: RateLimit = await limiters[0].gcra("k", 1, 1, "1s", { delay: "2s" });
  const ms: number = r.retryAfterMs + r.resetAfterMs + (r.delayMs ?? 0);
  const headers: Record<string, string> = ratelimitHeaders(r, { standardHeaders: ["draft-6", "draft-8"], legacyHeaders: true });
  await limiters[1].all([["{a}1", new Gcra({ maxBurst: 1, count: 1, period: 1 })], ["{a}2", new Lease({ limit: 2, ttl: "30s", retryAfter: "2s" })]], { id: "x", newLease: true });

  const budget: LocalBudget = limiters[2].localBudget(new Fixed({ limit: 1000, window: "1m" }), "hot", {
    batch: 50,
    failOpen: false,
    timeoutMs: 100,
    clock: () => Date.now(),
    timers: { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) },
  });
  const taken: RateLimit = await budget.take(3);
  const granted: number | undefined = (await limiters[0].fixed("k", 5, "1m", { cost: 3, upto: true })).granted;
  const given: number = await budget.giveBack();
  await budget.close();
  const counts: LocalBudgetStats = budget.stats();
  void [taken.retryAfterMs, granted, given, counts.serverCalls + counts.givenBack + budget.holding];

  const app = express();
  app.use(
    rateLimit({
      client: io,
      policy: new Fixed({ limit: 5, window: "1m" }),
      key: (req) => [ipKey(req.ip), String(req.query.user ?? "")],
      skip: (req) => req.path === "/health",
      handler: (req, res, next, result) => res.status(429).json({ retry: result.retryAfterMs }),
      standardHeaders: "draft-8",
      legacyHeaders: false,
      ipv6Subnet: 64,
      shadow: true,
      ban: new Ban({ strikes: 3, window: "10m", duration: "1h" }),
    }),
  );
  const login = rateLimit({ client: nr, policy: new All([new Fixed({ limit: 1, window: "1m" })]) });
  app.post("/login", login, (req, res) => {
    res.send(String(ms) + Object.keys(headers).length + login.stats.shadowDenials);
  });
  app.use(erl({ windowMs: 60_000, limit: 5, store: new RateLimitStore({ sendCommand: (...args: string[]) => nr.sendCommand(args) }) }));
  app.use(erl({ windowMs: 60_000, limit: (req) => (req.ip ? 5 : 1), store: new RateLimitStore({ client: io, twins: "fallback", shadow: true }) }));

  const f = Fastify();
  await f.register(fastifyRateLimit, {
    client: io,
    policy: new Gcra({ maxBurst: 1, count: 1, period: "1s" }),
    key: (request) => request.headers["x-api-key"] ?? request.ip,
    handler: (request, reply, result) => reply.code(429).send({ retry: result.retryAfterMs }),
  });
  f.get("/", { config: { rateLimit: false } }, async (request) => ({ remaining: request.rateLimit?.remaining, state: f.rateLimit.breaker?.state }));

  const storage: ThrottlerStorage = new RateLimitThrottlerStorage(io, { algorithm: "gcra", failOpen: false });
  const record = await storage.increment("k", 60_000, 10, 0, "default");
  const blocked: boolean = record.isBlocked;
  void blocked;
}
void main;
