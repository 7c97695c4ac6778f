// The Node documentation runs as written: every ```js block of docs/clients.md's Node
// section is run against a server with the module (a block that starts an app is served
// on a free port, and requested until it answers 429 with the rate limit headers), a
// ```ts block once tsc has compiled it (a NestJS app), and every example in
// examples/node passes its self-check (--check). They run from a copy inside the
// package, where `redis-native-ratelimit` and the frameworks resolve.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Server, PKG, REPO, freePort, nodeBlocks } from "./helpers.mjs";

const WORK = join(PKG, ".doc-blocks");
let server;
before(async () => {
  server = await Server.start();
  mkdirSync(WORK, { recursive: true });
});
after(async () => {
  await server?.remove();
  rmSync(WORK, { recursive: true, force: true });
});

function run(file, args, env) {
  const child = spawn(process.execPath, [file, ...args], { cwd: WORK, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const done = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, done, output: () => out + err };
}

test("docs/clients.md has a Node section with code blocks", () => {
  assert.ok(nodeBlocks().length >= 4, `found ${nodeBlocks().length}`);
});

describe("the Node section's code blocks", () => {
  for (const block of nodeBlocks()) {
    const serves = /\.listen\(/.test(block.code);
    test(`docs/clients.md:${block.line}${serves ? " (an app, served)" : ""}`, async () => {
      let file = join(WORK, `block-${block.line}.mjs`);
      if (block.lang === "js") writeFileSync(file, block.code + "\n");
      else {
        // TypeScript as a NestJS app is written: CommonJS, with decorators and their metadata.
        const source = join(WORK, `block-${block.line}.cts`);
        writeFileSync(source, block.code + "\n");
        const tsc = join(PKG, "node_modules", "typescript", "bin", "tsc");
        const options = ["--module", "node16", "--moduleResolution", "node16", "--target", "es2022", "--strict", "--skipLibCheck"];
        options.push("--experimentalDecorators", "--emitDecoratorMetadata", "--esModuleInterop", "--types", "node", "--rootDir", WORK, "--outDir", WORK);
        execFileSync(process.execPath, [tsc, ...options, source], { stdio: ["ignore", "inherit", "inherit"] });
        file = join(WORK, `block-${block.line}.cjs`);
      }
      const env = { REDIS_URL: server.url() };
      if (!serves) {
        const r = run(file, [], env);
        const timer = setTimeout(() => r.child.kill(), 60_000);
        const code = await r.done;
        clearTimeout(timer);
        assert.equal(code, 0, r.output());
        return;
      }
      env.PORT = String(await freePort());
      const r = run(file, [], env);
      try {
        let res;
        for (let i = 0; i < 600 && !res; i++) {
          res = await fetch(`http://127.0.0.1:${env.PORT}/`).catch(() => undefined);
          if (!res) await sleep(50);
        }
        assert.ok(res, `the app never answered:\n${r.output()}`);
        let statuses = [res.status];
        let allowed = res;
        while (res.status !== 429 && statuses.length < 200) {
          allowed = res;
          res = await fetch(`http://127.0.0.1:${env.PORT}/`);
          statuses.push(res.status);
        }
        assert.equal(res.status, 429, `statuses ${statuses.join(",")}\n${r.output()}`);
        assert.ok(statuses.length >= 2 && statuses.slice(0, -1).every((s) => s === 200), statuses.join(","));
        assert.ok(res.headers.get("retry-after") !== null, "no Retry-After");
        // The rate limit headers, on the refusal or (@nestjs/throttler) on the allowed requests.
        const fields = ["ratelimit-policy", "ratelimit", "ratelimit-limit", "x-ratelimit-limit"];
        const sent = [...res.headers.keys(), ...allowed.headers.keys()];
        assert.ok(fields.some((f) => sent.includes(f)), `no rate limit headers: ${sent}`);
      } finally {
        r.child.kill();
        await r.done;
      }
    });
  }
});

describe("examples/node", () => {
  const dir = join(REPO, "examples", "node");
  for (const name of readdirSync(dir).filter((f) => f.endsWith(".mjs"))) {
    test(`${name} --check`, async () => {
      const file = join(WORK, name);
      writeFileSync(file, readFileSync(join(dir, name)));
      const r = run(file, ["--check"], { REDIS_URL: server.url() });
      const timer = setTimeout(() => r.child.kill(), 120_000);
      const code = await r.done;
      clearTimeout(timer);
      assert.equal(code, 0, r.output());
      assert.match(r.output(), /self-check passed/);
    });
  }
});
