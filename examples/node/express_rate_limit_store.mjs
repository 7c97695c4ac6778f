// An express-rate-limit app moved from rate-limit-redis to the native commands by its
// store's class name: the same limit, window and headers; a refused request counts
// nowhere (rate-limit-redis's INCR keeps counting them).
//
//   REDIS_URL=redis://127.0.0.1:6379 node examples/node/express_rate_limit_store.mjs [--port 3000 | --check]
import assert from "node:assert/strict";
import { once } from "node:events";
import express from "express";
import { rateLimit } from "express-rate-limit";
import { createClient } from "redis";
import { RateLimitStore } from "redis-native-ratelimit/express-rate-limit"; // was: import { RedisStore } from "rate-limit-redis"

/**
 * @param {(...args: string[]) => Promise<unknown>} sendCommand rate-limit-redis's: the client's raw call
 * @param {string} prefix
 * @param {number} [timeoutMs] how long a hit waits for Redis (default 250 ms, then fail open)
 */
export function createApp(sendCommand, prefix = "rl:", timeoutMs = undefined) {
  const app = express();
  app.use(
    rateLimit({
      windowMs: 15 * 60 * 1000, // 15 minutes
      limit: 100,
      standardHeaders: "draft-8",
      legacyHeaders: false,
      // was: new RedisStore({ sendCommand: ... })
      store: new RateLimitStore({ sendCommand, prefix, timeoutMs }),
    }),
  );
  app.get("/", (req, res) => res.send("hello"));
  return app;
}

const client = await createClient({ url: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" }).connect();
/** @type {(...args: string[]) => Promise<unknown>} */
const sendCommand = (...args) => client.sendCommand(args); // ioredis: (command, ...args) => redis.call(command, ...args)
if (process.argv.includes("--check")) {
  const prefix = `rl:example:${process.pid}:`;
  // The check counts every answer: it waits for Redis as long as a busy machine may need.
  const server = createApp(sendCommand, prefix, 30_000).listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/`;
  const statuses = [];
  for (let i = 0; i < 101; i++) statuses.push((await fetch(url)).status);
  const last = await fetch(url);
  statuses.push(last.status);
  assert.equal(statuses.filter((s) => s === 200).length, 100);
  assert.deepEqual(statuses.slice(100), [429, 429]);
  assert.match(String(last.headers.get("ratelimit-policy")), /q=100; w=900/);
  const keys = await client.keys(prefix + "*");
  assert.equal(keys.length, 1);
  assert.equal(await client.get(keys[0]), "100"); // the two refusals counted nowhere
  server.close();
  await client.del(keys);
  console.log("self-check passed");
  await client.close();
} else {
  const i = process.argv.indexOf("--port");
  const port = i >= 0 ? Number(process.argv[i + 1]) : 3000;
  createApp(sendCommand).listen(port, () => console.log(`listening on http://127.0.0.1:${port}`));
}
