// Compiled (not run) by test/types.test.mjs: the declarations fit the frameworks' own
// types and the clients'.
import express from "express";
import Fastify from "fastify";
import { Redis, Cluster } from "ioredis";
import { createClient, createCluster } from "redis";
import { rateLimit as erl } from "express-rate-limit";
import { All, Fixed, Gcra, Lease, RateLimiter, type RateLimit, ratelimitHeaders } from "redis-ratelimit";
import { rateLimit } from "redis-ratelimit/express";
import { fastifyRateLimit } from "redis-ratelimit/fastify";
import { RateLimitStore } from "redis-ratelimit/express-rate-limit";

async function main(): Promise<void> {
  const io = new Redis();
  const nr = createClient();
  const limiters = [new RateLimiter(io), new RateLimiter(new Cluster([])), new RateLimiter(nr), new RateLimiter(createCluster({ rootNodes: [] }))];
  const r: RateLimit = await limiters[0].gcra("k", 1, 1, "1s", { delay: "2s" });
  const ms: number = r.retryAfterMs + r.resetAfterMs + (r.delayMs ?? 0);
  const headers: Record<string, string> = ratelimitHeaders(r);
  await limiters[1].all([["{a}1", new Gcra({ maxBurst: 1, count: 1, period: 1 })], ["{a}2", new Lease({ limit: 2, ttl: "30s" })]], { id: "x" });

  const app = express();
  app.use(rateLimit({ client: io, policy: new Fixed({ limit: 5, window: "1m" }), key: (req) => req.ip ?? "unknown" }));
  app.post("/login", rateLimit({ client: nr, policy: new All([new Fixed({ limit: 1, window: "1m" })]) }), (req, res) => {
    res.send(String(ms) + Object.keys(headers).length);
  });
  app.use(erl({ windowMs: 60_000, limit: 5, store: new RateLimitStore({ sendCommand: (...args: string[]) => nr.sendCommand(args) }) }));
  app.use(erl({ windowMs: 60_000, limit: 5, store: new RateLimitStore({ sendCommand: (command: string, ...args: string[]) => io.call(command, ...args) as Promise<unknown> }) }));

  const f = Fastify();
  await f.register(fastifyRateLimit, { client: io, policy: new Gcra({ maxBurst: 1, count: 1, period: "1s" }) });
  f.get("/", { config: { rateLimit: false } }, async () => "ok");
}
void main;
