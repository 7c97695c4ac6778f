// The twins of a directory laid out as the repository's lua/ (the same reading as
// src/twins.ts's readLuaDir, for the build).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const TWIN_FILES = {
  rl_fixed: "fixed",
  rl_gcra: "gcra",
  rl_multi: "multi",
  rl_sliding: "sliding",
  rl_log: "log",
  rl_all: "all",
  rl_lease: "lease",
  rl_release: "release",
  rl_bulkexpire: "bulkexpire",
  cl_throttle: "throttle",
};

export function readLuaDir(dir) {
  const read = (p) => (existsSync(p) ? readFileSync(p, "utf8") : null);
  const library = read(join(dir, "ratelimit.lua"));
  const prelude = read(join(dir, "prelude.lua"));
  const scripts = {};
  for (const [fn, file] of Object.entries(TWIN_FILES)) {
    const own = read(join(dir, "scripts", `${fn}.lua`));
    if (own !== null) {
      scripts[fn] = own;
      continue;
    }
    const body = read(join(dir, `${file}.lua`));
    if (body !== null && prelude !== null) scripts[fn] = `${prelude}\n${body}`;
  }
  return { library, scripts };
}
