// The package's types as a TypeScript user meets them: every code block of
// docs/clients.md's Node section, taken as TypeScript, and every example in
// examples/node, checked as the JavaScript it is (checkJs, its JSDoc types), compile with
// tsc (strict) under both module resolutions users have, node16 (the `exports` map) and
// node10 (`main`, `types` and `typesVersions`), against the frameworks' and the clients'
// own types; so does test/types/usage.ts, and what must not compile does not
// (test/types/wrong.ts, each line marked @ts-expect-error).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PKG, REPO, nodeBlocks } from "./helpers.mjs";

const WORK = join(PKG, ".typecheck");
const RESOLUTIONS = {
  node16: { module: "node16", moduleResolution: "node16", ext: ".mts" },
  node10: { module: "esnext", moduleResolution: "node10", ext: ".ts" },
};

/** The sources to check: name -> [text, "ts" (TypeScript) or "js" (checked JavaScript)]. */
function sources() {
  const out = {};
  for (const block of nodeBlocks()) out[`docs-clients-md-${block.line}`] = [block.code, "ts"];
  const examples = join(REPO, "examples", "node");
  for (const name of readdirSync(examples).filter((f) => f.endsWith(".mjs"))) {
    out[`example-${name.replace(/\.mjs$/, "")}`] = [readFileSync(join(examples, name), "utf8"), "js"];
  }
  for (const name of ["usage", "wrong"]) out[`types-${name}`] = [readFileSync(join(PKG, "test", "types", `${name}.ts`), "utf8"), "ts"];
  return out;
}

before(() => {
  rmSync(WORK, { recursive: true, force: true });
  // The package as an app's dependency: node_modules/redis-native-ratelimit is the
  // package itself, so that node10 resolution (which has no self-reference) finds it.
  mkdirSync(join(WORK, "node_modules"), { recursive: true });
  symlinkSync(PKG, join(WORK, "node_modules", "redis-native-ratelimit"), "dir");
});
after(() => rmSync(WORK, { recursive: true, force: true }));

test("the docs' blocks and the examples are found", () => {
  const names = Object.keys(sources());
  assert.ok(names.filter((n) => n.startsWith("docs-")).length >= 6, names.join(", "));
  assert.ok(names.filter((n) => n.startsWith("example-")).length >= 4, names.join(", "));
});

for (const [resolution, r] of Object.entries(RESOLUTIONS)) {
  test(`tsc 5.9 --strict, moduleResolution ${resolution}: the docs, the examples and the types compile`, () => {
    const dir = join(WORK, resolution);
    mkdirSync(dir, { recursive: true });
    const files = [];
    for (const [name, [text, lang]] of Object.entries(sources())) {
      const file = join(dir, name + (lang === "js" ? ".mjs" : r.ext));
      writeFileSync(file, text);
      files.push(file);
    }
    // The examples' own package.json (type: module) is the app's.
    copyFileSync(join(REPO, "examples", "node", "package.json"), join(dir, "package.json"));
    const config = {
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2022"],
        module: r.module,
        moduleResolution: r.moduleResolution,
        strict: true,
        allowJs: true,
        checkJs: true,
        noEmit: true,
        skipLibCheck: true,
        esModuleInterop: true,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
        types: ["node"],
        typeRoots: [join(PKG, "node_modules", "@types")],
      },
      files,
    };
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(config, null, 2));
    const tsc = join(PKG, "node_modules", "typescript", "bin", "tsc");
    const version = spawnSync(process.execPath, [tsc, "--version"], { encoding: "utf8" }).stdout.trim();
    assert.match(version, /^Version 5\.9\./);
    const out = spawnSync(process.execPath, [tsc, "-p", join(dir, "tsconfig.json")], { encoding: "utf8", timeout: 300_000 });
    assert.equal(out.status, 0, out.stdout + out.stderr);
  });
}
