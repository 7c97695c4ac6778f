// examples/node on a fresh checkout, as a reader runs it: a copy of the repository's
// files (what git has, without anything built), `npm install` in examples/node (which
// builds the package first), then an example against a real server.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Server, REPO } from "./helpers.mjs";

let server;
let checkout;
before(async () => {
  server = await Server.start();
  checkout = mkdtempSync(join(tmpdir(), "rl-node-checkout-"));
});
after(async () => {
  await server?.remove();
  if (checkout) rmSync(checkout, { recursive: true, force: true });
});

test("examples/node on a fresh checkout: npm install builds the package, and the examples run", () => {
  // The files a clone has (tracked, or new and not ignored): no dist/, no node_modules/.
  const files = execFileSync("git", ["ls-files", "-co", "--exclude-standard", "--", "clients/node", "examples/node", "lua"], { cwd: REPO, encoding: "utf8" })
    .split("\n")
    .filter((f) => f && existsSync(join(REPO, f)));
  assert.ok(files.includes("examples/node/package.json"));
  assert.ok(!files.some((f) => f.includes("/dist/") || f.includes("node_modules/")), "the copy must not carry a build");
  for (const f of files) {
    mkdirSync(dirname(join(checkout, f)), { recursive: true });
    cpSync(join(REPO, f), join(checkout, f));
  }
  const examples = join(checkout, "examples", "node");
  const install = spawnSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: examples, encoding: "utf8", timeout: 600_000 });
  assert.equal(install.status, 0, install.stdout + install.stderr);
  for (const example of ["quickstart.mjs", "express_app.mjs"]) {
    const run = spawnSync(process.execPath, [example, "--check"], {
      cwd: examples,
      env: { ...process.env, REDIS_URL: server.url() },
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(run.status, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /self-check passed/);
  }
});
