// The type declarations compile against the frameworks' and the clients' own types.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { PKG } from "./helpers.mjs";

test("TypeScript code using the package type-checks (ESM declarations)", () => {
  const tsc = join(PKG, "node_modules", "typescript", "bin", "tsc");
  const r = spawnSync(process.execPath, [tsc, "-p", join(PKG, "test", "types", "tsconfig.json")], { encoding: "utf8", timeout: 120_000 });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
