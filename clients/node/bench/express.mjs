// make bench-node: requests per second of one Express app limited by this package (its
// middleware, RL.FIXED and RL.GCRA; express-rate-limit on its store) against the same app
// on express-rate-limit with rate-limit-redis and on rate-limiter-flexible's
// RateLimiterRedis: the same Redis server with the module, the same ioredis client, the
// same load (a fixed count of requests over keep-alive connections), one run, on this machine. The apps
// run side by side and are loaded in turn, round after round, so that a change in the
// machine's load falls on all of them; each row is the median of its rounds, with the
// lowest and highest. Reported as ratios to the best of the other libraries measured in
// the same run; nothing is asserted but that every request was answered 200 (the limits
// are far above the load).
//
//   node bench/express.mjs [--requests N] [--connections C] [--rounds R]
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";
import { Redis } from "ioredis";
import { Server } from "../test/helpers.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const REQUESTS = arg("--requests", 30_000);
const ROUNDS = arg("--rounds", 3);
const CONNECTIONS = arg("--connections", 16);
const VARIANTS = [
  ["unlimited", "no limiter (the ceiling)"],
  ["middleware", "this package's middleware, RL.FIXED"],
  ["middleware-gcra", "this package's middleware, RL.GCRA"],
  ["express-rate-limit+store", "express-rate-limit, this package's store (RL.FIXED)"],
  ["express-rate-limit+rate-limit-redis", "express-rate-limit, rate-limit-redis (its script)"],
  ["rate-limiter-flexible", "rate-limiter-flexible, RateLimiterRedis"],
];
const OTHERS = ["express-rate-limit+rate-limit-redis", "rate-limiter-flexible"];

async function startApp(variant, redisPort) {
  const child = spawn(process.execPath, [join(here, "app.mjs"), variant, String(redisPort)], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  for await (const chunk of child.stdout) {
    out += chunk;
    const m = /listening (\d+)/.exec(out);
    if (m) return { child, port: Number(m[1]) };
  }
  throw new Error(`${variant}: the app did not start`);
}

/** `amount` GET requests over CONNECTIONS keep-alive connections, each connection one
 * request at a time: the elapsed time, the statuses and the latencies (ms). */
async function load(url, amount) {
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const latencies = [];
  let ok = 0;
  let other = 0;
  let sent = 0;
  const one = () =>
    new Promise((resolve) => {
      const t0 = performance.now();
      const req = request(url, { agent }, (res) => {
        res.resume();
        res.on("end", () => {
          latencies.push(performance.now() - t0);
          if (res.statusCode === 200) ok++;
          else other++;
          resolve();
        });
      });
      req.on("error", () => {
        other++;
        resolve();
      });
      req.end();
    });
  const worker = async () => {
    while (sent < amount) {
      sent++;
      await one();
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  const seconds = (performance.now() - start) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const pct = (p) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] * 10) / 10;
  return { rps: amount / seconds, p50: pct(50), p99: pct(99), ok, other };
}

/** Commands the server ran and the CPU time it spent in them (INFO commandstats),
 * INFO itself left out: what one request of an app costs Redis, whatever the load. */
async function serverWork(redis) {
  const text = await redis.info("commandstats");
  let calls = 0;
  let usec = 0;
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    if (m[1] === "info") continue;
    calls += Number(m[2]);
    usec += Number(m[3]);
  }
  return { calls, usec };
}

const server = await Server.start();
const stats = new Redis({ port: server.port, host: "127.0.0.1" });
const rows = [];
const apps = [];
try {
  for (const [variant] of VARIANTS) apps.push(await startApp(variant, server.port));
  const runs = VARIANTS.map(() => []);
  for (let round = 0; round <= ROUNDS; round++) {
    for (let i = 0; i < VARIANTS.length; i++) {
      const url = `http://127.0.0.1:${apps[i].port}/`;
      if (round === 0) {
        await load(url, Math.min(5_000, REQUESTS)); // warm up: connections, JIT, scripts loaded
        continue;
      }
      const before = await serverWork(stats);
      const r = await load(url, REQUESTS);
      const work = await serverWork(stats);
      runs[i].push({
        ...r,
        calls: (work.calls - before.calls) / REQUESTS,
        usec: (work.usec - before.usec) / REQUESTS,
      });
      console.error(`round ${round} ${VARIANTS[i][0]}: ${Math.round(runs[i].at(-1).rps)} req/s`);
    }
  }
  VARIANTS.forEach(([variant, what], i) => {
    const sorted = [...runs[i]].sort((a, b) => a.rps - b.rps);
    const mid = sorted[Math.floor(sorted.length / 2)];
    const sum = (f) => runs[i].reduce((n, x) => n + x[f], 0);
    const n = runs[i].length;
    rows.push({ variant, what, rps: mid.rps, lo: sorted[0].rps, hi: sorted.at(-1).rps, p50: mid.p50, p99: mid.p99, ok: sum("ok"), other: sum("other"), calls: sum("calls") / n, usec: sum("usec") / n });
  });
} finally {
  for (const { child } of apps) {
    child.kill();
    await once(child, "exit").catch(() => {});
  }
  stats.disconnect();
  await server.remove();
}
const best = Math.max(...rows.filter((r) => OTHERS.includes(r.variant)).map((r) => r.rps));
console.log(`\nExpress on Node ${process.version}: ${ROUNDS} rounds of ${REQUESTS} requests per app over ${CONNECTIONS} connections, one Redis server with the module, one run`);
console.log("ratio: requests per second over the best of rate-limit-redis and rate-limiter-flexible in this run\n");
console.log("Redis commands and Redis CPU µs per request: from INFO commandstats around each load\n");
console.log("| app | req/s (median) | lowest–highest | ratio | p50 ms | p99 ms | Redis commands / request | Redis µs / request | answered 200 |");
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.what} | ${Math.round(r.rps)} | ${Math.round(r.lo)}–${Math.round(r.hi)} | ${(r.rps / best).toFixed(2)} | ${r.p50} | ${r.p99} | ${r.calls.toFixed(2)} | ${r.usec.toFixed(1)} | ${r.ok}/${r.ok + r.other} |`,
  );
}
if (rows.some((r) => r.other > 0)) {
  console.error("some requests were not answered 200: see the table");
  process.exitCode = 1;
}
