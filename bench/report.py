"""The report of a run: the machine, the tables (terminal and Markdown) and the CSV.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from bench.bulk import BulkResult
from bench.chart import chart
from bench.common import MODES, ROOT, log
from bench.measure import Cell
from bench.plan import Variant
from bench.resp import Client
from bench.rows import BULK, Row
from bench.scale import ScaleResult


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


@dataclass
class Results:
    """Everything a run measured, and what it could not."""

    variants: List[Variant]
    cells: Dict[Tuple[str, str, str, int], Cell]
    # (row, variant, mode) -> why it has no figures
    problems: Dict[Tuple[str, str, str], str]
    memory: Dict[Tuple[str, str], Tuple[float, int]]
    # Rows or parts left out, and why (not failures).
    notes: List[str] = field(default_factory=list)
    bulk: List[BulkResult] = field(default_factory=list)
    # Failures of the bulk, peer and scale parts.
    other_problems: List[str] = field(default_factory=list)
    core: List[Tuple[str, float]] = field(default_factory=list)
    core_err: str = ""
    loads: str = ""
    peers: Optional[dict] = None
    scale: List[ScaleResult] = field(default_factory=list)
    log_cost: list = field(default_factory=list)


class Report:
    def __init__(self, opts, info: Dict[str, str], results: Results):
        self.o, self.info, r = opts, info, results
        self.variants, self.cells, self.problems, self.memory = r.variants, r.cells, r.problems, r.memory
        self.notes, self.bulk, self.bulk_notes = r.notes, r.bulk, r.other_problems
        self.core, self.core_err, self.loads = r.core, r.core_err, r.loads
        self.peers, self.scale, self.log_cost = r.peers, r.scale, r.log_cost
        self.headline = max(opts.pipelines)
        # The floor drawn as a line on the chart: the single-key write's.
        self.floor = next((v for v in self.variants if v.row.name == "FLOOR.FIXED"), None)

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

    def log_table(self) -> List[str]:
        if not self.log_cost:
            return []
        rows = [[f"{r.entries:,}", f"{r.bytes_per_entry:.0f}", fmt_us(r.native_usec), fmt_us(r.twin_usec),
                 fmt_ratio(ratio(r.twin_usec, r.native_usec))] for r in self.log_cost]
        headers = ["Entries in the window", "Bytes/entry", "Native µs/call", "Twin µs/call", "Twin ÷ native"]
        return md_table(headers, rows, [True] * 5)

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
                             ("Scale:", self.scale_table()),
                             ("RL.LOG against its entries:", self.log_table())):
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
            "## Server cost per call (the fair comparison)",
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
        lg = self.log_table()
        if lg:
            out += ["", "## RL.LOG against its entries", "",
                    "Logs of 10 to 10 000 entries (20 of each size, `META` of about 9 bytes), then calls that find "
                    "them full (the denied path reads the most: the count, the newest entry and the oldest that must "
                    "leave, each in O(log n)), pipeline 16: the server's µs per call, native and twin, and "
                    "`MEMORY USAGE` per entry.", "", *lg]
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

