// The package as users get it: `npm pack`, the tarball carries dist/ and every twin of
// lua/, and an app installed from it in a fresh folder (import and require) runs
// against a real server.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, PKG } from "./helpers.mjs";

let server;
let dir;
let tarball;
before(async () => {
  server = await Server.start();
  dir = mkdtempSync(join(tmpdir(), "rl-node-pack-"));
  const out = execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], { cwd: PKG, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const info = JSON.parse(out.slice(out.indexOf("[")))[0];
  tarball = { path: join(dir, info.filename), files: info.files.map((f) => f.path) };
});
after(async () => {
  await server?.remove();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the tarball carries dist/ (ESM, CommonJS, declarations) and every twin in lua/", () => {
  const files = new Set(tarball.files);
  const repoLua = join(PKG, "..", "..", "lua");
  const twins = ["ratelimit.lua", ...readdirSync(join(repoLua, "scripts")).map((f) => `scripts/${f}`)];
  assert.ok(twins.length > 5, twins.join(","));
  for (const f of twins) {
    assert.ok(files.has(`lua/${f}`), `lua/${f} missing from the tarball`);
  }
  for (const entry of ["index", "express", "fastify", "express-rate-limit"]) {
    for (const f of [`dist/esm/${entry}.js`, `dist/esm/${entry}.d.ts`, `dist/cjs/${entry}.js`, `dist/cjs/${entry}.d.ts`]) {
      assert.ok(files.has(f), `${f} missing from the tarball`);
    }
  }
  assert.ok(files.has("dist/cjs/package.json"));
  assert.ok(![...files].some((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("node_modules/")));
});

test("an app installed from the tarball in a fresh folder runs, with import and with require", () => {
  const app = join(dir, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", private: true }));
  // The same versions as the package's own tests, from npm's cache when it has them.
  const lock = JSON.parse(readFileSync(join(PKG, "package-lock.json"), "utf8")).packages;
  const v = (name) => `${name}@${lock[`node_modules/${name}`].version}`;
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball.path, v("ioredis"), v("express")], {
    cwd: app,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const esm = `
import { Redis } from "ioredis";
import express from "express";
import { Gcra, RateLimiter } from "redis-ratelimit";
import { rateLimit } from "redis-ratelimit/express";
const redis = new Redis(process.env.REDIS_URL);
const app = express();
app.use(rateLimit({ client: redis, policy: new Gcra({ maxBurst: 1, count: 1, period: "1h" }) }));
app.get("/", (req, res) => res.send("hello"));
const server = app.listen(0, "127.0.0.1", async () => {
  const url = "http://127.0.0.1:" + server.address().port + "/";
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await fetch(url)).status);
  const twin = await new RateLimiter(redis, { twins: true }).fixed("pack:twin", 2, "1m");
  console.log(JSON.stringify({ statuses, twin: twin.remaining }));
  server.close();
  redis.disconnect();
});
`;
  const cjs = `
const { RateLimiter } = require("redis-ratelimit");
const { RateLimitStore } = require("redis-ratelimit/express-rate-limit");
const { rateLimit } = require("redis-ratelimit/express");
const { Redis } = require("ioredis");
const redis = new Redis(process.env.REDIS_URL);
new RateLimiter(redis).gcra("pack:cjs", 0, 1, "1m").then((r) => {
  console.log(JSON.stringify({ allowed: r.allowed, store: typeof RateLimitStore, mw: typeof rateLimit }));
  redis.disconnect();
});
`;
  writeFileSync(join(app, "app.mjs"), esm);
  writeFileSync(join(app, "app.cjs"), cjs);
  const env = { ...process.env, REDIS_URL: server.url() };
  const run = (file) => {
    const r = spawnSync(process.execPath, [file], { cwd: app, env, encoding: "utf8", timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout.trim().split("\n").pop());
  };
  assert.deepEqual(run("app.mjs"), { statuses: [200, 200, 429], twin: 1 });
  assert.deepEqual(run("app.cjs"), { allowed: true, store: "function", mw: "function" });
});
