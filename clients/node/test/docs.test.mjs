// The Node documentation runs as written: every ```js block of docs/clients.md's Node
// section is run against a server with the module (a block that starts an app is served
// on a free port, and requested until it answers 429 with the rate limit headers), and
// every example in examples/node passes its self-check (--check). They run from a copy
// inside the package, where `redis-ratelimit` and the frameworks resolve.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Server, PKG, REPO, freePort } from "./helpers.mjs";

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

/** The ```js blocks of the section of docs/clients.md headed "Node", with their lines. */
export function nodeBlocks() {
  const lines = readFileSync(join(REPO, "docs", "clients.md"), "utf8").split("\n");
  const blocks = [];
  let inNode = false;
  let open = null;
  lines.forEach((line, i) => {
    if (open === null && /^## /.test(line)) inNode = /^## .*\bNode\b/.test(line) && !/Go\b/.test(line);
    if (!inNode && open === null) return;
    if (open === null && /^```(js|javascript|mjs)\s*$/.test(line.trim())) open = { line: i + 1, text: [] };
    else if (open !== null && line.trim() === "```") {
      blocks.push({ line: open.line, code: open.text.join("\n") });
      open = null;
    } else if (open !== null) open.text.push(line);
  });
  return blocks;
}

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
      const file = join(WORK, `block-${block.line}.mjs`);
      writeFileSync(file, block.code + "\n");
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
        while (res.status !== 429 && statuses.length < 200) {
          res = await fetch(`http://127.0.0.1:${env.PORT}/`);
          statuses.push(res.status);
        }
        assert.equal(res.status, 429, `statuses ${statuses.join(",")}\n${r.output()}`);
        assert.ok(statuses.length >= 2 && statuses.slice(0, -1).every((s) => s === 200), statuses.join(","));
        assert.ok(res.headers.get("retry-after") !== null, "no Retry-After");
        assert.ok(res.headers.get("ratelimit-policy") !== null || res.headers.get("ratelimit") !== null, "no rate limit headers");
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
