"""Giving a whole key space a TTL: the native sweep against the published SCAN + EVAL
loop, keys per second and the longest call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List

from bench.common import ROOT, log
from bench.measure import commandstats
from bench.plan import command_exists, load_script, parse_line
from bench.resp import Client
from bench.rows import Bulk


@dataclass
class BulkResult:
    name: str
    kind: str  # "native" or "script"
    keys: int
    seconds: float
    expired: int
    calls: int
    usec_per_call: float
    longest_ms: float
    rep: int = 0


def run_bulk(c: Client, bulks: List[Bulk], opts):
    """Each sweep against its baseline; returns results, notes (left out) and problems."""
    results: List[BulkResult] = []
    notes: List[str] = []
    problems: List[str] = []
    for b in bulks:
        native = parse_line(b.native)
        if not command_exists(c, native[0]):
            notes.append(f"{b.name}: skipped, the loaded module has no {native[0]} command")
            continue
        path = ROOT / b.script
        if not path.is_file():
            notes.append(f"{b.name}: skipped, {b.script} does not exist")
            continue
        sha = load_script(c, path.read_text())
        keys = opts.bulk_keys or b.keys
        failed = False
        for rep in range(opts.repeat):
            # The sweep and the loop in turn, the first of them swapped every other time.
            for kind in ("native", "script") if rep % 2 == 0 else ("script", "native"):
                if failed:
                    break
                c.call("FLUSHALL")
                c.call("DEBUG", "POPULATE", keys, b.prefix, 8)
                c.call("CONFIG", "RESETSTAT")
                res, err = bulk_once(c, b, kind, native, sha, keys, opts.bulk_timeout)
                if err:
                    problems.append(f"{b.name}: {kind} run {rep + 1}: {err}")
                    failed = True
                    break
                res.rep = rep
                results.append(res)
                log(f"  run {rep + 1}/{opts.repeat}  {b.name:<22} {kind:<6} {res.expired:,} keys in {res.seconds:.2f} s"
                    f"  ({res.expired / res.seconds:,.0f} keys/s, longest call {res.longest_ms:.2f} ms)")
    c.call("FLUSHALL")
    return results, notes, problems


def bulk_once(c: Client, b: Bulk, kind: str, native: List[str], sha: str, keys: int, timeout: float):
    cursor, expired, calls, longest = "0", 0, 0, 0.0
    started = time.monotonic()
    while True:
        if time.monotonic() - started > timeout:
            return None, f"not finished in {timeout:.0f} s (--bulk-timeout)"
        if kind == "native":
            t = time.monotonic()
            reply = c.call(*[a.replace("{cursor}", cursor) for a in native])
            longest = max(longest, time.monotonic() - t)
            calls += 1
            cursor = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
            expired += int(reply[2])
        else:
            reply = c.call(*[a.replace("{cursor}", cursor) for a in parse_line(b.scan)])
            cursor = reply[0].decode()
            found = reply[1]
            if found:
                t = time.monotonic()
                done = c.call("EVALSHA", sha, len(found), *found)
                longest = max(longest, time.monotonic() - t)
                calls += 1
                expired += len(done)
        if cursor == "0":
            break
    seconds = time.monotonic() - started
    st = commandstats(c)
    stat = st.get(native[0].lower() if kind == "native" else "evalsha", {})
    usec = stat.get("usec", 0) / stat["calls"] if stat.get("calls") else 0.0
    if expired != keys:
        return None, f"gave a TTL to {expired} of {keys} keys"
    return BulkResult(b.name, kind, keys, seconds, expired, calls, usec, longest * 1000), ""

