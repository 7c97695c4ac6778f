// Build: copy the repository's lua/ into the package (it ships it), embed the twins in
// the code, and compile to ESM (dist/esm) and CommonJS (dist/cjs), with declarations.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const repoLua = join(pkg, "..", "..", "lua");
const lua = join(pkg, "lua");
if (existsSync(join(repoLua, "prelude.lua")) || existsSync(join(repoLua, "ratelimit.lua"))) {
  rmSync(lua, { recursive: true, force: true });
  // The twins themselves: not their sources (lua/src/), nor the published scripts kept
  // as benchmark baselines, nor the build.
  const skipped = [join(repoLua, "published"), join(repoLua, "src")];
  cpSync(repoLua, lua, { recursive: true, filter: (src) => !skipped.some((s) => src.startsWith(s)) && !src.endsWith(".py") });
}
if (!existsSync(lua)) throw new Error(`no lua/ to build with (looked in ${repoLua})`);

const { readLuaDir } = await import("./lua-dir.mjs");
const sources = readLuaDir(lua);
writeFileSync(
  join(pkg, "src", "lua-sources.generated.ts"),
  "// Made by scripts/build.mjs from lua/: the twins the package runs.\n" +
    `export const LIBRARY: string | null = ${JSON.stringify(sources.library)};\n` +
    `export const SCRIPTS: Record<string, string> = ${JSON.stringify(sources.scripts, null, 1)};\n`,
);

rmSync(join(pkg, "dist"), { recursive: true, force: true });
const tsc = join(pkg, "node_modules", "typescript", "bin", "tsc");
execFileSync(process.execPath, [tsc, "-p", join(pkg, "tsconfig.json")], { stdio: "inherit" });
execFileSync(process.execPath, [tsc, "-p", join(pkg, "tsconfig.cjs.json")], { stdio: "inherit" });
mkdirSync(join(pkg, "dist", "cjs"), { recursive: true });
writeFileSync(join(pkg, "dist", "cjs", "package.json"), '{ "type": "commonjs" }\n');
const version = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")).version;
console.log(`built redis-ratelimit ${version}: dist/esm, dist/cjs, lua/ (${Object.keys(sources.scripts).length} scripts, library: ${sources.library ? "yes" : "no"})`);
