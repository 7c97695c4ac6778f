"""Two builds of the module against each other (--compare-module PATH): the native rows
on a server with --module (build A) and on a second server with PATH (build B), the two
runs of each row back to back, A first in one repetition and B first in the next. The
floor module and the plain commands run on both as well: they are the same code on both
sides, so their B ÷ A shows how far the noise of the machine goes.

Written to bench/out/compare.md and bench/out/compare.csv, and to the terminal.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import statistics
from pathlib import Path
from typing import List

from bench.common import MODES, Phases, log
from bench.measure import Target, paired, run_all
from bench.plan import build_plan
from bench.report import fmt_int, machine_info, md_table, pm, ratio_range, us_range
from bench.server import Server

# A row is called slower (or faster) when the median of its run-by-run ratios B ÷ A is
# further from 1 than MARGIN and than three standard errors of that median, the
# deviation taken (robustly: 1.4826 × the median absolute deviation of the logarithms)
# from the control rows' ratios (the floor and plain commands, the same code on both
# sides) or from the row's own, whichever is larger.
MARGIN = 0.03


def file_id(path: Path) -> str:
    h = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return f"{path} (sha256 {h})"


def robust_sd(logs: List[float]) -> float:
    if len(logs) < 3:
        return 0.0
    med = statistics.median(logs)
    return 1.4826 * statistics.median(abs(x - med) for x in logs)


def log_ratios(b, a) -> List[float]:
    """log(B ÷ A) for each repetition measured on both."""
    if not a or not b:
        return []
    av = {r.rep: r.usec for r in a.runs}
    return [math.log(r.usec / av[r.rep]) for r in b.runs if av.get(r.rep) and r.usec > 0]


def verdict(logs: List[float], noise_sd: float) -> str:
    if not logs:
        return "–"
    med = statistics.median(logs)
    sd = max(noise_sd, robust_sd(logs))
    limit = max(math.log(1 + MARGIN), 3 * sd / math.sqrt(len(logs)))
    if med > limit:
        return "B slower"
    if med < -limit:
        return "B faster"
    return "same within the noise"


def run_compare(opts, rows, extra, phases: Phases, raw_dir: Path, load_before: str) -> int:
    a = Server(opts.redis_server, opts.module.resolve(), opts.server_cpus, extra)
    b = Server(opts.redis_server, opts.compare_module.resolve(), opts.server_cpus, extra)
    same = opts.module.resolve() == opts.compare_module.resolve() or \
        opts.module.read_bytes() == opts.compare_module.read_bytes()
    try:
        a.start()
        b.start()
        ca, cb = a.client(), b.client()
        info = machine_info(ca, opts)
        plan_a, notes = build_plan(ca, rows, opts.keyspace, opts.denied_keyspace)
        plan_b, notes_b = build_plan(cb, rows, opts.keyspace, opts.denied_keyspace)
        names_b = {v.row.name for v in plan_b if v.kind == "native"}
        names_a = {v.row.name for v in plan_a if v.kind == "native"}
        notes += [f"build B: {n}" for n in notes_b if n not in notes]
        notes += [f"{n}: only build A has it" for n in sorted(names_a - names_b)]
        notes += [f"{n}: only build B has it" for n in sorted(names_b - names_a)]
        both = names_a & names_b
        targets = [Target("A", a, ca, [v for v in plan_a if v.kind == "native" and v.row.name in both]),
                   Target("B", b, cb, [v for v in plan_b if v.kind == "native" and v.row.name in both])]
        log(f"bench: build A {file_id(opts.module)} on 127.0.0.1:{a.port}")
        log(f"bench: build B {file_id(opts.compare_module)} on 127.0.0.1:{b.port}")
        if same:
            log("bench: note: A and B are the same file: every B ÷ A is noise")
        with phases.run("build A against build B"), open(raw_dir / "redis-benchmark-compare.log", "w") as raw:
            m = run_all(targets, opts, raw)
        ca.close()
        cb.close()
    finally:
        a.stop()
        b.stop()

    pipelines = sorted(set(opts.pipelines) | set(opts.denied_pipelines))
    table, csv_rows = [], [["command", "mode", "pipeline", "requests", "runs", "a_usec_per_call", "a_min", "a_max",
                            "b_usec_per_call", "b_min", "b_max", "b_over_a", "b_over_a_min", "b_over_a_max",
                            "a_requests_per_s", "b_requests_per_s", "b_over_a_throughput", "verdict"]]
    seen, controls = [], set()
    for t in targets:
        for v in t.plan:
            if v.row.name not in seen:
                seen.append(v.row.name)
            if v.row.floor or v.row.reference:
                controls.add(v.row.name)
    top = max(pipelines)
    control_logs = [x for name in controls for mode in MODES
                    for x in log_ratios(m.cells.get((name, "B", mode, top)), m.cells.get((name, "A", mode, top)))]
    noise = robust_sd(control_logs)
    for name in seen:
        for mode in MODES:
            for p in pipelines:
                ca_, cb_ = m.cells.get((name, "A", mode, p)), m.cells.get((name, "B", mode, p))
                if not ca_ or not cb_:
                    continue
                r = paired(cb_, ca_, "usec")
                rt = paired(cb_, ca_, "rps")
                table.append([name, mode, f"P{p}", us_range(ca_.spread("usec")), us_range(cb_.spread("usec")),
                              ratio_range(r), pm(ca_.spread("rps"), fmt_int), pm(cb_.spread("rps"), fmt_int),
                              ratio_range(rt), verdict(log_ratios(cb_, ca_), noise) if p == top else "–"])
                sa, sb = ca_.spread("usec"), cb_.spread("usec")
                csv_rows.append([name, mode, p, ca_.requests, len(ca_.runs), *(f"{x:.3f}" for x in sa),
                                 *(f"{x:.3f}" for x in sb), *(f"{x:.4f}" for x in r),
                                 f"{ca_.median('rps'):.0f}", f"{cb_.median('rps'):.0f}",
                                 f"{rt[0]:.4f}" if rt else "", verdict(log_ratios(cb_, ca_), noise) if p == top else ""])
    headers = ["Command", "Mode", "Pipeline", "A µs/call", "B µs/call", "B ÷ A µs/call", "A req/s", "B req/s",
               "B ÷ A req/s", f"Verdict (P{max(pipelines)})"]
    lines = md_table(headers, table, [False, False, False, True, True, True, True, True, True, False])
    failures = [f"{row} build {kind} ({mode}): {msg}" for (row, kind, mode), msg in m.problems.items()]
    head = [
        "# Two builds compared",
        "",
        f"Written by `python3 -m bench --compare-module` on {info['date']}. Machine: {info['cpu']}, "
        f"{info['cores']} cores, {info['os']}; load average {load_before} before, "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} after. Server: {info['server']}.",
        "",
        f"- A: {file_id(opts.module)}",
        f"- B: {file_id(opts.compare_module)}",
        "",
        f"{opts.clients} clients, {opts.requests:,} requests per run (times the row's share), {opts.repeat} "
        "repetitions; in each, the two runs of a row back to back, A first in one repetition and B first in the "
        "next. Server µs per call (`INFO commandstats`): median (min–max) of the runs; *B ÷ A*: run by run, "
        f"median (min–max). The floor and plain-command rows are the same code on both sides: their B ÷ A is "
        f"the noise of this machine (here a deviation of about {math.exp(noise) - 1:.0%} per run). *Verdict* "
        f"(pipeline {top}): B slower (or faster) when the median of a row's run-by-run ratios is further from 1 "
        f"than {MARGIN:.0%} and than three standard errors, the deviation taken from those rows or from the row's "
        "own runs, whichever is larger (robustly: from the median absolute deviation).",
        "",
        phases_line(phases),
        "",
        *lines,
    ]
    if notes or failures:
        head += ["", "## Notes", "", *[f"- {n}" for n in notes], *[f"- no figures: {f}" for f in failures]]
    (raw_dir / "compare.md").write_text("\n".join(head) + "\n")
    with open(raw_dir / "compare.csv", "w", newline="") as f:
        csv.writer(f).writerows(csv_rows)
    log()
    for line in lines:
        log(line)
    for n in notes:
        log(f"  - {n}")
    log()
    log(phases_line(phases))
    log(f"bench: wrote {raw_dir / 'compare.md'} and compare.csv")
    if failures:
        log(f"bench: FAILED, {len(failures)} part(s) without figures:")
        for f in failures:
            log(f"  - {f}")
        return 1
    return 0


def phases_line(phases: Phases) -> str:
    parts = ", ".join(f"{name.split(' (')[0]} {secs:.0f} s" for name, secs in phases.done)
    return f"Time: {phases.total():.0f} s in all ({parts})."


__all__: List[str] = ["run_compare"]
