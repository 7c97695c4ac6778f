// One name for the package wherever it is named: npm's `redis-native-ratelimit` (npm's
// and PyPI's `redis-ratelimit` are not ours to use), in package.json, the docs, the
// README files, the examples, the tests and the benchmark; the project itself keeps the
// name redis-ratelimit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PKG, REPO, nodeBlocks } from "./helpers.mjs";

const NAME = "redis-native-ratelimit";
/** The old name used as the package's: imported, required, installed, packed, documented. */
const OLD = [
  /(from|import\(|require\()\s*["'`]redis-ratelimit(\/[a-z-]+)?["'`]/,
  /["']redis-ratelimit["']\s*:/, // a dependency
  /npm (package|install) `?redis-ratelimit\b/,
  /redis-ratelimit-\d+\.\d+\.\d+\.tgz/,
  /^# redis-ratelimit for Node/m,
];

function files() {
  const listed = execFileSync("git", ["ls-files", "-co", "--exclude-standard", "--", "clients/node", "examples/node", "docs", "README.md", "CONTRIBUTING.md"], {
    cwd: REPO,
    encoding: "utf8",
  });
  return listed.split("\n").filter((f) => f && !f.endsWith("package-lock.json") && /\.(m?js|ts|json|md)$/.test(f));
}

test("package.json, the lockfiles and the examples' dependency name the package redis-native-ratelimit", () => {
  const pkg = JSON.parse(readFileSync(join(PKG, "package.json"), "utf8"));
  assert.equal(pkg.name, NAME);
  const lock = JSON.parse(readFileSync(join(PKG, "package-lock.json"), "utf8"));
  assert.equal(lock.name, NAME);
  assert.equal(lock.packages[""].name, NAME);
  const examples = JSON.parse(readFileSync(join(REPO, "examples", "node", "package.json"), "utf8"));
  assert.equal(examples.dependencies[NAME], "file:../../clients/node");
});

test("the docs, the READMEs, the examples, the tests: no other name for the package", () => {
  const problems = [];
  for (const file of files()) {
    const text = readFileSync(join(REPO, file), "utf8");
    for (const pattern of OLD) {
      const m = pattern.exec(text);
      if (m) problems.push(`${file}: ${m[0]}`);
    }
  }
  assert.deepEqual(problems, []);
  const imports = nodeBlocks().flatMap((b) => [...b.code.matchAll(/from "(redis-[a-z-]+)(\/[a-z-]+)?"/g)].map((m) => m[1]));
  assert.ok(imports.length >= 6, imports.join(","));
  assert.deepEqual([...new Set(imports)], [NAME]);
  for (const file of ["README.md", "docs/clients.md", "clients/node/README.md", "CONTRIBUTING.md"]) {
    assert.ok(readFileSync(join(REPO, file), "utf8").includes(NAME), file);
  }
});
