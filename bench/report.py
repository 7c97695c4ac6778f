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
from bench.common import MODES, ROOT, Phases, log
from bench.measure import Cell, Measured, paired
from bench.plan import Variant
from bench.resp import Client
from bench.rows import BULK, Row
from bench.scale import ScaleResult


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or an empty string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def machine_info(c: Client, opts) -> Dict[str, str]:
    cpu = cpu_model()
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


Spread = Optional[Tuple[float, float, float]]  # (median, min, max)

# What a cell says when only the long run measures its figure.
FULL = "bench-full"


def fmt_us(x: Optional[float]) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def fmt_ratio(x: Optional[float]) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}×" if x < 2 else f"{x:.1f}×"


def fmt_int(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:,.0f}"


def fmt_ms(x: Optional[float]) -> str:
    return "–" if x is None else f"{x:.3f}"


def with_range(s: Spread, f) -> str:
    """The median, then the min–max of the runs: `2.44 (2.40–2.51)`."""
    if s is None:
        return "–"
    med, lo, hi = s
    if f(lo) == f(hi):
        return f(med)
    return f"{f(med)} ({f(lo).rstrip('×')}–{f(hi)})"


def us_range(s: Spread) -> str:
    return with_range(s, fmt_us)


def ratio_range(s: Spread) -> str:
    return with_range(s, fmt_ratio)


def pm(s: Spread, f) -> str:
    """The median and half the min–max range of the runs, in percent: `288,184 ±3%`."""
    if s is None:
        return "–"
    med, lo, hi = s
    if not med:
        return f(med)
    return f"{f(med)} ±{(hi - lo) / 2 / med * 100:.0f}%"


def spread_of(vals: List[float]) -> Spread:
    vals = [v for v in vals if v is not None]
    return (statistics.median(vals), min(vals), max(vals)) if vals else None


def index_ratios(a: List[float], b: List[float]) -> Spread:
    """a[i] ÷ b[i] for the runs of the same repetition."""
    return spread_of([x / y for x, y in zip(a, b) if x and y])


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
    measured: Measured
    memory: Dict[Tuple[str, str], Tuple[float, int]]
    # Rows or parts left out on purpose, and why (not failures).
    notes: List[str] = field(default_factory=list)
    bulk: List[BulkResult] = field(default_factory=list)
    # Every part without figures, and why: the run fails.
    failures: List[str] = field(default_factory=list)
    core: List[tuple] = field(default_factory=list)  # (name, ns, low, high)
    loads: str = ""
    peers: Optional[dict] = None
    scale: List[ScaleResult] = field(default_factory=list)
    log_cost: list = field(default_factory=list)
    # The tables of bench/extra.py (RL.ALL against the three commands, RL.LOG's COST and
    # longest calls, CL.THROTTLE against redis-cell), and redis-cell's raw results.
    sections: list = field(default_factory=list)
    cell: Optional[object] = None
    phases: Optional[Phases] = None


CSV_HEADER = ["command", "variant", "mode", "pipeline", "clients", "requests", "keyspace", "runs",
              "throughput", "throughput_unit", "p50_ms", "p99_ms", "usec_per_call", "bytes_per_key",
              "keys_per_call", "longest_call_ms", "throughput_runs", "usec_per_call_runs", "p999_ms",
              "floor", "ratio_to_floor", "ratio_to_floor_min", "ratio_to_floor_max",
              "throughput_min", "throughput_max", "p50_ms_min", "p50_ms_max", "p99_ms_min", "p99_ms_max",
              "p999_ms_min", "p999_ms_max", "usec_per_call_min", "usec_per_call_max",
              "ratio_to", "ratio", "ratio_min", "ratio_max", "seconds"]


def csv_line(**kv) -> List[str]:
    def f(v):
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    return [f(kv.get(h)) for h in CSV_HEADER]


class Report:
    def __init__(self, opts, info: Dict[str, str], results: Results):
        self.o, self.info, self.r = opts, info, results
        self.variants, self.memory = results.variants, results.memory
        self.cells = results.measured.cells
        self.headline = max(opts.pipelines + opts.denied_pipelines)
        # The floor drawn as a line on the chart: the single-key write's.
        self.floor = next((v for v in self.variants if v.row.name == "FLOOR.FIXED"), None)

    # --- figures -------------------------------------------------------------------

    def cell(self, row: str, kind: Optional[str], mode: str, pipeline: int) -> Optional[Cell]:
        return self.cells.get((row, kind, mode, pipeline)) if kind else None

    def get(self, row: str, kind: Optional[str], mode: str, pipeline: int, attr: str) -> Optional[float]:
        cell = self.cell(row, kind, mode, pipeline)
        return cell.median(attr) if cell else None

    def sp(self, row: str, kind: Optional[str], mode: str, pipeline: int, attr: str) -> Spread:
        cell = self.cell(row, kind, mode, pipeline)
        return cell.spread(attr) if cell else None

    def not_run(self, mode: str, pipeline: int) -> str:
        """What a cell says when this run does not measure that pipeline in that mode."""
        measured = self.o.pipelines if mode == "allowed" else self.o.denied_pipelines
        if pipeline in measured:
            return "–"
        return FULL if not self.o.full else "–"

    def other_kind(self, row: Row) -> Optional[str]:
        kinds = self.kinds(row)
        if "function" in kinds:
            return "function"
        return "twin" if "twin" in kinds else "script" if "script" in kinds else None

    def vs(self, row: Row, mode: str, pipeline: int, attr: str = "usec") -> Tuple[Spread, Optional[str]]:
        """The twin's (or script's) figure over the native command's, per repetition,
        and what it is over."""
        other = self.other_kind(row)
        if other in ("function", "twin"):
            return paired(self.cell(row.name, other, mode, pipeline), self.cell(row.name, "native", mode, pipeline),
                          attr), "native"
        if other == "script" and row.against:
            return paired(self.cell(row.name, "script", mode, pipeline),
                          self.cell(row.against, "native", mode, pipeline), attr), row.against
        return None, None

    def floor_ratio(self, row: Row, mode: str) -> Spread:
        """A native command's server cost over its floor's, per repetition (allowed mode
        only: a denial writes nothing, the floor commands always write)."""
        if not row.floor_of or mode != "allowed":
            return None
        p = self.headline
        return paired(self.cell(row.name, "native", mode, p), self.cell(row.floor_of, "native", mode, p), "usec")

    def rows_in_order(self) -> List[Row]:
        seen, out = set(), []
        for v in self.variants:
            if v.row.name not in seen:
                seen.add(v.row.name)
                out.append(v.row)
        return out

    def kinds(self, row: Row) -> List[str]:
        return [v.kind for v in self.variants if v.row is row]

    # --- tables --------------------------------------------------------------------

    def cost_table(self) -> List[str]:
        p = self.headline
        rows = []
        for row in self.rows_in_order():
            kinds = self.kinds(row)
            for mode in MODES:
                if not any((row.name, k, mode, p) in self.cells for k in kinds):
                    continue
                other_kind = self.other_kind(row)
                native = self.sp(row.name, "native", mode, p, "usec") if "native" in kinds else None
                other = self.sp(row.name, other_kind, mode, p, "usec")
                vs, over = self.vs(row, mode, p)
                vs_text = ratio_range(vs) if vs else "–"
                if vs and over != "native":
                    vs_text += f" {over}"
                fr = self.floor_ratio(row, mode)
                vs_floor = f"{ratio_range(fr)} {row.floor_of}" if fr else "–"
                thr = []
                for pp in self.o.pipelines:
                    if other_kind not in ("function", "twin"):
                        thr.append("–")
                    elif (row.name, "native", mode, pp) not in self.cells:
                        thr.append(self.not_run(mode, pp))
                    else:
                        thr.append(ratio_range(paired(self.cell(row.name, "native", mode, pp),
                                                      self.cell(row.name, other_kind, mode, pp), "rps")))
                mem_n = self.memory.get((row.name, "native"))
                mem_o = self.memory.get((row.name, other_kind)) if other_kind else None
                script = self.sp(row.name, "twin", mode, p, "usec") if other_kind == "function" else None
                if other_kind == "script":
                    other, script = None, other
                rows.append([
                    row.name, mode, us_range(native),
                    us_range(other) if other else "–",
                    us_range(script) if script else "–",
                    vs_text, vs_floor, " / ".join(thr),
                    f"{mem_n[0]:.0f}" if mem_n else "–", f"{mem_o[0]:.0f}" if mem_o else "–",
                ])
        headers = ["Command", "Mode", "Native µs/call", "Lua function µs/call", "Lua script µs/call",
                   "Function ÷ native", "÷ floor",
                   "Native ÷ function req/s (P" + " / P".join(map(str, self.o.pipelines)) + ")",
                   "Bytes/key native", "Bytes/key twin"]
        return md_table(headers, rows, [False, False, True, True, True, True, True, True, True, True])

    def lua_table(self) -> List[str]:
        """Each twin's function and script against the hand-written script of the same
        job and reply (the rows named "<command> hand-written script"), and the native
        command against the function: same run, run by run."""
        p = self.headline
        rows = []
        for row in self.rows_in_order():
            hand = f"{row.name} hand-written script"
            if "function" not in self.kinds(row):
                continue
            for mode in MODES:
                hw = self.cell(hand, "script", mode, p)
                fn = self.cell(row.name, "function", mode, p)
                if fn is None:
                    continue
                sc = self.cell(row.name, "twin", mode, p)
                nat = self.cell(row.name, "native", mode, p)
                rows.append([
                    row.name, mode, us_range(self.sp(hand, "script", mode, p, "usec")) if hw else "–",
                    ratio_range(paired(fn, hw, "usec")) if hw else "–",
                    ratio_range(paired(sc, hw, "usec")) if hw and sc else "–",
                    ratio_range(paired(nat, fn, "usec")) if nat else "–",
                ])
        headers = ["Command", "Mode", "Hand-written µs/call", "Function ÷ hand-written",
                   "Script ÷ hand-written", "Native ÷ function"]
        return md_table(headers, rows, [False, False, True, True, True, True])

    def throughput_table(self) -> List[str]:
        pipelines = sorted(set(self.o.pipelines) | set(self.o.denied_pipelines))
        rows = []
        for row in self.rows_in_order():
            for mode in MODES:
                for kind in self.kinds(row):
                    if not any((row.name, kind, mode, p) in self.cells for p in pipelines):
                        continue
                    line = [row.name, kind, mode]
                    for p in pipelines:
                        if (row.name, kind, mode, p) not in self.cells:
                            line += [self.not_run(mode, p)] + ["–"] * 4
                            continue
                        line += [pm(self.sp(row.name, kind, mode, p, "rps"), fmt_int),
                                 pm(self.sp(row.name, kind, mode, p, "p50"), fmt_ms),
                                 pm(self.sp(row.name, kind, mode, p, "p99"), fmt_ms),
                                 pm(self.sp(row.name, kind, mode, p, "p999"), fmt_ms),
                                 pm(self.sp(row.name, kind, mode, p, "usec"), fmt_us)]
                    rows.append(line)
        headers = ["Command", "Variant", "Mode"]
        for p in pipelines:
            headers += [f"P{p} req/s", f"P{p} p50 ms", f"P{p} p99 ms", f"P{p} p99.9 ms", f"P{p} µs/call"]
        return md_table(headers, rows, [False] * 3 + [True] * (5 * len(pipelines)))

    def floor_table(self) -> List[str]:
        p = self.headline
        rows = []
        for row in self.rows_in_order():
            fr = self.floor_ratio(row, "allowed")
            if fr is None:
                continue
            rows.append([row.name, us_range(self.sp(row.name, "native", "allowed", p, "usec")), row.floor_of,
                         us_range(self.sp(row.floor_of, "native", "allowed", p, "usec")), ratio_range(fr),
                         f"≤ {row.target:.2f}×" if row.target else "–",
                         ("within" if fr[0] <= row.target else "above") if row.target else "–"])
        headers = ["Command", "µs/call", "Floor", "Floor µs/call", "Command ÷ floor", "Target", "Result"]
        return md_table(headers, rows, [False, True, False, True, True, True, False]) if rows else []

    def peer_table(self) -> List[str]:
        if not self.r.peers:
            return []
        res = self.r.peers["results"]
        native = {r["algorithm"]: r for r in res if r["variant"] == "native"}
        rows = []
        for r in res:
            n = native.get(r["algorithm"])
            us = spread_of(r["server_usec_per_hit_runs"])
            vs = (index_ratios(r["server_usec_per_hit_runs"], n["server_usec_per_hit_runs"])
                  if n and r["variant"] != "native" else None)
            rows.append([r["algorithm"], r["label"], us_range(us),
                         ratio_range(vs) if r["variant"] != "native" else "1×",
                         " + ".join(f"{v:g} {k}" for k, v in sorted(r["commands_per_hit"].items())),
                         pm(spread_of(r["hits_per_s_runs"]), fmt_int), fmt_int(r["concurrent_hits_per_s"]),
                         fmt_ms(r["p50_ms"]), fmt_ms(r["p99_ms"]), fmt_ms(r["p999_ms"])])
        t = res[0]["threads"] if res else self.o.clients
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
                label = {"native": row.name, "function": f"{row.name} function", "twin": f"{row.name} twin", "script": row.name}[kind]
                rows.append([label, kind, *(pm(self.sp(row.name, kind, "allowed", 1, a), fmt_ms)
                                             for a in ("p50", "p99", "p999")),
                             pm(self.sp(row.name, kind, "allowed", 1, "rps"), fmt_int)])
        headers = ["Command", "Variant", "p50 ms", "p99 ms", "p99.9 ms", "req/s"]
        return md_table(headers, rows, [False, False, True, True, True, True]) if rows else []

    def log_table(self) -> List[str]:
        if not self.r.log_cost:
            return []
        rows = [[f"{r.entries:,}", f"{r.bytes_per_entry:.0f}", us_range(spread_of(r.native_usec)),
                 us_range(spread_of(r.twin_usec)), ratio_range(index_ratios(r.twin_usec, r.native_usec))]
                for r in self.r.log_cost]
        headers = ["Entries in the window", "Bytes/entry", "Native µs/call", "Twin µs/call", "Twin ÷ native"]
        return md_table(headers, rows, [True] * 5)

    def scale_table(self) -> List[str]:
        if not self.r.scale:
            return []
        first: Dict[str, ScaleResult] = {}
        rows = []
        for r in self.r.scale:
            base = first.setdefault(r.command, r)
            rows.append([r.command, f"{r.keys:,}", f"{r.bytes_per_key:.0f}", us_range(spread_of(r.usec)),
                         ratio_range(index_ratios(r.usec, base.usec)), f"{r.fill_seconds:.1f}"])
        headers = ["Command", "Live keys", "Bytes/key", "µs/call", "÷ smallest", "Written in s"]
        return md_table(headers, rows, [False, True, True, True, True, True])

    def bulk_by(self) -> Dict[Tuple[str, str], List[BulkResult]]:
        by: Dict[Tuple[str, str], List[BulkResult]] = {}
        for r in self.r.bulk:
            by.setdefault((r.name, r.kind), []).append(r)
        return by

    def bulk_table(self) -> List[str]:
        by = self.bulk_by()
        rows = []
        for b in BULK:
            n = by.get((b.name, "native"), [])
            s = by.get((b.name, "script"), [])
            if not n and not s:
                continue
            kps_n = {r.rep: r.expired / r.seconds for r in n}
            kps_s = {r.rep: r.expired / r.seconds for r in s}
            vs = spread_of([kps_n[i] / kps_s[i] for i in kps_n if i in kps_s])
            rows.append([b.name, f"{(n or s)[0].keys:,}", pm(spread_of(list(kps_n.values())), fmt_int),
                         pm(spread_of(list(kps_s.values())), fmt_int), ratio_range(vs),
                         us_range(spread_of([r.usec_per_call for r in n])),
                         us_range(spread_of([r.usec_per_call for r in s])),
                         fmt_ms(max((r.longest_ms for r in n), default=None)),
                         fmt_ms(max((r.longest_ms for r in s), default=None))])
        if not rows:
            return []
        headers = ["Sweep", "Keys", "Native keys/s", "SCAN+EVAL keys/s", "Native ÷ loop", "Native µs/call",
                   "EVAL µs/call", "Longest native call ms", "Longest EVAL ms"]
        return md_table(headers, rows, [False] + [True] * 8)

    def core_table(self) -> List[str]:
        if not self.r.core:
            return []
        rows = [[name, f"{ns:.1f}", f"{lo:.1f}–{hi:.1f}"] for name, ns, lo, hi in self.r.core]
        return md_table(["Benchmark (criterion, fake clock)", "ns (median)", "95% interval"], rows,
                        [False, True, True])

    def time_table(self) -> List[str]:
        m = self.r.measured
        rows = []
        for row in self.rows_in_order():
            secs = m.row_seconds.get(row.name)
            if secs is None:
                continue
            runs = sum(len(c.runs) for (name, _, _, _), c in self.cells.items() if name == row.name)
            req = next((c.requests for (name, _, _, _), c in self.cells.items() if name == row.name), 0)
            rows.append([row.name, f"{req:,}", str(runs), f"{secs:.1f}"])
        headers = ["Row", "Requests per run", "Runs", "Seconds (keys written, probes, runs)"]
        return md_table(headers, rows, [False, True, True, True]) if rows else []

    def phase_line(self) -> str:
        ph = self.r.phases
        if not ph:
            return ""
        parts = ", ".join(f"{name.split(' (')[0]} {secs:.0f} s" for name, secs in ph.done)
        loads = [x for x in ph.loads if x >= 0]
        load = (f"; the 1-minute load average at the end of each phase went from {min(loads):.1f} to "
                f"{max(loads):.1f}" if loads else "")
        return f"Time: {ph.total():.0f} s in all ({parts}){load}."

    def settings(self) -> str:
        o = self.o
        pin = (f"server on CPU {min(o.server_cpus)} and redis-benchmark on CPU {min(o.client_cpus)}, "
               if o.server_cpus and o.client_cpus else "")
        pipes = (f"pipelines {' and '.join(map(str, o.pipelines))}" if o.pipelines == o.denied_pipelines else
                 f"pipelines {' and '.join(map(str, o.pipelines))} (allowed mode) and "
                 f"{' and '.join(map(str, o.denied_pipelines))} (denied mode)")
        return (f"{pin}{o.clients} clients, {pipes}, "
                f"{o.requests:,} requests per run (times the row's share, below), keys drawn from {o.keyspace:,} "
                f"(allowed mode, every key written once before the run) or {o.denied_keyspace:,} (denied mode, every "
                f"key at its limit before the run); each figure is the median of {o.repeat} runs, with the "
                f"min–max of the runs")

    def targets(self):
        """The issues' targets, each with what this run measured (bench/extra.py)."""
        from bench.extra import Target, targets_section

        def ratios(a: List[float], b: List[float]):
            r = [x / y for x, y in zip(a, b) if y]
            return (statistics.median(r), min(r), max(r)) if r else (None, None, None)

        def row(name: str) -> Optional[Row]:
            return next((r for r in self.rows_in_order() if r.name == name), None)

        out: List[Target] = []
        for s in self.r.sections:
            if s.title.startswith("RL.ALL against"):
                runs = {c["command"]: c["usec_per_call_runs"] for c in s.csv}
                a = [float(x) for x in runs.get("RL.ALL vs RL.ALL", "").split(";") if x]
                three = [float(x) for x in runs.get("RL.ALL vs three single commands", "").split(";") if x]
                out.append(Target("RL.ALL ÷ the three single commands (server time)", *ratios(a, three), 1.0, True,
                                  s.title))
                fn = [float(x) for x in runs.get("RL.ALL vs RL.ALL function", "").split(";") if x]
                fns = [float(x) for x in runs.get("RL.ALL vs three single functions", "").split(";") if x]
                out.append(Target("RL.ALL's function ÷ the three single functions (server time)", *ratios(fn, fns),
                                  1.5, True, s.title))
        for name, bound in (("RL.ALL", 5.0), ("RL.LOG", 5.0)):
            r = row(name)
            if r:
                vs, _ = self.vs(r, "allowed", self.headline)
                out.append(Target(f"{name} function ÷ native (allowed, P{self.headline})", *(vs or (None,) * 3), bound,
                                  False, "Server cost per call"))
        # The twins against hand-written scripts of the same job and reply.
        for name in ("RL.FIXED", "RL.GCRA", "RL.SLIDING"):
            hand = self.cell(f"{name} hand-written script", "script", "allowed", self.headline)
            for kind, form, bound in (("function", "function (FCALL)", 1.5), ("twin", "script (EVALSHA)", 2.0)):
                mine = self.cell(name, kind, "allowed", self.headline)
                if hand is None or mine is None:
                    continue
                out.append(Target(f"{name} {form} ÷ hand-written script (allowed, P{self.headline})",
                                  *(paired(mine, hand, "usec") or (None,) * 3), bound, True,
                                  "The twins against hand-written scripts"))
        if self.r.peers:
            res = self.r.peers["results"]
            lib = next((r for r in res if r["algorithm"] == "moving window" and r["variant"] == "limits"), None)
            nat = next((r for r in res if r["algorithm"] == "moving window" and r["variant"] == "native"), None)
            if lib and nat:
                out.append(Target("`limits` moving window ÷ RL.LOG (server µs/hit)",
                                  *ratios(lib["server_usec_per_hit_runs"], nat["server_usec_per_hit_runs"]), 3.0,
                                  False, "Against the `limits` library"))
        if len(self.r.log_cost) >= 2:
            lo, hi = self.r.log_cost[0], self.r.log_cost[-1]
            out.append(Target(f"RL.LOG at {hi.entries:,} entries ÷ at {lo.entries:,} (flat)",
                              *ratios(hi.native_usec, lo.native_usec), 1.5, True, "RL.LOG against its entries"))
        for s in self.r.sections:
            if s.title.startswith("RL.LOG: COST"):
                runs = {(c["command"], c["variant"]): c["usec_per_call_runs"] for c in s.csv}
                one = [float(x) for x in runs.get(("RL.LOG COST 1", "native"), "").split(";") if x]
                hundred = [float(x) for x in runs.get(("RL.LOG COST 100", "native"), "").split(";") if x]
                out.append(Target("RL.LOG COST 100 ÷ COST 1", *ratios(hundred, one), 1.5, True, s.title))
        cell = self.r.cell
        if cell is not None and not getattr(cell, "problem", ""):
            for mode, m in cell.modes.items():
                out.append(Target(f"CL.THROTTLE ÷ redis-cell ({mode})", statistics.median(m.ratios),
                                  min(m.ratios), max(m.ratios), 0.8, True, "CL.THROTTLE against redis-cell"))
        else:
            out.append(Target("CL.THROTTLE ÷ redis-cell", None, None, None, 0.8, True,
                              "no redis-cell build given (REDIS_CELL_MODULE)"))
        return targets_section(out)

    def sections(self) -> list:
        """bench/extra.py's tables, then the targets."""
        t = self.targets()
        return list(self.r.sections) + ([t] if t else [])

    def all_notes(self) -> List[str]:
        return list(self.r.notes) + [f"no figures: {f}" for f in self.r.failures]

    def terminal(self) -> None:
        i = self.info
        log()
        log(f"Machine: {i['cpu']}, {i['cores']} cores, {i['memory']}, {i['os']}; load average {self.r.loads}")
        log(f"Server:  {i['server']}")
        log(f"Module:  {i['module']}")
        log(f"Load:    {i['redis_benchmark']}; {self.settings()}")
        for title, table in (
                (f"Server cost per call (INFO commandstats, pipeline {self.headline}), median (min–max), "
                 "and memory per key:", self.cost_table() if self.cells else []),
                ("The Lua forms against hand-written scripts of the same job and reply:",
                 self.lua_table() if self.cells else []),
                ("Client side (redis-benchmark): requests/s, latency percentiles, server µs per call "
                 "(median ±half the min–max range):", self.throughput_table() if self.cells else []),
                ("Against the floor (allowed mode):", self.floor_table()),
                ("Latency at pipeline 1:", self.latency_table()),
                ("Against the limits library (Python clients):", self.peer_table()),
                ("RL.LOG against its entries:", self.log_table()),
                *((f"{x.title}:", md_table(x.headers, x.rows, x.right)) for x in self.sections()),
                ("Scale:", self.scale_table()),
                ("Bulk TTL:", self.bulk_table()),
                ("Pure algorithms:", self.core_table()),
                ("Time per row of the first table:", self.time_table())):
            if table:
                log()
                log(title)
                for line in table:
                    log(line)
        notes = self.all_notes()
        if notes:
            log()
            log("Notes:")
            for n in notes:
                log(f"  - {n}")

    def markdown(self) -> str:
        i = self.info
        target = "make bench-full" if self.o.full else "make bench"
        out = [
            "# Benchmark results",
            "",
            f"Written by `{target}` on {i['date']}. Machine: {i['cpu']}, {i['cores']} cores, {i['memory']}, "
            f"{i['os']}; load average (1, 5, 15 min) {self.r.loads}.",
            f"Server: {i['server']}. Module: {i['module']}. Load: {i['redis_benchmark']}, {self.settings()}.",
            "",
            self.phase_line(),
            "",
            "## Server cost per call (the fair comparison)",
            "",
            f"Microseconds the server spends in one call (`INFO commandstats`, `usec_per_call` of the command, "
            f"of `fcall` for a twin's function, of `evalsha` for its script), pipeline {self.headline}: the median "
            f"of the runs, and their min–max in brackets. The native command against the fastest Lua form, its "
            f"function in the library `lua/ratelimit.lua`; the same twin as a self-contained script beside it. "
            f"*Function ÷ native*: how many times the native command's cost the function costs (for a script row: "
            f"how many times the cost of the native command named), taken run by run (they run back to back), "
            f"median and min–max. *÷ floor*: the native command's cost over that of the floor module's command "
            f"for the same shape of work (below). *Native ÷ function req/s*: the throughput gain clients see"
            + ("" if self.o.full or self.o.denied_pipelines == self.o.pipelines else
               f"; `{FULL}`: measured by `make bench-full` only") +
            ". *Bytes/key*: `MEMORY USAGE` of a key written twice.",
            "",
            *self.cost_table(),
            "",
            "The twins against hand-written scripts of the same job and the same reply (`bench/lua/`: no argument "
            "checks, the server's relative TTLs; the twins check every argument and bound as the command does and "
            "keep absolute times), same run, run by run:",
            "",
            *self.lua_table(),
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
            f"{self.headline}; the ratio is taken run by run. The targets are reported, never asserted.",
            "",
            *(self.floor_table() or ["No floor figures in this run (see the notes)."]),
            "",
            "## Client side",
            "",
            f"What redis-benchmark sees: requests per second and latency percentiles (ms) over {self.o.clients} "
            "connections, with each command sent alone (P1) or 16 at a time (P16), and the server's µs per call of "
            "the same runs; each the median of the runs, ± half their min–max range in percent of it.",
            "",
            *self.throughput_table(),
        ]
        lt = self.latency_table()
        if lt:
            out += ["", "## Latency as clients see it", "",
                    f"Allowed mode, pipeline 1, {self.o.clients} connections of redis-benchmark: latency percentiles "
                    "of each command and of its twin (median of the runs ± half their range). On a small machine "
                    "these are bound by the client and the kernel's round trips more than by the server (compare "
                    "the server cost above).", "", *lt]
        pt = self.peer_table()
        if pt:
            peers = self.r.peers
            out += ["", "## Against the `limits` library", "",
                    f"The Python `limits` library ({peers.get('limit', '')}, keys drawn from "
                    f"{peers.get('ids', 0):,} identifiers, every hit allowed) driven through its own API, next to "
                    "the native command and its twin called from the same Python client (redis-py), "
                    f"{self.o.peer_hits:,} hits per run, {self.o.repeat} runs of each client in turn. *Server "
                    "µs/hit*: every command a hit sends (counted on the client) times its `usec_per_call`, median "
                    "(min–max); *÷ native* run by run. *Hits/s (1 client)*: one hit after the other. *Threads* and "
                    "the percentiles (of all runs' hits together): that many threads of one Python process hitting "
                    "at once, each with its own connection: bound by the Python client on this machine, they show "
                    "what a Python application sees.", "", *pt]
        lg = self.log_table()
        if lg:
            out += ["", "## RL.LOG against its entries", "",
                    "Logs of 10 to 10 000 entries (20 of each size, `META` of about 9 bytes), then calls that find "
                    "them full (the denied path reads the most: the count, the newest entry and the oldest that must "
                    f"leave, each in O(log n)), pipeline 16, {self.r.log_cost[0].requests:,} requests per run: the "
                    "server's µs per call, native and twin (median, min–max), and `MEMORY USAGE` per entry.", "", *lg]
        for x in self.sections():
            out += ["", f"## {x.title}", "", x.intro, "", *md_table(x.headers, x.rows, x.right)]
        sc = self.scale_table()
        if sc:
            out += ["", "## Scale", "",
                    "Cost per call (pipeline 16, keys drawn from all live keys, "
                    f"{self.o.scale_requests:,} requests per run; median, min–max) and memory per key "
                    "(`used_memory` growth over the keys) with this many live limiter keys, each written once first"
                    + ("" if self.o.full else "; `make bench-full` adds 10 000 000 keys") + ".", "", *sc]
        bt = self.bulk_table()
        if bt:
            out += ["", "## Giving keys a TTL in bulk", "",
                    "Keys given a TTL per second over a whole key space of keys without one: the native sweep against "
                    "the published loop (SCAN a chunk, then EVAL a script on its keys), median ± half the range of "
                    "the runs. *Longest call*: the longest single call seen by the client in any run, i.e. how long "
                    "the server was busy at a stretch"
                    + ("" if self.o.full else "; `make bench-full` sweeps 1 000 000 keys") + ".", "", *bt]
        ct = self.core_table()
        if ct:
            out += ["", "## Pure algorithms", "",
                    "Criterion micro-benchmarks of `ratelimit-core` (`make bench-core`): nanoseconds per call, no "
                    "server, a fake clock; criterion's median and its 95% interval.", "", *ct]
        elif not self.o.full:
            out += ["", "## Pure algorithms", "",
                    "The criterion micro-benchmarks of `ratelimit-core` run in `make bench-full` and "
                    "`make bench-core` (their optimised build and run take about two minutes on two cores)."]
        tt = self.time_table()
        if tt:
            out += ["", "## Time", "", self.phase_line(), "",
                    "Seconds per row of the first table, all its runs (every variant, mode, pipeline and repetition) "
                    "with the writing of its keys before each: a row costs what its runs cost.", "", *tt]
        about = [f"- **{r.name}**: {r.about}" + (f" (runs send {r.share:g} × the requests)" if r.share != 1 else "")
                 for r in self.rows_in_order() if r.about]
        if about:
            out += ["", "## Rows", "", *about]
        notes = self.all_notes()
        if notes:
            out += ["", "## Notes", "", *[f"- {n}" for n in notes]]
        return "\n".join(out) + "\n"

    def csv_rows(self) -> List[List[str]]:
        """One line per command, variant, mode and pipeline (median, min, max, every run),
        then the bulk sweeps (keys/s), the `limits` library rows, RL.LOG against its
        entries, the scale table, the criterion figures (µs per call) and the phases."""
        rows = [CSV_HEADER]
        for row in self.rows_in_order():
            for mode in MODES:
                for kind in self.kinds(row):
                    for p in sorted(set(self.o.pipelines) | set(self.o.denied_pipelines)):
                        cell = self.cells.get((row.name, kind, mode, p))
                        if not cell:
                            continue
                        mem = self.memory.get((row.name, kind))
                        fr = self.floor_ratio(row, mode) if kind == "native" and p == self.headline else None
                        vs, over = self.vs(row, mode, p) if kind != "native" else (None, None)
                        s = {a: cell.spread(a) for a in ("rps", "p50", "p99", "p999", "usec")}
                        rows.append(csv_line(
                            command=row.name, variant=kind, mode=mode, pipeline=p, clients=self.o.clients,
                            requests=cell.requests, keyspace=cell.keyspace, runs=len(cell.runs),
                            throughput=s["rps"][0], throughput_unit="requests/s", p50_ms=s["p50"][0],
                            p99_ms=s["p99"][0], usec_per_call=s["usec"][0], p999_ms=s["p999"][0],
                            bytes_per_key=f"{mem[0]:.0f}" if mem else None, keys_per_call=mem[1] if mem else None,
                            throughput_runs=";".join(f"{r.rps:.0f}" for r in cell.runs),
                            usec_per_call_runs=";".join(f"{r.usec:.3f}" for r in cell.runs),
                            floor=row.floor_of if fr else None, ratio_to_floor=fr[0] if fr else None,
                            ratio_to_floor_min=fr[1] if fr else None, ratio_to_floor_max=fr[2] if fr else None,
                            throughput_min=s["rps"][1], throughput_max=s["rps"][2],
                            p50_ms_min=s["p50"][1], p50_ms_max=s["p50"][2], p99_ms_min=s["p99"][1],
                            p99_ms_max=s["p99"][2], p999_ms_min=s["p999"][1], p999_ms_max=s["p999"][2],
                            usec_per_call_min=s["usec"][1], usec_per_call_max=s["usec"][2],
                            ratio_to=over if vs else None, ratio=vs[0] if vs else None,
                            ratio_min=vs[1] if vs else None, ratio_max=vs[2] if vs else None,
                            seconds=sum(r.secs for r in cell.runs)))
        for (name, kind), rs in self.bulk_by().items():
            kps = spread_of([r.expired / r.seconds for r in rs])
            us = spread_of([r.usec_per_call for r in rs])
            rows.append(csv_line(command=name, variant=kind, mode="bulk", pipeline=1, clients=1,
                                 requests=rs[0].calls, keyspace=rs[0].keys, runs=len(rs), throughput=kps[0],
                                 throughput_unit="keys/s", throughput_min=kps[1], throughput_max=kps[2],
                                 usec_per_call=us[0], usec_per_call_min=us[1], usec_per_call_max=us[2],
                                 longest_call_ms=max(r.longest_ms for r in rs),
                                 throughput_runs=";".join(f"{r.expired / r.seconds:.0f}" for r in rs),
                                 usec_per_call_runs=";".join(f"{r.usec_per_call:.3f}" for r in rs),
                                 seconds=sum(r.seconds for r in rs)))
        peers = (self.r.peers or {}).get("results", [])
        native = {r["algorithm"]: r for r in peers if r["variant"] == "native"}
        for r in peers:
            us = spread_of(r["server_usec_per_hit_runs"])
            hs = spread_of(r["hits_per_s_runs"])
            n = native.get(r["algorithm"])
            vs = (index_ratios(r["server_usec_per_hit_runs"], n["server_usec_per_hit_runs"])
                  if n and r["variant"] != "native" else None)
            rows.append(csv_line(command=r["label"], variant=f"peer:{r['variant']}", mode=r["algorithm"], pipeline=1,
                                 clients=1, requests=r["hits"], runs=r["runs"], throughput=hs and hs[0],
                                 throughput_unit="hits/s", throughput_min=hs and hs[1], throughput_max=hs and hs[2],
                                 p50_ms=r["p50_ms"], p99_ms=r["p99_ms"], p999_ms=r["p999_ms"],
                                 usec_per_call=us and us[0], usec_per_call_min=us and us[1],
                                 usec_per_call_max=us and us[2],
                                 throughput_runs=";".join(f"{x:.0f}" for x in r["hits_per_s_runs"]),
                                 usec_per_call_runs=";".join(f"{x:.3f}" for x in r["server_usec_per_hit_runs"]),
                                 ratio_to="native" if vs else None, ratio=vs and vs[0], ratio_min=vs and vs[1],
                                 ratio_max=vs and vs[2]))
        for r in self.r.log_cost:
            for kind, usec in (("native", r.native_usec), ("twin", r.twin_usec)):
                us = spread_of(usec)
                vs = index_ratios(r.twin_usec, r.native_usec) if kind == "twin" else None
                rows.append(csv_line(command=f"RL.LOG {r.entries} entries", variant=kind, mode="denied", pipeline=16,
                                     clients=self.o.clients, requests=r.requests, keyspace=20, runs=len(usec),
                                     usec_per_call=us[0], usec_per_call_min=us[1], usec_per_call_max=us[2],
                                     usec_per_call_runs=";".join(f"{u:.3f}" for u in usec),
                                     bytes_per_key=f"{r.bytes_per_entry:.1f}", ratio_to="native" if vs else None,
                                     ratio=vs and vs[0], ratio_min=vs and vs[1], ratio_max=vs and vs[2]))
        for x in self.r.sections:
            rows += [csv_line(**kv) for kv in x.csv]
        first: Dict[str, ScaleResult] = {}
        for r in self.r.scale:
            base = first.setdefault(r.command, r)
            us = spread_of(r.usec)
            vs = index_ratios(r.usec, base.usec) if base is not r else None
            rows.append(csv_line(command=r.command, variant="scale", mode="allowed", pipeline=16,
                                 clients=self.o.clients, requests=self.o.scale_requests, keyspace=r.keys,
                                 runs=len(r.usec), usec_per_call=us[0], usec_per_call_min=us[1],
                                 usec_per_call_max=us[2], bytes_per_key=f"{r.bytes_per_key:.0f}",
                                 usec_per_call_runs=";".join(f"{u:.3f}" for u in r.usec),
                                 ratio_to=f"{base.keys} keys" if vs else None, ratio=vs and vs[0],
                                 ratio_min=vs and vs[1], ratio_max=vs and vs[2]))
        for name, ns, lo, hi in self.r.core:
            rows.append(csv_line(command=name, variant="core", mode="criterion", usec_per_call=f"{ns / 1000:.6f}",
                                 usec_per_call_min=f"{lo / 1000:.6f}", usec_per_call_max=f"{hi / 1000:.6f}"))
        for name, secs in (self.r.phases.done if self.r.phases else []):
            rows.append(csv_line(command=name.split(" (")[0], variant="phase", seconds=secs))
        for name, secs in self.r.measured.row_seconds.items():
            rows.append(csv_line(command=name, variant="row time", seconds=secs))
        return rows

    def svg(self) -> str:
        return chart(self)
