/**
 * The Lua twins: the commands as Lua, with the same arguments, replies and state, for
 * servers where the module cannot be loaded. Two forms, tried in this order:
 *
 * - the Functions library `ratelimit` (`lua/ratelimit.lua`), loaded once with FUNCTION
 *   LOAD on every primary and called with FCALL (Redis 7.0+, Valkey 7.2+);
 * - one self-contained script per command (`lua/scripts/rl_fixed.lua`...), run with
 *   EVALSHA (EVAL the first time), where FUNCTION is not allowed.
 *
 * The package carries the repository's `lua/`; `luaDir` (or `$RATELIMIT_LUA_DIR`)
 * points at another copy.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Arg, Key } from "./args.js";
import { LIBRARY, SCRIPTS } from "./lua-sources.generated.js";
import { type Transport, errorText, isReplyError } from "./transport.js";

/** The twin of each function in the older layout (`lua/prelude.lua` + `lua/<file>.lua`). */
export const TWIN_FILES: Record<string, string> = {
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

/** The command has no twin in the Lua sources the package has (RL.SWEEP has none). */
export class TwinUnavailable extends Error {
  override name = "TwinUnavailable";
}

export interface LuaSources {
  /** The Functions library's source (`#!lua name=ratelimit`), if there is one. */
  library: string | null;
  /** One self-contained script per function name. */
  scripts: Record<string, string>;
  where: string;
}

/** The twins in a directory laid out as the repository's `lua/`. */
export function readLuaDir(dir: string): LuaSources {
  const read = (p: string) => (existsSync(p) ? readFileSync(p, "utf8") : null);
  const library = read(join(dir, "ratelimit.lua"));
  const prelude = read(join(dir, "prelude.lua"));
  const scripts: Record<string, string> = {};
  for (const [fn, file] of Object.entries(TWIN_FILES)) {
    const own = read(join(dir, "scripts", `${fn}.lua`));
    if (own !== null) {
      scripts[fn] = own;
      continue;
    }
    const body = read(join(dir, `${file}.lua`));
    if (body !== null && prelude !== null) scripts[fn] = `${prelude}\n${body}`;
  }
  return { library, scripts, where: dir };
}

/** The twins the package was built with, or those of `luaDir` / `$RATELIMIT_LUA_DIR`. */
export function luaSources(luaDir?: string): LuaSources {
  const dir = luaDir ?? process.env.RATELIMIT_LUA_DIR;
  if (dir) return readLuaDir(dir);
  return { library: LIBRARY, scripts: { ...SCRIPTS }, where: "the package's lua/" };
}

const sha1 = (text: string) => createHash("sha1").update(text, "utf8").digest("hex");

function matches(err: unknown, ...patterns: RegExp[]): boolean {
  return isReplyError(err) && patterns.some((p) => p.test(errorText(err)));
}

const NOT_FOUND = /function not found|no such function|ERR Function not found/i;
const NO_FUNCTIONS = /unknown command|unknown subcommand|NOPERM|not allowed|disabled/i;

/** How the twins run on one server (or Cluster): functions first, then scripts. */
export class TwinRunner {
  /** 'functions' once the library answered, 'scripts' once functions were refused. */
  mode: "unknown" | "functions" | "scripts" = "unknown";
  private readonly shas = new Map<string, string>();
  constructor(
    private readonly transport: Transport,
    readonly sources: LuaSources,
  ) {
    if (!sources.library) this.mode = "scripts";
  }

  async run(fn: string, keys: Key[], args: Arg[]): Promise<unknown> {
    const library = this.sources.library ?? "";
    const inLibrary = library.includes(`'${fn}'`) || library.includes(`"${fn}"`);
    if (this.mode !== "scripts" && inLibrary) {
      try {
        const reply = await this.transport.send(["FCALL", fn, keys.length, ...keys, ...args], keys);
        this.mode = "functions";
        return reply;
      } catch (err) {
        if (matches(err, NO_FUNCTIONS)) {
          this.mode = "scripts";
        } else if (!matches(err, NOT_FOUND)) {
          throw err;
        } else if (await this.loadLibrary()) {
          try {
            const reply = await this.transport.send(["FCALL", fn, keys.length, ...keys, ...args], keys);
            this.mode = "functions";
            return reply;
          } catch (again) {
            if (!matches(again, NOT_FOUND)) throw again;
          }
        }
      }
    }
    return this.script(fn, keys, args);
  }

  /** FUNCTION LOAD on every primary; false when the server does not allow it. A library
   * of the name that lacks a function is replaced (an older version of this one). */
  private async loadLibrary(): Promise<boolean> {
    const library = this.sources.library;
    if (!library) return false;
    for (const node of await this.transport.primaries()) {
      try {
        await node.send(["FUNCTION", "LOAD", "REPLACE", library], []);
      } catch (err) {
        if (matches(err, NO_FUNCTIONS)) {
          this.mode = "scripts";
          return false;
        }
        throw err;
      }
    }
    return true;
  }

  private async script(fn: string, keys: Key[], args: Arg[]): Promise<unknown> {
    const source = this.sources.scripts[fn];
    if (source === undefined) {
      throw new TwinUnavailable(`no Lua twin for ${fn} in ${this.sources.where}`);
    }
    let sha = this.shas.get(fn);
    if (sha === undefined) {
      sha = sha1(source);
      this.shas.set(fn, sha);
    }
    try {
      return await this.transport.send(["EVALSHA", sha, keys.length, ...keys, ...args], keys);
    } catch (err) {
      if (!matches(err, /NOSCRIPT/)) throw err;
      return this.transport.send(["EVAL", source, keys.length, ...keys, ...args], keys);
    }
  }
}
