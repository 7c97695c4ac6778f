// make bench-node: requests per second of one Express app limited by this package (its
// middleware, RL.FIXED and RL.GCRA; express-rate-limit on its store) against the same app
// on express-rate-limit with rate-limit-redis and on rate-limiter-flexible's
// RateLimiterRedis: the same Redis server with the module, the same ioredis client, the
// same load (autocannon, a fixed count of requests), one run, on this machine. Reported
// as ratios to the best of the other libraries measured in the same run; nothing is
// asserted but that every request was answered 200 (the limits are far above the load).
//
//   node bench/express.mjs [--requests N] [--connections C]
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { Server } from "../test/helpers.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const REQUESTS = arg("--requests", 40_000);
const CONNECTIONS = arg("--connections", 16);
const VARIANTS = [
  ["unlimited", "no limiter (the ceiling)"],
  ["redis-ratelimit", "this package's middleware, RL.FIXED"],
  ["redis-ratelimit-gcra", "this package's middleware, RL.GCRA"],
  ["express-rate-limit+redis-ratelimit", "express-rate-limit, this package's store (RL.FIXED)"],
  ["express-rate-limit+rate-limit-redis", "express-rate-limit, rate-limit-redis (INCR + PEXPIRE script)"],
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

function load(url, amount) {
  return autocannon({ url, amount, connections: CONNECTIONS, pipelining: 1 });
}

const server = await Server.start();
const rows = [];
try {
  for (const [variant, what] of VARIANTS) {
    const { child, port } = await startApp(variant, server.port);
    try {
      const url = `http://127.0.0.1:${port}/`;
      await load(url, Math.min(5_000, REQUESTS)); // warm up: connections, JIT, scripts loaded
      const r = await load(url, REQUESTS);
      const ok = r["2xx"];
      const rps = r.requests.total / (r.duration || 1);
      rows.push({ variant, what, rps, p50: r.latency.p50, p99: r.latency.p99, ok, other: r.non2xx + r.errors + r.timeouts });
      console.error(`${variant}: ${Math.round(rps)} req/s (${ok} x 200, ${r.non2xx} other, ${r.errors} errors)`);
    } finally {
      child.kill();
      await once(child, "exit");
    }
  }
} finally {
  await server.remove();
}
const best = Math.max(...rows.filter((r) => OTHERS.includes(r.variant)).map((r) => r.rps));
console.log(`\nExpress on Node ${process.version}, ${REQUESTS} requests per row over ${CONNECTIONS} connections, one Redis server with the module, one run`);
console.log("ratio: requests per second over the best of rate-limit-redis and rate-limiter-flexible in this run\n");
console.log("| app | req/s | ratio | p50 ms | p99 ms | answered 200 |");
console.log("|---|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(`| ${r.what} | ${Math.round(r.rps)} | ${(r.rps / best).toFixed(2)} | ${r.p50} | ${r.p99} | ${r.ok}/${r.ok + r.other} |`);
}
if (rows.some((r) => r.other > 0)) {
  console.error("some requests were not answered 200: see the table");
  process.exitCode = 1;
}
