#!/usr/bin/env python3
"""`make bench`: the native commands against their Lua twins, side by side.

Starts a throwaway redis-server (or $REDIS_SERVER) with the module on a free 127.0.0.1
port, in a temporary directory, loads the twins, and for every row of bench/rows.py
drives load with redis-benchmark. For each command it records requests/s, p50 and p99
latency (client side, pipelines 1 and 16) and the server's own cost per call
(`INFO commandstats`), in an allowed mode and a denied mode, as the median of a few
runs; then the memory of one limiter key (`MEMORY USAGE`). It writes a table to the
terminal and to bench/results.md, bench/results.csv and a chart, bench/results.svg.

Only the Python standard library is used. Every run is bounded in requests and time;
the server is killed at the end, also on errors and Ctrl-C.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.dont_write_bytecode = True  # no __pycache__ next to the table

from rows import BULK, FIRST, NUMKEYS, ROWS, Bulk, Row  # noqa: E402

RAND = "__rand_int__"
MODES = ("allowed", "denied")


def log(msg: str = "") -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------- RESP client


class ReplyError(Exception):
    """An error reply from the server."""


class Client:
    """A minimal RESP2 client: enough for setup, checks and pipelined warm-ups."""

    def __init__(self, port: int, timeout: float = 60.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = self.sock.makefile("rb")

    def close(self) -> None:
        try:
            self.rfile.close()
            self.sock.close()
        except OSError:
            pass

    @staticmethod
    def encode(args) -> bytes:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def read(self):
        line = self.rfile.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed by the server")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.rfile.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        raise ConnectionError(f"unexpected reply {line[:40]!r}")

    def pipeline(self, commands) -> list:
        """Send all commands, then read all replies (errors are returned, not raised)."""
        self.sock.sendall(b"".join(self.encode(c) for c in commands))
        return [self.read() for _ in commands]

    def call(self, *args):
        reply = self.pipeline([args])[0]
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def text(self, *args) -> str:
        reply = self.call(*args)
        return reply.decode() if isinstance(reply, bytes) else str(reply)


# --------------------------------------------------------------------------- the server


def die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the benchmark process dies, however."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def cpu_plan(pin: bool) -> Tuple[Optional[set], Optional[set]]:
    """The CPUs of the server and of redis-benchmark: one each, apart, when there are two
    or more (a server and a client that share or swap cores make per-request figures at
    pipeline 1 swing by half)."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return {cpus[0]}, {cpus[1]}


def pinned(cpus: Optional[set], also=None):
    """A preexec_fn that keeps the child on `cpus` (and runs `also` first)."""

    def run() -> None:
        if also:
            also()
        if cpus:
            try:
                os.sched_setaffinity(0, cpus)
            except OSError:
                pass

    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """redis-server with the module on a free loopback port in a temporary directory."""

    def __init__(self, binary: str, module: Path, cpus: Optional[set] = None, extra: Optional[List[Path]] = None):
        self.binary = binary
        self.module = module
        self.extra = extra or []
        self.cpus = cpus
        self.dir = Path(tempfile.mkdtemp(prefix="rl-bench-"))
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0

    def log_text(self) -> str:
        try:
            return (self.dir / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> None:
        last = ""
        for _ in range(5):
            self.port = free_port()
            conf = self.dir / "redis.conf"
            conf.write_text(
                "\n".join(
                    [
                        f"port {self.port}",
                        "bind 127.0.0.1",
                        "protected-mode yes",
                        f"dir {self.dir}",
                        f"logfile {self.dir / 'server.log'}",
                        'save ""',
                        "appendonly no",
                        "enable-debug-command local",
                        f"loadmodule {self.module}",
                        *(f"loadmodule {m}" for m in self.extra),
                        "",
                    ]
                )
            )
            self.proc = subprocess.Popen(
                [self.binary, str(conf)],
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches this script, which stops it
                preexec_fn=pinned(self.cpus, die_with_parent),
            )
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    c = Client(self.port, timeout=2)
                    try:
                        if c.call("PING") == "PONG":
                            return
                    finally:
                        c.close()
                except (OSError, ReplyError):
                    pass
                time.sleep(0.05)
            last = self.log_text()
            self.kill()
        raise RuntimeError(f"{self.binary} did not start; its log:\n{last}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self) -> Client:
        return Client(self.port)


# --------------------------------------------------------------------------- the plan


@dataclass
class Variant:
    """One way of running a row: its native command, its twin or a script."""

    row: Row
    kind: str  # "native", "twin" or "script"
    stat: str  # its name in INFO commandstats (lower case)
    lines: Dict[str, List[str]]  # mode -> argv with __rand_int__ placeholders
    keyspace: Dict[str, int] = field(default_factory=dict)


def parse_line(line: str) -> List[str]:
    return shlex.split(line)


def twin_argv(native: List[str], keys: str, sha: str) -> List[str]:
    """The EVALSHA call of a twin from its native command line: same keys, same rest."""
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
    return ["EVALSHA", sha, str(len(ks)), *ks, *argv]


def command_exists(c: Client, name: str) -> bool:
    reply = c.call("COMMAND", "INFO", name)
    return bool(reply) and reply[0] is not None


def load_script(c: Client, text: str) -> str:
    return c.text("SCRIPT", "LOAD", text)


def build_plan(c: Client, rows: List[Row], keyspace: int, denied_keyspace: int):
    """The variants to run, and a note for every row or part of one left out."""
    variants: List[Variant] = []
    notes: List[str] = []
    prelude_path = ROOT / "lua" / "prelude.lua"
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
                twin_path = ROOT / "lua" / row.twin
                if not twin_path.is_file():
                    notes.append(f"{row.name}: twin skipped, lua/{row.twin} does not exist")
                else:
                    text = prelude_path.read_text() + "\n" + twin_path.read_text()
                    sha = load_script(c, text)
                    tl = {m: twin_argv(a, row.keys, sha) for m, a in lines.items()}
                    variants.append(Variant(row, "twin", "evalsha", tl))
        elif row.script and row.call:
            path = ROOT / row.script
            if not path.is_file():
                notes.append(f"{row.name}: skipped, {row.script} does not exist")
                continue
            sha = load_script(c, path.read_text())
            lines = {"allowed": ["EVALSHA", sha, *parse_line(row.call)]}
            if row.denied:
                lines["denied"] = ["EVALSHA", sha, *parse_line(row.denied)]
            variants.append(Variant(row, "script", "evalsha", lines))
        else:
            notes.append(f"{row.name}: skipped, the row has neither a native command nor a script")
    for v in variants:
        v.keyspace = {"allowed": keyspace, "denied": denied_keyspace}
    return variants, notes


# --------------------------------------------------------------------------- measuring


def concrete(argv: List[str], i: int) -> List[str]:
    """The command line with every placeholder replaced by key number `i`, written as
    redis-benchmark writes it."""
    return [a.replace(RAND, "%012d" % i) for a in argv]


def is_limiter_reply(reply) -> bool:
    return isinstance(reply, list) and len(reply) >= 5 and all(isinstance(x, int) for x in reply[:5])


def fill(c: Client, argv: List[str], keyspace: int, batch: int = 2000) -> Optional[str]:
    """Run the command once on every key of the key space; an error reply is returned."""
    for start in range(0, keyspace, batch):
        replies = c.pipeline([concrete(argv, i) for i in range(start, min(keyspace, start + batch))])
        for r in replies:
            if isinstance(r, ReplyError):
                return str(r)
    return None


def commandstats(c: Client) -> Dict[str, Dict[str, float]]:
    stats = {}
    for line in c.text("INFO", "commandstats").splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, _, fields = line[len("cmdstat_") :].partition(":")
        values = {}
        for kv in fields.split(","):
            k, _, v = kv.partition("=")
            try:
                values[k] = float(v)
            except ValueError:
                pass
        stats[name.lower()] = values
    return stats


@dataclass
class Run:
    rps: float
    p50: float
    p99: float
    usec: float  # server µs per call
    p999: float = 0.0


@dataclass
class Cell:
    """All the runs of one variant, mode and pipeline."""

    runs: List[Run] = field(default_factory=list)
    requests: int = 0
    keyspace: int = 0

    def median(self, attr: str) -> Optional[float]:
        vals = [getattr(r, attr) for r in self.runs]
        return statistics.median(vals) if vals else None


def redis_benchmark(tool: str, port: int, argv: List[str], clients: int, pipeline: int,
                    requests: int, keyspace: int, timeout: float, raw_log,
                    cpus: Optional[set] = None) -> Tuple[Optional[Run], str]:
    cmd = [tool, "-h", "127.0.0.1", "-p", str(port), "-c", str(clients), "-n", str(requests),
           "-r", str(keyspace), "-P", str(pipeline), *argv]
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=pinned(cpus, die_with_parent))
    except subprocess.TimeoutExpired:
        return None, f"redis-benchmark did not finish in {timeout:.0f} s"
    raw_log.write(f"$ {shlex.join(cmd[:13])} {shlex.join(argv)[:200]}\n{p.stdout}{p.stderr}\n")
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return None, f"redis-benchmark failed: {msg[-1] if msg else p.returncode}"
    run = parse_benchmark(p.stdout)
    if run is None:
        return None, f"unexpected redis-benchmark output: {p.stdout[-300:]!r}"
    return run, ""


def parse_benchmark(text: str) -> Optional[Run]:
    """requests/s, p50, p99 and p99.9 (ms) from redis-benchmark's full output: its
    summary, and the first line of its percentile distribution at or above 99.9 %."""
    lines = text.replace("\r", "\n").splitlines()
    rps = p50 = p99 = p999 = None
    in_percentiles = False
    for i, line in enumerate(lines):
        t = line.strip()
        if t.startswith("Latency by percentile distribution"):
            in_percentiles = True
        elif t.startswith("Cumulative distribution"):
            in_percentiles = False
        elif in_percentiles and p999 is None and "% <= " in t:
            try:
                pct, rest = t.split("% <= ", 1)
                if float(pct) >= 99.9:
                    p999 = float(rest.split()[0])
            except (ValueError, IndexError):
                pass
        elif t.startswith("throughput summary:"):
            try:
                rps = float(t.split(":", 1)[1].split()[0])
            except (ValueError, IndexError):
                return None
        elif t.startswith("avg") and "p50" in t and i + 1 < len(lines):
            heads, vals = t.split(), lines[i + 1].split()
            if len(heads) == len(vals):
                rec = dict(zip(heads, vals))
                try:
                    p50, p99 = float(rec["p50"]), float(rec["p99"])
                except (KeyError, ValueError):
                    return None
    if rps is None or p50 is None or p99 is None:
        return None
    return Run(rps, p50, p99, 0.0, p999 if p999 is not None else p99)


class Budget:
    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def run_all(c: Client, server: Server, variants: List[Variant], opts, budget: Budget, raw_log):
    """Every variant, mode and pipeline, `opts.repeat` times, the variants interleaved so
    that a change in the machine's load shows in all of them alike."""
    cells: Dict[Tuple[str, str, str, int], Cell] = {}
    problems: Dict[Tuple[str, str, str], str] = {}
    probes: Dict[Tuple[str, str, str], object] = {}
    for rep in range(opts.repeat):
        for mode in MODES:
            for v in variants:
                if mode not in v.lines or (v.row.name, v.kind, mode) in problems:
                    continue
                key = (v.row.name, v.kind, mode)
                if budget.left() < 0:
                    problems[key] = "time budget spent before this run"
                    continue
                argv, keyspace = v.lines[mode], v.keyspace[mode]
                requests = v.row.requests or opts.requests
                c.call("FLUSHALL")
                err = fill(c, parse_line(v.row.setup), keyspace) if v.row.setup else None
                err = err or fill(c, argv, keyspace)
                if err:
                    problems[key] = f"error reply: {err}"
                    continue
                probe = c.pipeline([concrete(argv, 0)])[0]
                if isinstance(probe, ReplyError):
                    problems[key] = f"error reply: {probe}"
                    continue
                # A limiter's reply says whether the call took the path this mode is for.
                if is_limiter_reply(probe) and probe[0] != (0 if mode == "allowed" else 1):
                    problems[key] = f"expected every call {mode}, got {probe!r}"
                    continue
                probes[key] = probe
                for pipeline in opts.pipelines:
                    c.call("CONFIG", "RESETSTAT")
                    timeout = max(10.0, min(opts.run_timeout, budget.left() + 10))
                    run, err = redis_benchmark(opts.redis_benchmark, server.port, argv, opts.clients,
                                               pipeline, requests, keyspace, timeout, raw_log, opts.client_cpus)
                    if run is None:
                        problems[key] = err
                        break
                    st = commandstats(c).get(v.stat)
                    if not st or st.get("calls", 0) < requests:
                        problems[key] = f"INFO commandstats shows {st and st.get('calls')} {v.stat} calls for {requests} requests"
                        break
                    if st.get("failed_calls", 0) or st.get("rejected_calls", 0):
                        problems[key] = f"{st.get('failed_calls')} failed / {st.get('rejected_calls')} rejected calls"
                        break
                    run.usec = st["usec"] / st["calls"]
                    cell = cells.setdefault((v.row.name, v.kind, mode, pipeline), Cell())
                    cell.runs.append(run)
                    cell.requests, cell.keyspace = requests, keyspace
                    log(f"  run {rep + 1}/{opts.repeat}  {v.row.name:<22} {v.kind:<6} {mode:<7} P{pipeline:<3}"
                        f" {run.rps:>11,.0f} req/s  p50 {run.p50:6.3f} ms  p99 {run.p99:6.3f} ms"
                        f"  {run.usec:7.2f} µs/call")
    # A pair's native command and twin must answer alike on the same state.
    for v in variants:
        if v.kind != "twin":
            continue
        for mode in MODES:
            a = probes.get((v.row.name, "native", mode))
            b = probes.get((v.row.name, "twin", mode))
            if isinstance(a, list) and isinstance(b, list) and a[:3] != b[:3]:
                problems[(v.row.name, "twin", mode)] = f"the twin answered {b!r} where the native command answered {a!r}"
    return cells, problems


def memory_per_key(c: Client, variants: List[Variant]) -> Dict[Tuple[str, str], Tuple[float, int]]:
    """Bytes per key (MEMORY USAGE) after two allowed calls on one key, and how many keys
    one call writes."""
    out = {}
    for v in variants:
        if v.row.setup:
            continue
        argv = concrete(v.lines["allowed"], 0)
        c.call("FLUSHALL")
        replies = c.pipeline([argv, argv])
        if any(isinstance(r, ReplyError) for r in replies):
            continue
        keys = c.call("KEYS", "*")
        if not keys:
            continue
        sizes = [c.call("MEMORY", "USAGE", k, "SAMPLES", "0") or 0 for k in keys]
        out[(v.row.name, v.kind)] = (sum(sizes) / len(sizes), len(keys))
    c.call("FLUSHALL")
    return out


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


def run_bulk(c: Client, bulks: List[Bulk], opts, budget: Budget):
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
        keys = min(b.keys, opts.bulk_keys) if opts.bulk_keys else b.keys
        failed = False
        for rep in range(opts.repeat):
            for kind in ("native", "script"):
                if failed:
                    break
                if budget.left() < 0:
                    problems.append(f"{b.name}: {kind} run {rep + 1} skipped, time budget spent")
                    continue
                c.call("FLUSHALL")
                c.call("DEBUG", "POPULATE", keys, b.prefix, 8)
                c.call("CONFIG", "RESETSTAT")
                res, err = bulk_once(c, b, kind, native, sha, keys, min(opts.bulk_timeout, max(5.0, budget.left())))
                if err:
                    problems.append(f"{b.name}: {kind}: {err}")
                    failed = True
                    break
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
            return None, f"not finished in {timeout:.0f} s"
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


# --------------------------------------------------------------------------- scale

# The commands measured at scale: every key of the key space written first (by a script
# on the server, in batches), windows long enough that none expires during the run.
SCALE_ROWS = [
    ("RL.FIXED", "RL.FIXED rl:scale:__rand_int__ 1000000 1h"),
    ("RL.GCRA", "RL.GCRA rl:scale:__rand_int__ 1000 1 1h"),
]

FILL_SCRIPT = """
local from, to = tonumber(ARGV[1]), tonumber(ARGV[2])
local prefix, suffix = ARGV[3], ARGV[4]
local argv = {}
for i = 5, #ARGV do argv[#argv + 1] = ARGV[i] end
for i = from, to - 1 do
  redis.call(argv[1], prefix .. string.format('%012d', i) .. suffix, unpack(argv, 2))
end
return to - from
"""


@dataclass
class ScaleResult:
    command: str
    keys: int
    bytes_per_key: float
    usec: List[float]
    fill_seconds: float


def used_memory(c: Client) -> int:
    for line in c.text("INFO", "memory").splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":", 1)[1])
    return 0


def run_scale(c: Client, server: Server, opts, budget: Budget, raw_log):
    """Cost per call and memory per key with 10 000 to 10 000 000 live limiter keys."""
    results: List[ScaleResult] = []
    problems: List[str] = []
    sha = load_script(c, FILL_SCRIPT)
    for name, line in SCALE_ROWS:
        argv = parse_line(line)
        if not command_exists(c, argv[0]):
            continue
        key_arg = next(i for i, a in enumerate(argv) if RAND in a)
        prefix, suffix = argv[key_arg].split(RAND, 1)
        rest = argv[:key_arg] + ["{key}"] + argv[key_arg + 1:]
        for keys in opts.scale:
            if budget.left() < 0:
                problems.append(f"scale {name} {keys:,} keys: skipped, time budget spent")
                continue
            c.call("FLUSHALL")
            before = used_memory(c)
            t = time.monotonic()
            batch = 100_000
            for start in range(0, keys, batch):
                c.call("EVALSHA", sha, 0, start, min(keys, start + batch), prefix, suffix,
                       *[a for a in rest if a != "{key}"])
            fill_s = time.monotonic() - t
            n = c.call("DBSIZE")
            if n != keys:
                problems.append(f"scale {name}: {n} keys after writing {keys}")
                continue
            per_key = (used_memory(c) - before) / keys
            usec = []
            for _ in range(opts.repeat):
                c.call("CONFIG", "RESETSTAT")
                run, err = redis_benchmark(opts.redis_benchmark, server.port, argv, opts.clients, 16,
                                           opts.scale_requests, keys, max(10.0, opts.run_timeout), raw_log,
                                           opts.client_cpus)
                st = commandstats(c).get(argv[0].lower())
                if run is None or not st or not st.get("calls"):
                    problems.append(f"scale {name} {keys:,} keys: {err or 'no calls counted'}")
                    break
                usec.append(st["usec"] / st["calls"])
            if usec:
                results.append(ScaleResult(name, keys, per_key, usec, fill_s))
                log(f"  scale {name:<9} {keys:>12,} keys  {per_key:6.1f} bytes/key  "
                    f"{statistics.median(usec):6.2f} µs/call  (written in {fill_s:.1f} s)")
    c.call("FLUSHALL")
    return results, problems


# --------------------------------------------------------------------------- peers


def run_peers(server: Server, opts, raw_dir: Path):
    """bench/peers.py in the virtualenv: the `limits` library against the commands."""
    if not opts.peers_python:
        return None, ["peer rows skipped: no --peers-python (make bench passes the virtualenv's python)"], []
    out = raw_dir / "peers.json"
    out.unlink(missing_ok=True)
    cmd = [opts.peers_python, str(ROOT / "bench" / "peers.py"), "--port", str(server.port), "--out", str(out),
           "--hits", str(opts.peer_hits), "--threads", str(opts.clients)]
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
                           preexec_fn=pinned(opts.client_cpus, die_with_parent))
    except subprocess.TimeoutExpired:
        return None, [], ["peer rows: bench/peers.py did not finish in 600 s"]
    if p.returncode != 0 or not out.is_file():
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["?"]
        return None, [], [f"peer rows: bench/peers.py failed: {tail[0]}"]
    data = json.loads(out.read_text())
    for r in data["results"]:
        log(f"  peer {r['label']:<36} {r['hits_per_s']:>8,.0f} hits/s  "
            f"{(r['server_usec_per_hit'] or 0):6.2f} µs/hit  p99.9 {r['p999_ms'] or 0:.2f} ms")
    return data, [f"peer rows: {n}" for n in data.get("notes", [])], []


# --------------------------------------------------------------------------- criterion


def run_criterion(cargo: str, log_path: Path) -> Tuple[List[Tuple[str, float]], str]:
    """`cargo bench` of the pure crate; its estimates written by this run, in ns."""
    started = time.time()
    with open(log_path, "w") as f:
        p = subprocess.run([cargo, "bench", "-p", "ratelimit-core", "--bench", "algorithms"],
                           cwd=ROOT, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                           timeout=900)
    if p.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-15:]
        return [], "cargo bench failed:\n" + "\n".join(tail)
    return read_criterion(started), ""


def read_criterion(since: float) -> List[Tuple[str, float]]:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "criterion"
    out = []
    for est in sorted(target.glob("*/new/estimates.json")):
        if est.stat().st_mtime < since:
            continue
        try:
            bench_id = json.loads((est.parent / "benchmark.json").read_text())["full_id"]
            ns = json.loads(est.read_text())["median"]["point_estimate"]
        except (OSError, KeyError, ValueError):
            continue
        out.append((bench_id, float(ns)))
    return out


# --------------------------------------------------------------------------- reporting


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def machine_info(c: Client, opts) -> Dict[str, str]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    info = {}
    for line in c.text("INFO", "server").splitlines():
        k, _, v = line.partition(":")
        info[k] = v.strip()
    server = info.get("server_name", "redis")
    version = info.get("valkey_version") or info.get("redis_version", "?")
    commit = "unknown"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src", "core", "lua", "Cargo.toml"],
                               cwd=ROOT).returncode
        if dirty:
            commit += " (with uncommitted changes)"
    except (OSError, subprocess.CalledProcessError):
        pass
    modules = c.call("MODULE", "LIST")
    mod_ver = "?"
    for m in modules or []:
        d = dict(zip(m[::2], m[1::2]))
        if d.get(b"name") == b"ratelimit":
            mod_ver = str(d.get(b"ver"))
    build = "release" if "/release/" in str(opts.module) else "debug" if "/debug/" in str(opts.module) else "?"
    rb = subprocess.run([opts.redis_benchmark, "--version"], capture_output=True, text=True).stdout
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu or platform.processor() or "?",
        "cores": str(os.cpu_count()),
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "server": f"{server} {version} ({info.get('redis_mode', '?')}, {info.get('arch_bits', '?')}-bit, "
                  f"build {info.get('redis_build_id', '?')})",
        "module": f"ratelimit v{mod_ver}, commit {commit}, {build} build",
        "redis_benchmark": first_line(rb) or opts.redis_benchmark,
        "python": platform.python_version(),
    }


def fmt_us(x: Optional[float]) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def fmt_ratio(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.1f}×"


def fmt_int(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:,.0f}"


def fmt_ms(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.3f}"


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a and b else None


def md_table(headers: List[str], rows: List[List[str]], right: List[bool]) -> List[str]:
    """A Markdown table padded to line up in a terminal too."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells):
        return "| " + " | ".join(c.rjust(w) if rt else c.ljust(w) for c, w, rt in zip(cells, widths, right)) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if rt else ("-" * (w + 2)) for w, rt in zip(widths, right)) + "|"
    return [line(headers), sep, *(line(r) for r in rows)]


class Report:
    def __init__(self, opts, info, variants, cells, problems, memory, notes, bulk, bulk_notes, core, core_err,
                 loads, peers=None, scale=None):
        self.o, self.info, self.variants, self.cells = opts, info, variants, cells
        self.problems, self.memory, self.notes = problems, memory, notes
        self.bulk, self.bulk_notes, self.core, self.core_err, self.loads = bulk, bulk_notes, core, core_err, loads
        self.peers, self.scale = peers, scale or []
        self.headline = max(opts.pipelines)
        # The floor drawn as a line on the chart: the single-key write's.
        self.floor = next((v for v in variants if v.row.name == "FLOOR.FIXED"), None)

    def floor_ratio(self, row: Row, mode: str, kind: str = "native") -> Optional[float]:
        """A native command's server cost over its floor's (allowed mode only: a denial
        writes nothing, the floor commands always write)."""
        if not row.floor_of or mode != "allowed":
            return None
        p = self.headline
        return ratio(self.get(row.name, kind, mode, p, "usec"), self.get(row.floor_of, "native", mode, p, "usec"))

    def get(self, row: str, kind: str, mode: str, pipeline: int, attr: str) -> Optional[float]:
        cell = self.cells.get((row, kind, mode, pipeline))
        return cell.median(attr) if cell else None

    def rows_in_order(self) -> List[Row]:
        seen, out = set(), []
        for v in self.variants:
            if v.row.name not in seen:
                seen.add(v.row.name)
                out.append(v.row)
        return out

    def kinds(self, row: Row) -> List[str]:
        return [v.kind for v in self.variants if v.row is row]

    def cost_table(self) -> List[str]:
        p = self.headline
        rows = []
        for row in self.rows_in_order():
            kinds = self.kinds(row)
            for mode in MODES:
                if not any((row.name, k, mode, p) in self.cells for k in kinds):
                    continue
                native = self.get(row.name, "native", mode, p, "usec") if "native" in kinds else None
                other_kind = "twin" if "twin" in kinds else "script" if "script" in kinds else None
                other = self.get(row.name, other_kind, mode, p, "usec") if other_kind else None
                vs_floor = "–"
                if other_kind == "script":
                    base = self.get(row.against, "native", mode, p, "usec") if row.against else None
                    vs = f"{fmt_ratio(ratio(other, base))} {row.against}" if base and other else "–"
                else:
                    vs = fmt_ratio(ratio(other, native))
                    fr = self.floor_ratio(row, mode)
                    if fr:
                        vs_floor = f"{fr:.2f}× {row.floor_of}"
                thr = []
                for pp in self.o.pipelines:
                    a = self.get(row.name, "native", mode, pp, "rps")
                    b = self.get(row.name, other_kind, mode, pp, "rps") if other_kind == "twin" else None
                    thr.append(fmt_ratio(ratio(a, b)))
                mem_n = self.memory.get((row.name, "native"))
                mem_o = self.memory.get((row.name, other_kind)) if other_kind else None
                rows.append([
                    row.name, mode, fmt_us(native),
                    (fmt_us(other) + (" (script)" if other_kind == "script" else "")) if other is not None else "–",
                    vs, vs_floor, " / ".join(thr),
                    f"{mem_n[0]:.0f}" if mem_n else "–", f"{mem_o[0]:.0f}" if mem_o else "–",
                ])
        headers = ["Command", "Mode", "Native µs/call", "Twin µs/call", "Twin ÷ native",
                   "÷ floor", "Native ÷ twin req/s (P" + " / P".join(map(str, self.o.pipelines)) + ")",
                   "Bytes/key native", "Bytes/key twin"]
        return md_table(headers, rows, [False, False, True, True, True, True, True, True, True])

    def throughput_table(self) -> List[str]:
        rows = []
        for row in self.rows_in_order():
            for mode in MODES:
                for kind in self.kinds(row):
                    if not any((row.name, kind, mode, p) in self.cells for p in self.o.pipelines):
                        continue
                    line = [row.name, kind, mode]
                    for p in self.o.pipelines:
                        line += [fmt_int(self.get(row.name, kind, mode, p, "rps")),
                                 fmt_ms(self.get(row.name, kind, mode, p, "p50")),
                                 fmt_ms(self.get(row.name, kind, mode, p, "p99")),
                                 fmt_ms(self.get(row.name, kind, mode, p, "p999")),
                                 fmt_us(self.get(row.name, kind, mode, p, "usec"))]
                    rows.append(line)
        headers = ["Command", "Variant", "Mode"]
        for p in self.o.pipelines:
            headers += [f"P{p} req/s", f"P{p} p50 ms", f"P{p} p99 ms", f"P{p} p99.9 ms", f"P{p} µs/call"]
        return md_table(headers, rows, [False] * 3 + [True] * (5 * len(self.o.pipelines)))

    def floor_table(self) -> List[str]:
        p = self.headline
        rows = []
        for row in self.rows_in_order():
            fr = self.floor_ratio(row, "allowed")
            if fr is None:
                continue
            rows.append([row.name, fmt_us(self.get(row.name, "native", "allowed", p, "usec")), row.floor_of,
                         fmt_us(self.get(row.floor_of, "native", "allowed", p, "usec")), f"{fr:.2f}×",
                         f"≤ {row.target:.2f}×" if row.target else "–",
                         ("within" if fr <= row.target else "above") if row.target else "–"])
        headers = ["Command", "µs/call", "Floor", "Floor µs/call", "Command ÷ floor", "Target", "Result"]
        return md_table(headers, rows, [False, True, False, True, True, True, False]) if rows else []

    def peer_table(self) -> List[str]:
        if not self.peers:
            return []
        res = self.peers["results"]
        native = {r["algorithm"]: r for r in res if r["variant"] == "native"}
        rows = []
        for r in res:
            n = native.get(r["algorithm"])
            us, nus = r["server_usec_per_hit"], n["server_usec_per_hit"] if n else None
            rows.append([r["algorithm"], r["label"], fmt_us(us),
                         fmt_ratio(ratio(us, nus)) if r["variant"] != "native" else "1.0×",
                         " + ".join(f"{v:g} {k}" for k, v in sorted(r["commands_per_hit"].items())),
                         fmt_int(r["hits_per_s"]), fmt_int(r["concurrent_hits_per_s"]),
                         fmt_ms(r["p50_ms"]), fmt_ms(r["p99_ms"]), fmt_ms(r["p999_ms"])])
        t = self.peers["results"][0]["threads"] if res else self.o.clients
        headers = ["Algorithm", "Client", "Server µs/hit", "÷ native", "Commands per hit", "Hits/s (1 client)",
                   f"Hits/s ({t} threads)", "p50 ms", "p99 ms", "p99.9 ms"]
        return md_table(headers, rows, [False, False, True, True, False, True, True, True, True, True])

    def latency_table(self) -> List[str]:
        if 1 not in self.o.pipelines:
            return []
        rows = []
        for row in self.rows_in_order():
            if row.floor:
                continue
            for kind in self.kinds(row):
                if (row.name, kind, "allowed", 1) not in self.cells:
                    continue
                label = {"native": row.name, "twin": f"{row.name} twin", "script": row.name}[kind]
                rows.append([label, kind, *(fmt_ms(self.get(row.name, kind, "allowed", 1, a))
                                             for a in ("p50", "p99", "p999")),
                             fmt_int(self.get(row.name, kind, "allowed", 1, "rps"))])
        headers = ["Command", "Variant", "p50 ms", "p99 ms", "p99.9 ms", "req/s"]
        return md_table(headers, rows, [False, False, True, True, True, True]) if rows else []

    def scale_table(self) -> List[str]:
        if not self.scale:
            return []
        first: Dict[str, float] = {}
        rows = []
        for r in self.scale:
            us = statistics.median(r.usec)
            base = first.setdefault(r.command, us)
            rows.append([r.command, f"{r.keys:,}", f"{r.bytes_per_key:.0f}", fmt_us(us), f"{us / base:.2f}×",
                         f"{r.fill_seconds:.1f}"])
        headers = ["Command", "Live keys", "Bytes/key", "µs/call", "÷ smallest", "Written in s"]
        return md_table(headers, rows, [False, True, True, True, True, True])

    def bulk_table(self) -> List[str]:
        by: Dict[Tuple[str, str], List[BulkResult]] = {}
        for r in self.bulk:
            by.setdefault((r.name, r.kind), []).append(r)
        rows = []
        for b in BULK:
            n = by.get((b.name, "native"))
            s = by.get((b.name, "script"))
            if not n and not s:
                continue

            def med(rs, f):
                return statistics.median(f(r) for r in rs) if rs else None

            kps_n = med(n, lambda r: r.expired / r.seconds)
            kps_s = med(s, lambda r: r.expired / r.seconds)
            rows.append([b.name, f"{(n or s)[0].keys:,}", fmt_int(kps_n), fmt_int(kps_s), fmt_ratio(ratio(kps_n, kps_s)),
                         fmt_us(med(n, lambda r: r.usec_per_call)), fmt_us(med(s, lambda r: r.usec_per_call)),
                         fmt_ms(med(n, lambda r: r.longest_ms)), fmt_ms(med(s, lambda r: r.longest_ms))])
        if not rows:
            return []
        headers = ["Sweep", "Keys", "Native keys/s", "SCAN+EVAL keys/s", "Native ÷ loop", "Native µs/call",
                   "EVAL µs/call", "Longest native call ms", "Longest EVAL ms"]
        return md_table(headers, rows, [False] + [True] * 8)

    def core_table(self) -> List[str]:
        if not self.core:
            return []
        rows = [[name, f"{ns:.1f}"] for name, ns in self.core]
        return md_table(["Benchmark (criterion, fake clock)", "ns (median)"], rows, [False, True])

    def settings(self) -> str:
        o = self.o
        pin = (f"server on CPU {min(o.server_cpus)} and redis-benchmark on CPU {min(o.client_cpus)}, "
               if o.server_cpus and o.client_cpus else "")
        return (f"{pin}{o.clients} clients, pipelines {' and '.join(map(str, o.pipelines))}, "
                f"{o.requests:,} requests per run, keys drawn from {o.keyspace:,} (allowed mode, every key "
                f"written once before the run) or {o.denied_keyspace:,} (denied mode, every key at its limit "
                f"before the run); each figure is the median of {o.repeat} runs")

    def all_notes(self) -> List[str]:
        out = list(self.notes)
        for (row, kind, mode), msg in self.problems.items():
            out.append(f"{row} {kind} ({mode}): no figures, {msg}")
        out += self.bulk_notes
        if self.core_err:
            out.append(self.core_err.splitlines()[0])
        return out

    def terminal(self) -> None:
        i = self.info
        log()
        log(f"Machine: {i['cpu']}, {i['cores']} cores, {i['memory']}, {i['os']}; load average {self.loads}")
        log(f"Server:  {i['server']}")
        log(f"Module:  {i['module']}")
        log(f"Load:    {i['redis_benchmark']}; {self.settings()}")
        log()
        if self.cells:
            log(f"Server cost per call (INFO commandstats, pipeline {self.headline}) and memory per key:")
            for line in self.cost_table():
                log(line)
            log()
            log("Client side (redis-benchmark): requests/s, latency percentiles, and server µs per call:")
            for line in self.throughput_table():
                log(line)
        for title, table in (("Against the floor (allowed mode):", self.floor_table()),
                             ("Latency at pipeline 1:", self.latency_table()),
                             ("Against the limits library (Python clients):", self.peer_table()),
                             ("Scale:", self.scale_table())):
            if table:
                log()
                log(title)
                for line in table:
                    log(line)
        bt = self.bulk_table()
        if bt:
            log()
            log("Bulk TTL:")
            for line in bt:
                log(line)
        ct = self.core_table()
        if ct:
            log()
            log("Pure algorithms:")
            for line in ct:
                log(line)
        notes = self.all_notes()
        if notes:
            log()
            log("Notes:")
            for n in notes:
                log(f"  - {n}")

    def markdown(self) -> str:
        i = self.info
        out = [
            "# Benchmark results",
            "",
            f"Written by `make bench` on {i['date']}. Machine: {i['cpu']}, {i['cores']} cores, {i['memory']}, "
            f"{i['os']}; load average (1, 5, 15 min) {self.loads}.",
            f"Server: {i['server']}. Module: {i['module']}. Load: {i['redis_benchmark']}, {self.settings()}.",
            "",
            f"## Server cost per call (the fair comparison)",
            "",
            f"Microseconds the server spends in one call (`INFO commandstats`, `usec_per_call` of the command, "
            f"or of `evalsha` for a twin), pipeline {self.headline}. *Twin ÷ native*: how many times the native "
            f"command's cost the twin costs (for a script: how many times the cost of the native command named). "
            f"*÷ floor*: the native command's cost over that of the floor module's command for the same shape of "
            f"work (below). "
            f"*Native ÷ twin req/s*: the throughput gain clients see. *Bytes/key*: `MEMORY USAGE` of a key written "
            f"twice.",
            "",
            *self.cost_table(),
            "",
            "![Server cost per call, native commands and their Lua twins](results.svg)",
            "",
            "## Against the floor",
            "",
            "How close each command is to the least a module can spend on the same job: the floor module "
            "(`bench/floor/floor.c`, built and loaded by this run) does only the unavoidable work of each shape "
            "(open the key, read and write the value in place, read and set the absolute expiry, signal the "
            "modified key, send the keyspace event, replicate `SET key value PXAT t`, reply), with no argument "
            "checks and no limiter arithmetic. Allowed mode, pipeline "
            f"{self.headline}. The targets are reported, never asserted.",
            "",
            *(self.floor_table() or ["No floor figures in this run (see the notes)."]),
            "",
            "## Client side",
            "",
            "What redis-benchmark sees: requests per second and latency percentiles (ms) over 50 connections, "
            "with each command sent alone (P1) or 16 at a time (P16), and the server's µs per call of the same runs.",
            "",
            *self.throughput_table(),
        ]
        lt = self.latency_table()
        if lt:
            out += ["", "## Latency as clients see it", "",
                    f"Allowed mode, pipeline 1, {self.o.clients} connections of redis-benchmark: latency percentiles "
                    "of each command and of its twin. On a small machine these are bound by the client and the "
                    "kernel's round trips more than by the server (compare the server cost above).", "", *lt]
        pt = self.peer_table()
        if pt:
            out += ["", "## Against the `limits` library", "",
                    f"The Python `limits` library ({self.peers.get('limit', '')}, keys drawn from "
                    f"{self.peers.get('ids', 0):,} identifiers, every hit allowed) driven through its own API, next to "
                    "the native command and its twin called from the same Python client (redis-py). *Server µs/hit*: "
                    "every command a hit sends (counted on the client) times its `usec_per_call`. *Hits/s (1 "
                    "client)*: one hit after the other. *Threads* and the percentiles: that many threads of one "
                    "Python process hitting at once, each with its own connection: bound by the Python client on "
                    "this machine, they show what a Python application sees.", "", *pt]
        sc = self.scale_table()
        if sc:
            out += ["", "## Scale", "",
                    "Cost per call (pipeline 16, keys drawn from all live keys) and memory per key (`used_memory` "
                    "growth over the keys) with this many live limiter keys, each written once first.", "", *sc]
        bt = self.bulk_table()
        if bt:
            out += ["", "## Giving keys a TTL in bulk", "",
                    "Keys given a TTL per second over a whole key space of keys without one: the native sweep against "
                    "the published loop (SCAN a chunk, then EVAL a script on its keys). *Longest call*: the longest single "
                    "call seen by the client, i.e. how long the server was busy at a stretch.", "", *bt]
        ct = self.core_table()
        if ct:
            out += ["", "## Pure algorithms", "",
                    "Criterion micro-benchmarks of `ratelimit-core` (`make bench-core`): nanoseconds per call, no server, "
                    "a fake clock.", "", *ct]
        about = [f"- **{r.name}**: {r.about}" for r in self.rows_in_order() if r.about]
        if about:
            out += ["", "## Rows", "", *about]
        notes = self.all_notes()
        if notes:
            out += ["", "## Notes", "", *[f"- {n}" for n in notes]]
        return "\n".join(out) + "\n"

    def csv_rows(self) -> List[List[str]]:
        """One line per command, variant, mode and pipeline (medians, then every run), plus
        the bulk sweeps (keys/s) and the criterion figures (µs per call)."""
        rows = [["command", "variant", "mode", "pipeline", "clients", "requests", "keyspace", "runs",
                 "throughput", "throughput_unit", "p50_ms", "p99_ms", "usec_per_call", "bytes_per_key",
                 "keys_per_call", "longest_call_ms", "throughput_runs", "usec_per_call_runs", "p999_ms",
                 "floor", "ratio_to_floor"]]
        for row in self.rows_in_order():
            for mode in MODES:
                for kind in self.kinds(row):
                    for p in self.o.pipelines:
                        cell = self.cells.get((row.name, kind, mode, p))
                        if not cell:
                            continue
                        mem = self.memory.get((row.name, kind))
                        fr = self.floor_ratio(row, mode, kind) if kind == "native" and p == self.headline else None
                        rows.append([row.name, kind, mode, str(p), str(self.o.clients), str(cell.requests),
                                     str(cell.keyspace), str(len(cell.runs)),
                                     f"{cell.median('rps'):.0f}", "requests/s", f"{cell.median('p50'):.3f}",
                                     f"{cell.median('p99'):.3f}", f"{cell.median('usec'):.3f}",
                                     f"{mem[0]:.0f}" if mem else "", str(mem[1]) if mem else "", "",
                                     ";".join(f"{r.rps:.0f}" for r in cell.runs),
                                     ";".join(f"{r.usec:.3f}" for r in cell.runs), f"{cell.median('p999'):.3f}",
                                     row.floor_of if fr else "", f"{fr:.3f}" if fr else ""])
        by: Dict[Tuple[str, str], List[BulkResult]] = {}
        for r in self.bulk:
            by.setdefault((r.name, r.kind), []).append(r)
        for (name, kind), rs in by.items():
            kps = [r.expired / r.seconds for r in rs]
            rows.append([name, kind, "bulk", "1", "1", str(rs[0].calls), str(rs[0].keys), str(len(rs)),
                         f"{statistics.median(kps):.0f}", "keys/s", "", "",
                         f"{statistics.median(r.usec_per_call for r in rs):.3f}", "", "",
                         f"{statistics.median(r.longest_ms for r in rs):.3f}",
                         ";".join(f"{k:.0f}" for k in kps), ";".join(f"{r.usec_per_call:.3f}" for r in rs)])
        for name, ns in self.core:
            rows.append([name, "core", "criterion", "", "", "", "", "", "", "", "", "", f"{ns / 1000:.6f}",
                         "", "", "", "", "", "", "", ""])
        for r in (self.peers or {}).get("results", []):
            rows.append([r["label"], f"peer:{r['variant']}", r["algorithm"], "1", "1", str(r["hits"]), "", "1",
                         f"{r['hits_per_s']:.0f}", "hits/s", f"{r['p50_ms'] or 0:.3f}", f"{r['p99_ms'] or 0:.3f}",
                         f"{r['server_usec_per_hit'] or 0:.3f}", "", "", "", "", "", f"{r['p999_ms'] or 0:.3f}",
                         "", ""])
        for r in self.scale:
            rows.append([r.command, "scale", "allowed", "16", str(self.o.clients), str(self.o.scale_requests),
                         str(r.keys), str(len(r.usec)), "", "", "", "", f"{statistics.median(r.usec):.3f}",
                         f"{r.bytes_per_key:.0f}", "", "", "", ";".join(f"{u:.3f}" for u in r.usec), "", "", ""])
        return rows

    def svg(self) -> str:
        return chart(self)


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


COLORS = {"native": "#1f6fb4", "twin": "#e8822e", "script": "#b39b2f", "plain": "#5a5a5a"}


def chart(r: Report) -> str:
    """Horizontal bars of server µs per call: each command (and mode) with its twin."""
    p = r.headline
    groups: List[Tuple[str, Optional[str], List[Tuple[str, str, float]]]] = []
    for row in r.rows_in_order():
        for mode in MODES:
            bars = []
            for kind in r.kinds(row):
                v = r.get(row.name, kind, mode, p, "usec")
                if v is None:
                    continue
                label = {"native": row.name, "twin": "Lua twin", "script": "Lua script"}[kind]
                bars.append(("plain" if row.floor or row.reference else kind, label, v))
            if bars:
                title = row.name if mode == "allowed" else f"{row.name}, denied"
                groups.append((title, row.against, bars))
    values = sorted(v for _, _, bars in groups for _, _, v in bars)
    if not values:
        return ""
    # Linear scale; a bar far longer than all others is cut, with its value written out.
    top = values[-1]
    if len(values) > 1 and values[-1] > 3 * values[-2]:
        top = values[-2] * 1.3
    # The label column fits the longest title (bold 12 px: about 7.2 px a character).
    longest = max(len(title) for title, _, _ in groups)
    left = max(200, int(7.2 * longest) + 16)
    width, right_pad = 660 + left, 210
    bar_h, gap, group_gap, head = 18, 4, 14, 76
    plot_w = width - left - right_pad
    height = head + sum(len(b) * (bar_h + gap) + group_gap for _, _, b in groups) + 40
    scale = plot_w / top
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">Server cost per call (µs), lower is better</text>',
        f'<text x="{left}" y="40" fill="#555">INFO commandstats, pipeline {p}, median of {r.o.repeat} runs; '
        f'{esc(r.info["cpu"])}, {r.info["cores"]} cores</text>',
    ]
    # Grid lines at round values.
    step = nice_step(top / 5)
    x = 0.0
    while x <= top + 1e-9:
        gx = left + x * scale
        out.append(f'<line x1="{gx:.1f}" y1="{head - 8}" x2="{gx:.1f}" y2="{height - 30}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{gx:.1f}" y="{height - 14}" text-anchor="middle" fill="#666">{x:g}</text>')
        x += step
    y = head
    floor_row = r.floor.row if r.floor else None
    floor = r.get(floor_row.name, "native", "allowed", p, "usec") if floor_row else None
    for title, against, bars in groups:
        base = next((v for k, _, v in bars if k == "native"), None)
        base_name = "native"
        if base is None and against:
            base = r.get(against, "native", "denied" if title.endswith("denied") else "allowed", p, "usec")
            base_name = against
        for i, (kind, label, v) in enumerate(bars):
            w = min(v, top) * scale
            if i == 0:
                out.append(f'<text x="{left - 10}" y="{y + bar_h - 5}" text-anchor="end" font-weight="bold">'
                           f'{esc(title)}</text>')
            else:
                out.append(f'<text x="{left - 10}" y="{y + bar_h - 5}" text-anchor="end" fill="#555">'
                           f'{esc(label)}</text>')
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{COLORS[kind]}">'
                       f'<title>{esc(title)}, {esc(label)}: {v:.2f} µs</title></rect>')
            if v > top:  # a cut bar: a white zigzag near its end
                zx, hh = left + w - 14, bar_h / 2 + 1
                out.append(f'<path d="M{zx:.1f},{y - 1} l4,{hh} l-4,{hh} h5 l4,-{hh} l-4,-{hh} z" fill="#ffffff"/>')
            text = f"{v:.2f} µs"
            if kind in ("twin", "script") and base:
                text += f"  ({v / base:.1f}× {base_name})"
            out.append(f'<text x="{left + w + 6:.1f}" y="{y + bar_h - 5}">{esc(text)}</text>')
            y += bar_h + gap
        y += group_gap
    if floor and floor_row:
        fx = left + floor * scale
        out.append(f'<line x1="{fx:.1f}" y1="{head - 8}" x2="{fx:.1f}" y2="{height - 30}" stroke="#5a5a5a" '
                   f'stroke-dasharray="4 3"/>')
        out.append(f'<text x="{fx + 4:.1f}" y="{height - 34}" fill="#5a5a5a" font-size="11">'
                   f'{esc(floor_row.name)}</text>')
    # Legend, top right.
    lx, ly = left, 52
    for kind, label in (("native", "RL.* command"), ("twin", "its Lua twin"), ("script", "other Lua script"),
                        ("plain", "floor module or plain command")):
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{COLORS[kind]}"/>')
        out.append(f'<text x="{lx + 14}" y="{ly}" fill="#333">{label}</text>')
        lx += 34 + 6.5 * len(label)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def nice_step(raw: float) -> float:
    if raw <= 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


# --------------------------------------------------------------------------- main


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", type=Path, default=ROOT / "target" / "release" / "libredis_ratelimit.so")
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--redis-benchmark", default=os.environ.get("REDIS_BENCHMARK", "redis-benchmark"))
    ap.add_argument("--cargo", default=os.environ.get("CARGO", "cargo"))
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipelines", default="1,16", help="comma-separated (default 1,16)")
    ap.add_argument("--requests", type=int, default=100_000, help="requests per run (default 100000)")
    ap.add_argument("--keyspace", type=int, default=100_000, help="keys of the allowed mode (default 100000)")
    ap.add_argument("--denied-keyspace", type=int, default=1_000, help="keys of the denied mode (default 1000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure, the median is kept (default 3)")
    ap.add_argument("--only", action="append", default=[], help="run only these rows (repeatable)")
    ap.add_argument("--core", action="store_true", help="run the criterion benchmarks of the pure crate first")
    ap.add_argument("--bulk-keys", type=int, default=0, help="cap the keys of the bulk sweeps (default: the table's)")
    ap.add_argument("--budget", type=float, default=480, help="seconds for all server runs; later runs are skipped")
    ap.add_argument("--run-timeout", type=float, default=90, help="seconds for one redis-benchmark run")
    ap.add_argument("--bulk-timeout", type=float, default=120, help="seconds for one bulk sweep")
    ap.add_argument("--no-pin", action="store_true", help="do not keep server and client on separate CPUs")
    ap.add_argument("--out", type=Path, default=ROOT / "bench", help="where results.{md,csv,svg} go")
    ap.add_argument("--scale", default="10000,1000000,10000000",
                    help="live keys for the scale table, comma-separated ('' skips it)")
    ap.add_argument("--scale-requests", type=int, default=200_000, help="requests per scale run (default 200000)")
    ap.add_argument("--peers-python", default=os.environ.get("BENCH_PYTHON"),
                    help="a python with the `limits` library (bench/requirements.txt) for the peer rows")
    ap.add_argument("--peer-hits", type=int, default=20_000, help="hits per peer measurement (default 20000)")
    ap.add_argument("--no-floor", action="store_true", help="do not build and load the floor module")
    o = ap.parse_args()
    o.pipelines = [int(x) for x in o.pipelines.split(",") if x.strip()]
    o.scale = [int(x) for x in o.scale.split(",") if x.strip()]
    return o


def loadavg() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main() -> int:
    opts = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for tool in (opts.redis_server, opts.redis_benchmark):
        if not shutil.which(tool):
            log(f"bench: {tool} not found (Debian/Ubuntu: apt-get install redis-server redis-tools)")
            return 1
    if not opts.module.is_file():
        log(f"bench: no module at {opts.module} (make build)")
        return 1
    rows = [r for r in ROWS if not opts.only or r.name in opts.only]
    raw_dir = opts.out / "out"
    raw_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    load_before = loadavg()

    core, core_err = [], ""
    if opts.core:
        log("bench: criterion benchmarks of ratelimit-core (log in bench/out/criterion.log)")
        core, core_err = run_criterion(opts.cargo, raw_dir / "criterion.log")
        for name, ns in core:
            log(f"  {name:<40} {ns:9.1f} ns")
        if core_err:
            log(core_err)

    extra, floor_notes = [], []
    if not opts.no_floor:
        import floor

        so, why = floor.build(opts.cargo, raw_dir)
        if so:
            extra.append(so)
        else:
            floor_notes.append(f"floor rows: {why}")
            log(f"bench: {why}")

    opts.server_cpus, opts.client_cpus = cpu_plan(not opts.no_pin)
    server_cpus = opts.server_cpus
    server = Server(opts.redis_server, opts.module.resolve(), server_cpus, extra)
    try:
        server.start()
        c = server.client()
        info = machine_info(c, opts)
        log(f"bench: {info['server']} on 127.0.0.1:{server.port} with {opts.module}")
        log(f"bench: {info['cpu']}, {info['cores']} cores; {info['module']}; load average {load_before}")
        variants, notes = build_plan(c, rows, opts.keyspace, opts.denied_keyspace)
        for n in notes:
            log(f"bench: note: {n}")
        budget = Budget(opts.budget)
        with open(raw_dir / "redis-benchmark.log", "w") as raw_log:
            cells, problems = run_all(c, server, variants, opts, budget, raw_log)
        memory = memory_per_key(c, variants)
        bulks = [b for b in BULK if not opts.only or b.name in opts.only]
        bulk, bulk_notes, bulk_problems = run_bulk(c, bulks, opts, budget)
        peers, peer_notes, peer_problems = (None, [], []) if opts.only else run_peers(server, opts, raw_dir)
        scale, scale_problems = ([], []) if opts.only else (None, None)
        if scale is None:
            with open(raw_dir / "redis-benchmark-scale.log", "w") as raw_log:
                scale, scale_problems = run_scale(c, server, opts, budget, raw_log)
        c.close()
    finally:
        server.stop()

    loads = f"{load_before} before, {loadavg()} after"
    report = Report(opts, info, variants, cells, problems, memory, floor_notes + notes + peer_notes, bulk,
                    bulk_notes + bulk_problems + peer_problems + scale_problems, core, core_err, loads,
                    peers, scale)
    report.terminal()
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "results.md").write_text(report.markdown())
    with open(opts.out / "results.csv", "w", newline="") as f:
        csv.writer(f).writerows(report.csv_rows())
    (opts.out / "results.svg").write_text(report.svg())
    log()
    log(f"bench: wrote {opts.out / 'results.md'}, results.csv and results.svg in {time.monotonic() - started:.0f} s")
    return 1 if problems or bulk_problems or peer_problems or scale_problems or core_err or floor_notes else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("bench: interrupted; the server was stopped")
        sys.exit(130)
    except (RuntimeError, OSError, ReplyError, subprocess.SubprocessError) as e:
        log(f"bench: {e}")
        sys.exit(1)
