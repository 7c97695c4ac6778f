// The package as users get it: `npm pack`, the tarball carries dist/ (every entry point,
// ESM and CommonJS, with declarations) and the twins of lua/ once, its package.json says
// where it comes from and what it works with, and an app installed from it in a fresh
// folder (import and require) runs against a real server.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync, readFileSync } from "node:fs";
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

test("the tarball carries dist/ (ESM, CommonJS, declarations) and the twins once", () => {
  const files = new Set(tarball.files);
  for (const entry of ["index", "express", "fastify", "express-rate-limit", "nestjs"]) {
    for (const f of [`dist/esm/${entry}.js`, `dist/esm/${entry}.d.ts`, `dist/cjs/${entry}.js`, `dist/cjs/${entry}.d.ts`]) {
      assert.ok(files.has(f), `${f} missing from the tarball`);
    }
  }
  assert.ok(files.has("dist/cjs/package.json"));
  assert.ok(![...files].some((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("node_modules/") || f.startsWith("lua/")));
  // Each twin (the Functions library, and each command's script) is in one file only.
  const unpacked = join(dir, "unpacked");
  mkdirSync(unpacked);
  execFileSync("tar", ["-xzf", tarball.path, "-C", unpacked]);
  const texts = tarball.files.map((f) => readFileSync(join(unpacked, "package", f), "utf8"));
  const repoLua = join(PKG, "..", "..", "lua");
  const markers = ["redis.register_function('rl_fixed', rl_fixed)", ...readdirSync(join(repoLua, "scripts")).map((f) => `return ${f.replace(/\.lua$/, "")}(KEYS, ARGV)`)];
  assert.ok(markers.length > 5, markers.join(","));
  for (const marker of markers) {
    const holders = tarball.files.filter((_, i) => texts[i].includes(marker));
    assert.deepEqual(holders, ["dist/cjs/lua-sources.generated.js"], marker);
  }
});

test("package.json: the name, where it comes from, and the peer dependencies it declares", () => {
  const pkg = JSON.parse(readFileSync(join(PKG, "package.json"), "utf8"));
  assert.equal(pkg.name, "redis-native-ratelimit");
  assert.deepEqual(pkg.repository, {
    type: "git",
    url: "git+https://github.com/redis-ratelimit/redis-ratelimit.git",
    directory: "clients/node",
  });
  // Every optional peer is a peer: npm warns about a version that does not fit.
  assert.deepEqual(Object.keys(pkg.peerDependencies).sort(), Object.keys(pkg.peerDependenciesMeta).sort());
  for (const name of ["ioredis", "redis", "express-rate-limit", "@nestjs/throttler"]) {
    assert.ok(pkg.peerDependencies[name], name);
    assert.equal(pkg.peerDependenciesMeta[name].optional, true, name);
  }
  // Under the older module resolution (node10), the subpaths resolve through typesVersions.
  for (const entry of ["express", "fastify", "express-rate-limit", "nestjs"]) {
    assert.deepEqual(pkg.typesVersions["*"][entry], [`dist/cjs/${entry}.d.ts`]);
    assert.ok(pkg.exports[`./${entry}`], entry);
  }
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
import { Gcra, RateLimiter } from "redis-native-ratelimit";
import { rateLimit } from "redis-native-ratelimit/express";
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
const { RateLimiter } = require("redis-native-ratelimit");
const { RateLimitStore } = require("redis-native-ratelimit/express-rate-limit");
const { rateLimit } = require("redis-native-ratelimit/express");
const { RateLimitThrottlerStorage } = require("redis-native-ratelimit/nestjs");
const { Redis } = require("ioredis");
const redis = new Redis(process.env.REDIS_URL);
new RateLimiter(redis).gcra("pack:cjs", 0, 1, "1m").then((r) => {
  console.log(JSON.stringify({ allowed: r.allowed, store: typeof RateLimitStore, mw: typeof rateLimit, nest: typeof RateLimitThrottlerStorage }));
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
  assert.deepEqual(run("app.cjs"), { allowed: true, store: "function", mw: "function", nest: "function" });
});
