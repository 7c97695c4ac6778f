"""`python3 -m bench --plan`: what a run would send, row by row, without running it: the
requests per run, the runs, and the seconds each row and phase took in the last results
written to the same place (bench/results.csv, or bench/full/ with --full). A row costs
what its runs cost, so a new row costs about what a row of the same shape and share
took there.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Dict, List

from bench.common import MODES, log
from bench.measure import requests_for
from bench.rows import ROWS


def last_seconds(path: Path) -> Dict[str, Dict[str, float]]:
    out: Dict[str, Dict[str, float]] = {"phase": {}, "row time": {}}
    try:
        with open(path, newline="") as f:
            for rec in csv.DictReader(f):
                if rec.get("variant") in out and rec.get("seconds"):
                    out[rec["variant"]][rec["command"]] = float(rec["seconds"])
    except (OSError, ValueError):
        pass
    return out


def print_plan(opts) -> int:
    last = last_seconds(opts.out / "results.csv")
    rows = [r for r in ROWS if not opts.only or r.name in opts.only]
    lines: List[List[str]] = []
    total_runs = total_requests = 0
    for row in rows:
        variants = 1 + (1 if row.twin else 0)
        runs = 0
        for mode in MODES:
            if mode == "denied" and not row.denied:
                continue
            pipes = opts.pipelines if mode == "allowed" else opts.denied_pipelines
            runs += variants * len(pipes) * opts.repeat
        req = requests_for(row, opts)
        total_runs += runs
        total_requests += runs * req
        secs = last["row time"].get(row.name)
        lines.append([row.name, f"{row.share:g}", f"{req:,}", str(runs), f"{runs * req:,}",
                      f"{secs:.0f}" if secs is not None else "?"])
    widths = [max(len(x[i]) for x in lines + [["row", "share", "requests/run", "runs", "requests", "last s"]])
              for i in range(6)]
    head = ["row", "share", "requests/run", "runs", "requests", "last s"]
    log("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths))))
    for x in lines:
        log("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(x, widths))))
    log(f"{total_runs} runs, {total_requests:,} requests in the table of commands against their twins "
        f"({opts.repeat} repetitions).")
    if last["phase"]:
        log("Last run (" + str(opts.out / "results.csv") + "): " +
            ", ".join(f"{k} {v:.0f} s" for k, v in last["phase"].items()) +
            f"; {sum(last['phase'].values()):.0f} s in all.")
    return 0
