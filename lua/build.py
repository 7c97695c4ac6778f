#!/usr/bin/env python3
"""Write the self-contained scripts lua/scripts/<function>.lua from the Functions
library lua/ratelimit.lua, their one source.

    python3 lua/build.py            write the scripts
    python3 lua/build.py --check    exit 1 (and say which) when a script is stale

The library is a list of top-level definitions, each `local function name(...)` or
`local NAME = ...` (with the comment lines right above it), and one
`redis.register_function('name', name)` line per function. The script of a function
is the definitions it uses, directly or through others, in the library's order, then
`return name(KEYS, ARGV)`: the same code, so the function and its script give the same
replies, and a script carries nothing its command does not use (a script runs its
definitions again on every call; the library builds them once, at FUNCTION LOAD).

Standard library only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LUA = Path(__file__).resolve().parent
LIBRARY = LUA / "ratelimit.lua"
SCRIPTS = LUA / "scripts"

START = re.compile(r"^local (?:function )?([A-Za-z_]\w*)")
REGISTER = re.compile(r"^redis\.register_function\('(\w+)', (\w+)\)\s*$")
NAME = re.compile(r"[A-Za-z_]\w*")


def code_only(text: str) -> str:
    """The text without comments and string literals (their words are not uses)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def uses(text: str) -> set:
    """The names a definition uses (a name after `.` or `:` is a field, not a use)."""
    code = code_only(text)
    return {m.group(0) for m in NAME.finditer(code) if m.start() == 0 or code[m.start() - 1] not in ".:"}


def parse(source: str):
    """(definitions in order as (name, text), registered functions as (name, variable))."""
    lines = source.split("\n")
    starts = [i for i, line in enumerate(lines) if START.match(line)]
    registered = [REGISTER.match(line).groups() for line in lines if REGISTER.match(line)]
    if not starts:
        raise SystemExit(f"{LIBRARY}: no definitions")
    # A definition takes the comment lines right above it.
    begins = []
    for s in starts:
        b = s
        while b > 0 and lines[b - 1].startswith("--"):
            b -= 1
        begins.append(b)
    defs, seen = [], set()
    for k, s in enumerate(starts):
        end = begins[k + 1] if k + 1 < len(starts) else len(lines)
        name = START.match(lines[s]).group(1)
        if name in seen:
            raise SystemExit(f"{LIBRARY}:{s + 1}: {name} is defined twice at the top level")
        seen.add(name)
        body = lines[begins[k]:end]
        # The registrations are not part of any definition.
        body = [line for line in body if not REGISTER.match(line)]
        defs.append((name, "\n".join(body).rstrip("\n") + "\n"))
    for fname, var in registered:
        if var not in seen:
            raise SystemExit(f"{LIBRARY}: {fname} registers {var}, which is not defined")
    for name, _ in defs:
        if re.match(r"^(rl|cl)_\w+$", name) and name not in dict(registered).values():
            raise SystemExit(f"{LIBRARY}: {name} is a command's function but is not registered")
    return defs, registered


def script(defs, fname: str, var: str) -> str:
    """The self-contained script of one function."""
    names = {name for name, _ in defs}
    deps = {name: (uses(text) & names) - {name} for name, text in defs}
    need, todo = set(), [var]
    while todo:
        n = todo.pop()
        if n not in need:
            need.add(n)
            todo.extend(deps[n])
    command = fname.upper().replace("_", ".", 1)
    head = (
        f"-- {fname}: the Lua twin of {command} as a self-contained script, for EVAL/EVALSHA where\n"
        f"-- FUNCTION is not allowed (nothing to prepend):\n"
        f"--   EVALSHA sha numkeys key [key ...] arg [arg ...]\n"
        f"-- with {command}'s keys and the rest of its arguments in the same order, as\n"
        f"-- `FCALL {fname} ...` of the library lua/ratelimit.lua.\n"
        f"-- Written by lua/build.py from lua/ratelimit.lua: edit that file, then run\n"
        f"-- `python3 lua/build.py` (a test fails when this file is stale).\n"
    )
    body = "\n".join(text for name, text in defs if name in need)
    return head + "\n" + body + "\nreturn " + var + "(KEYS, ARGV)\n"


def outputs() -> dict:
    defs, registered = parse(LIBRARY.read_text(encoding="utf-8"))
    return {SCRIPTS / f"{fname}.lua": script(defs, fname, var) for fname, var in registered}


def main(argv) -> int:
    check = "--check" in argv[1:]
    want = outputs()
    stale = [p for p, text in want.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    extra = sorted(p for p in SCRIPTS.glob("*.lua") if p not in want) if SCRIPTS.is_dir() else []
    if check:
        for p in stale:
            print(f"stale: {p.relative_to(LUA.parent)} (run python3 lua/build.py)", file=sys.stderr)
        for p in extra:
            print(f"not written by the build: {p.relative_to(LUA.parent)} (no such function)", file=sys.stderr)
        return 1 if stale or extra else 0
    SCRIPTS.mkdir(exist_ok=True)
    for p in stale:
        p.write_text(want[p], encoding="utf-8")
        print(f"wrote {p.relative_to(LUA.parent)}")
    for p in extra:
        p.unlink()
        print(f"removed {p.relative_to(LUA.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
