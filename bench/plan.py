"""The plan of a run: from the rows of bench/rows.py to the command lines to send, each
native command with its twin's EVALSHA call.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Dict, List

from bench.common import RAND, ROOT
from bench.resp import Client
from bench.rows import FIRST, NUMKEYS, Row


@dataclass
class Variant:
    """One way of running a row: its native command, its twin or a script."""

    row: Row
    kind: str  # "native", "twin" or "script"
    stat: str  # its name in INFO commandstats (lower case)
    lines: Dict[str, List[str]]  # mode -> argv with __rand_int__ placeholders
    keyspace: Dict[str, int] = field(default_factory=dict)
    # A script row's script, to write its keys on the server before a run.
    text: str = ""


def parse_line(line: str) -> List[str]:
    return shlex.split(line)


def twin_argv(native: List[str], keys: str, sha: str, call: str = "EVALSHA") -> List[str]:
    """The EVALSHA (or FCALL) call of a twin from its native command line: same keys,
    same rest."""
    rest = native[1:]
    if keys == FIRST:
        ks, argv = rest[:1], rest[1:]
    elif keys == NUMKEYS:
        n = int(rest[0])
        ks, argv = rest[1 : 1 + n], rest[1 + n :]
    elif keys.startswith("from:"):
        i = int(keys.split(":", 1)[1]) - 1
        ks, argv = rest[i:], rest[:i]
    else:
        raise ValueError(f"unknown key position {keys!r}")
    return [call, sha, str(len(ks)), *ks, *argv]


def command_exists(c: Client, name: str) -> bool:
    reply = c.call("COMMAND", "INFO", name)
    return bool(reply) and reply[0] is not None


def load_script(c: Client, text: str) -> str:
    return c.text("SCRIPT", "LOAD", text)


def build_plan(c: Client, rows: List[Row], keyspace: int, denied_keyspace: int):
    """The variants to run, and a note for every row or part of one left out."""
    variants: List[Variant] = []
    notes: List[str] = []
    # The Functions library, once: each twin row runs its function (FCALL) and its
    # script (EVALSHA).
    c.call("FUNCTION", "LOAD", "REPLACE", (ROOT / "lua" / "ratelimit.lua").read_text())
    for row in rows:
        if row.native:
            argv = parse_line(row.native)
            if not command_exists(c, argv[0]):
                notes.append(f"{row.name}: skipped, the loaded module has no {argv[0]} command")
                continue
            lines = {"allowed": argv}
            if row.denied:
                lines["denied"] = parse_line(row.denied)
            variants.append(Variant(row, "native", argv[0].lower(), lines))
            if row.twin:
                twin_path = ROOT / "lua" / "scripts" / f"{row.twin}.lua"
                if not twin_path.is_file():
                    notes.append(f"{row.name}: twin skipped, lua/scripts/{row.twin}.lua does not exist")
                else:
                    fl = {m: twin_argv(a, row.keys, row.twin, "FCALL") for m, a in lines.items()}
                    variants.append(Variant(row, "function", "fcall", fl))
                    sha = load_script(c, twin_path.read_text())
                    tl = {m: twin_argv(a, row.keys, sha) for m, a in lines.items()}
                    variants.append(Variant(row, "twin", "evalsha", tl))
        elif row.script and row.call:
            path = ROOT / row.script
            if not path.is_file():
                notes.append(f"{row.name}: skipped, {row.script} does not exist")
                continue
            text = path.read_text()
            sha = load_script(c, text)
            lines = {"allowed": ["EVALSHA", sha, *parse_line(row.call)]}
            if row.denied:
                lines["denied"] = ["EVALSHA", sha, *parse_line(row.denied)]
            variants.append(Variant(row, "script", "evalsha", lines, text=text))
        else:
            notes.append(f"{row.name}: skipped, the row has neither a native command nor a script")
    for v in variants:
        v.keyspace = {"allowed": keyspace, "denied": denied_keyspace}
    return variants, notes


def concrete(argv: List[str], i: int) -> List[str]:
    """The command line with every placeholder replaced by key number `i`, written as
    redis-benchmark writes it."""
    return [a.replace(RAND, "%012d" % i) for a in argv]

