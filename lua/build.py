#!/usr/bin/env python3
"""Assemble the Lua twins from their sources in lua/src/: the Functions library
lua/ratelimit.lua and the self-contained scripts lua/scripts/<function>.lua.

    python3 lua/build.py            write them
    python3 lua/build.py --check    exit 1 (and say which) when one is stale

The sources:

- lua/src/<part>.lua, the shared part, in the order of SHARED_BEFORE (what every
  limiter uses: bounds, errors, argument readers, key readers, the one loop of a call,
  the command shapes) and SHARED_AFTER (what is made of every limiter: RL.ALL; and
  RL.BULKEXPIRE);
- lua/src/limiters/<kind>.lua, one file per limiter, found here (no list to edit): the
  file defines the limiter's table `local <KIND> = ...` (its `kind = '<KIND>'`) and the
  functions of its commands (`local function rl_<command>(keys, args)`). The files come
  in the order of their names, as the module's limiters do (core/build.rs), so that
  RL.ALL's rules are listed in the same order; a file may use the names of the files
  before it (RL.MULTI uses RL.FIXED's window).

The build adds RULES (RL.ALL's rules by keyword, every limiter's table) and RULE_KINDS
(their keywords in order), and registers every function `rl_*` or `cl_*` defined at
the top level of a source (`redis.register_function`).

The library is the sources one after the other. Each source is a list of top-level
definitions, each `local function name(...)` or `local NAME = ...` with the comment
lines right above it; the script of a function is the definitions it uses, directly or
through others, in the library's order, then `return name(KEYS, ARGV)`: the same code,
so the function and its script give the same replies, and a script carries nothing its
command does not use (a script runs its definitions again on every call; the library
builds them once, at FUNCTION LOAD). In the library LIBRARY is true, in a script false:
the library remembers what it has parsed from one call to the next, a script cannot.

A script makes its definitions on every call, so the build writes it for speed, with the
same code: the numeric constants (`local NAME = 123`) are written in place of their
names, and the definitions marked `-- Cold` (errors, rare paths, the library's memory:
their comment's first line starts so), with what only they use, are made one by one
when a call first reads them: they are read as COLD.<name>, and COLD makes a definition
on the first read of its name (the other definitions are made, as before, when the
script starts, and are declared first so that COLD can use them).

Standard library only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LUA = Path(__file__).resolve().parent
SRC = LUA / "src"
SCRIPTS = LUA / "scripts"

# The shared part, in the library's order: before the limiters, and after them.
SHARED_BEFORE = ["bounds", "errors", "args", "keys", "call", "commands", "windows"]
SHARED_AFTER = ["all", "bulkexpire"]

START = re.compile(r"^local (?:function )?([A-Za-z_]\w*)")
FUNCTION = re.compile(r"^local function ((?:rl|cl)_\w+)\(keys, args\)")
NAME = re.compile(r"[A-Za-z_]\w*")
KIND = re.compile(r"\bkind = '([A-Z]+)'")

HEADER = """\
#!lua name=ratelimit
-- redis-ratelimit: the Lua twins of the RL.* commands, as one Redis Functions library.
--
--   redis-cli FUNCTION LOAD REPLACE "$(cat lua/ratelimit.lua)"
--   redis-cli FCALL rl_gcra 1 rl:user:42 2 1 10s
--
-- One function per command:
{functions}
-- with the command's keys as the function's keys, the rest of its arguments in the same
-- order; the same replies, error texts and state as the command, so the two can be
-- mixed on one key. The self-contained scripts in lua/scripts/ (one per function, for
-- EVAL/EVALSHA where FUNCTION is not allowed) are made from the same sources.
--
-- Written by lua/build.py from lua/src/ (the shared part, then one file per limiter in
-- lua/src/limiters/): edit those, then run `python3 lua/build.py` (a test fails when
-- this file is stale). docs/lua-twins.md describes the layout.
--
-- Lua numbers are doubles: every integer here stays below 2^53, where they are exact,
-- as the module's counts do (at most 2^53 - 1), so both give the same replies and errors.
"""


def uses(text: str) -> set:
    """The names a definition uses (a name after `.` or `:` is a field, not a use)."""
    return {name for _, name in identifiers(masked(text))}


def masked(text: str) -> str:
    """The text with its comments and string literals blanked out (same length, same
    lines): what is left is code."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c in "'\"":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                if out[k] != "\n":
                    out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def identifiers(code: str):
    """The identifiers of masked code that are names, not fields: (start, name)."""
    for m in NAME.finditer(code):
        a = m.start()
        if a > 0 and (code[a - 1] == ":" or (code[a - 1] == "." and (a < 2 or code[a - 2] != "."))):
            continue
        if a > 0 and (code[a - 1].isdigit()):
            continue
        yield a, m.group(0)


DECLARED = re.compile(r"\blocal\s+(?:function\s+)?([A-Za-z_][\w\s,]*)|\bfor\s+([A-Za-z_][\w\s,]*?)\s+(?:=|in)\b"
                      r"|\bfunction\b[\w\s.:]*\(([^)]*)\)")


def declared(code: str) -> set:
    """The names a piece of masked code declares: locals, loop variables, parameters."""
    names = set()
    for m in DECLARED.finditer(code):
        for group in m.groups():
            if group:
                names.update(w for w in re.split(r"[\s,]+", group) if w and w != "...")
    return names


def rewrite(text: str, replace: dict, where: str) -> str:
    """The text with each use of a name of `replace` replaced (strings and comments kept);
    an error when the text declares such a name or assigns it."""
    code = masked(text)
    mine = declared(code) & set(replace)
    if mine:
        fail(f"{where}: declares {', '.join(sorted(mine))}, a name the build replaces in scripts")
    out, last = [], 0
    for a, name in identifiers(code):
        if name in replace:
            rest = code[a + len(name):].lstrip(" ")
            if rest.startswith("=") and not rest.startswith("=="):
                fail(f"{where}: assigns {name}, a name the build replaces in scripts")
            out.append(text[last:a])
            out.append(replace[name])
            last = a + len(name)
    out.append(text[last:])
    return "".join(out)


CONSTANT = re.compile(r"^local ([A-Z][A-Z0-9_]*) = ([0-9][0-9 *+/()-]*?|true|false)\s*(--.*)?$")
COLD = re.compile(r"^-- Cold\b")


def check_single_definition(text: str, where: str):
    """A definition is one statement: after its first line, a line at the left margin only
    closes it (`end`, `}`...) or is a comment."""
    for line in text.rstrip("\n").split("\n")[1:]:
        if line and not line[0].isspace() and not re.match(r"^(--|end\b|\}|\)|value = )", line):
            fail(f"{where}: a statement at the top level after the definition: {line!r}")


def constant_value(expr: str):
    """The value of a constant's expression of integer literals (+ - * /, exact), as
    Lua source; None when it is not one."""
    expr = expr.strip()
    if expr in ("true", "false"):
        return f"({expr})"
    if not re.fullmatch(r"[0-9 *+/()-]+", expr):
        return None
    from fractions import Fraction
    value = eval(re.sub(r"(\d+)", r"Fraction(\1)", expr), {"Fraction": Fraction})
    if value.denominator != 1:
        fail(f"the constant {expr} is not an integer")
    return str(value.numerator)


class Source:
    """One source file: its text and its top-level definitions [(name, text)]."""

    def __init__(self, path: Path, text: str):
        self.path, self.text = path, text
        if re.search(r"\[=*\[", masked(text)):
            fail(f"{self.where()}: long brackets ([[ ]]) are not read by the build: use quotes and --")
        self.defs = definitions(path, text)
        self.names = [name for name, _ in self.defs]

    def where(self) -> str:
        return str(self.path.relative_to(LUA.parent)) if self.path.is_absolute() else str(self.path)


def definitions(path, source: str):
    """The top-level definitions of a source, in order, as (name, text): each from the
    comment lines right above its first line to the next definition's."""
    lines = source.rstrip("\n").split("\n")
    starts = [i for i, line in enumerate(lines) if START.match(line)]
    begins = []
    for s in starts:
        b = s
        while b > 0 and lines[b - 1].startswith("--"):
            b -= 1
        begins.append(b)
    defs = []
    for k, s in enumerate(starts):
        end = begins[k + 1] if k + 1 < len(starts) else len(lines)
        body = lines[begins[k]:end]
        while body and body[-1] == "":
            body.pop()
        defs.append((START.match(lines[s]).group(1), "\n".join(body) + "\n"))
    return defs


def fail(msg: str):
    raise SystemExit(f"lua/build.py: {msg}")


def read_sources(src: Path = SRC):
    """The sources in the library's order, the generated ones included, and the
    limiters as [(kind, source)]."""
    limiters_dir = src / "limiters"
    listed = set(SHARED_BEFORE + SHARED_AFTER)
    for p in sorted(src.glob("*.lua")):
        if p.stem not in listed:
            fail(f"{p}: a shared source the build does not list (SHARED_BEFORE or SHARED_AFTER)")

    def shared(name):
        p = src / f"{name}.lua"
        if not p.is_file():
            fail(f"{p}: missing (listed in build.py)")
        return Source(p, p.read_text(encoding="utf-8"))

    limiters = []
    for p in sorted(limiters_dir.glob("*.lua")):
        s = Source(p, p.read_text(encoding="utf-8"))
        kinds = KIND.findall(s.text)
        if len(kinds) != 1:
            fail(f"{s.where()}: a limiter's file declares its table's kind = '<KIND>', once")
        kind = kinds[0]
        if kind not in s.names:
            fail(f"{s.where()}: declares kind = '{kind}' but does not define `local {kind} = ...`")
        if kind.lower() != p.stem:
            fail(f"{s.where()}: the file of the limiter {kind} is lua/src/limiters/{kind.lower()}.lua")
        limiters.append((kind, s))
    kinds = [kind for kind, _ in limiters]
    rules = Source(Path("(RL.ALL's rules, written by the build)"), (
        "-- RL.ALL's rules by keyword: every limiter of lua/src/limiters/; and their keywords in\n"
        "-- order (the error of an unknown rule lists them).\n"
        f"local RULES = {{ {', '.join(f'{k} = {k}' for k in kinds)} }}\n"
        f"local RULE_KINDS = {{ {', '.join(repr(k) for k in kinds)} }}\n"))
    sources = ([shared(n) for n in SHARED_BEFORE] + [s for _, s in limiters] + [rules]
               + [shared(n) for n in SHARED_AFTER])
    # Every name is defined once, before the sources that use it.
    defined = {}
    for s in sources:
        for name in s.names:
            if name in defined:
                fail(f"{s.where()}: {name} is also defined in {defined[name].where()}")
            defined[name] = s
    order = {id(s): i for i, s in enumerate(sources)}
    for s in sources:
        for name, text in s.defs:
            for used in uses(text):
                other = defined.get(used)
                if other is not None and order[id(other)] > order[id(s)]:
                    fail(f"{s.where()}: {name} uses {used}, which {other.where()} defines later"
                         " (a limiter's file may use only those whose names come before its own)")
    return sources, limiters


def functions(sources):
    """The functions to register: (name, source) for each `local function rl_*(keys,
    args)` or `cl_*` at the top level, in the library's order."""
    found = []
    for s in sources:
        for line in s.text.split("\n"):
            m = FUNCTION.match(line)
            if m:
                found.append((m.group(1), s))
    if not found:
        fail("no function to register")
    return found


def library(sources, fns) -> str:
    import textwrap
    listed = textwrap.wrap(", ".join(f for f, _ in fns), 84, initial_indent="--   ", subsequent_indent="--   ")
    parts = [HEADER.format(functions="\n".join(listed))]
    parts.append("-- True in the library, false in a script (lua/build.py writes both).\nlocal LIBRARY = true\n")
    for s in sources:
        parts.append(f"-- {s.where()}\n\n{s.text.rstrip()}\n")
    parts.append(
        "-- The functions, one per command: FCALL <name> numkeys key [key ...] arg [arg ...],\n"
        "-- with the command's keys and the rest of its arguments in the same order. Each is\n"
        "-- also a script of its own, lua/scripts/<name>.lua (EVALSHA sha numkeys ...).\n"
        + "".join(f"redis.register_function('{f}', {f})\n" for f, _ in fns))
    return "\n".join(parts)


def script(sources, fname: str) -> str:
    """The self-contained script of one function."""
    defs = [("LIBRARY", "-- A script remembers nothing from one call to the next.\nlocal LIBRARY = false\n")]
    for s in sources:
        defs += s.defs
    names = {name for name, _ in defs}
    deps = {name: (uses(text) & names) - {name} for name, text in defs}
    cold_marked = {name for name, text in defs if COLD.match(text)}

    def closure(start, through):
        found, todo = set(), [start]
        while todo:
            n = todo.pop()
            if n not in found:
                found.add(n)
                if through(n):
                    todo.extend(deps[n])
        return found

    need = closure(fname, lambda n: True)
    # What the common call makes: the definitions reached without going through a cold one.
    hot = {n for n in closure(fname, lambda n: n not in cold_marked) if n not in cold_marked}
    cold = need - hot
    # The numeric constants, written in place of their names.
    replace = {}
    for name, text in defs:
        if name in need:
            line = [l for l in text.split("\n") if l.startswith("local ")][0]
            m = CONSTANT.match(rewrite(line, replace, name))
            if m and text.rstrip("\n").split("\n")[-1] == line:
                replace[name] = constant_value(m.group(2))
    where = f"lua/scripts/{fname}.lua"
    kept = [(name, text) for name, text in defs if name in need and name not in replace]
    hot_defs = [(n, t) for n, t in kept if n in hot]
    cold_defs = [(n, t) for n, t in kept if n in cold]
    body = []
    replace_cold = dict(replace, **{n: f"COLD.{n}" for n, _ in cold_defs})
    if cold_defs:
        # Each cold definition is made on the first read of its name in COLD (and stored
        # there): its text, with `local function name(` or `local name =` made the value
        # of a branch, and the other cold names read from COLD too.
        branches = []
        for k, (n, t) in enumerate(cold_defs):
            t, made = re.subn(r"^local (?:function (\w+)\(|(\w+) = )",
                              lambda m: "value = function(" if m.group(1) else "value = ", t, count=1, flags=re.M)
            if not made:
                fail(f"{where}: {n} is not a `local function` or `local NAME =` definition")
            t = rewrite(t, replace_cold, f"{where} ({n})")
            check_single_definition(t, f"{where} ({n})")
            lines = "\n".join(("      " + l) if l else l for l in t.rstrip("\n").split("\n"))
            branches.append(f"    {'if' if k == 0 else 'elseif'} name == '{n}' then\n{lines}\n")
        body.append(
            "-- The definitions a call uses only on an error or a rare path: each is made on the first\n"
            "-- read of COLD.<its name>.\n"
            f"local {', '.join(['COLD'] + [n for n, _ in hot_defs])}\n"
            "COLD = {\n"
            "  __index = function(cold, name)\n"
            "    local value\n"
            + "".join(branches) +
            "    end\n"
            "    rawset(cold, name, value)\n"
            "    return value\n"
            "  end,\n"
            "}\n"
            "setmetatable(COLD, COLD)\n")
        for n, t in hot_defs:
            t = rewrite(t, replace_cold, f"{where} ({n})")
            t = re.sub(r"^local (function )?(" + re.escape(n) + r")\b", r"\1\2", t, count=1, flags=re.M)
            body.append(t)
    else:
        body += [rewrite(t, replace, f"{where} ({n})") for n, t in hot_defs]
    command = fname.upper().replace("_", ".", 1)
    head = (
        f"-- {fname}: the Lua twin of {command} as a self-contained script, for EVAL/EVALSHA where\n"
        f"-- FUNCTION is not allowed (nothing to prepend):\n"
        f"--   EVALSHA sha numkeys key [key ...] arg [arg ...]\n"
        f"-- with {command}'s keys and the rest of its arguments in the same order, as\n"
        f"-- `FCALL {fname} ...` of the library lua/ratelimit.lua.\n"
        f"-- Written by lua/build.py from lua/src/: edit those files, then run\n"
        f"-- `python3 lua/build.py` (a test fails when this file is stale).\n"
    )
    return head + "\n" + "\n".join(body) + "\nreturn " + fname + "(KEYS, ARGV)\n"


def outputs(src: Path = SRC, lua: Path = LUA) -> dict:
    """Every file the build writes, by path: the library and the scripts."""
    sources, _ = read_sources(src)
    fns = functions(sources)
    out = {lua / "ratelimit.lua": library(sources, fns)}
    for fname, _ in fns:
        out[lua / "scripts" / f"{fname}.lua"] = script(sources, fname)
    return out


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
