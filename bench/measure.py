"""Measuring: redis-benchmark runs (requests/s, latency percentiles) with the server's own
cost per call (INFO commandstats), every variant and mode, within a time budget; and the
memory of one limiter key.
"""

from __future__ import annotations

import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from bench.common import MODES, log
from bench.plan import Variant, concrete, parse_line
from bench.resp import Client, ReplyError
from bench.server import Server, die_with_parent, pinned


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

