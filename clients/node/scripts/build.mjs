// Build: embed the twins of the repository's lua/ in the code, and compile to ESM
// (dist/esm) and CommonJS (dist/cjs), with declarations. The twins' text ships once, in
// dist/cjs/lua-sources.generated.js: the ESM build re-exports it from there.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
// The repository's lua/ (a checkout), else a lua/ put next to the package (a copy).
const lua = [join(pkg, "..", "..", "lua"), join(pkg, "lua")].find((dir) => existsSync(join(dir, "ratelimit.lua")));
if (!lua) throw new Error(`no lua/ to build with (looked in ${join(pkg, "..", "..", "lua")} and ${join(pkg, "lua")})`);

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
writeFileSync(
  join(pkg, "dist", "esm", "lua-sources.generated.js"),
  "// The twins' text is in the CommonJS build only, so that the package carries it once.\n" +
    'export { LIBRARY, SCRIPTS } from "../cjs/lua-sources.generated.js";\n',
);
const version = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")).version;
console.log(
  `built redis-native-ratelimit ${version}: dist/esm, dist/cjs (twins from ${lua}: ${Object.keys(sources.scripts).length} scripts, library: ${sources.library ? "yes" : "no"})`,
);
