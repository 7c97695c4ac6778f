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
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench import floor
from bench.bulk import run_bulk
from bench.common import ROOT, log
from bench.criterion import run_criterion
from bench.log_cost import run_log_cost
from bench.measure import Budget, memory_per_key, run_all
from bench.peers import run_peers
from bench.plan import build_plan
from bench.report import Report, Results, machine_info
from bench.resp import ReplyError
from bench.rows import BULK, ROWS
from bench.scale import run_scale
from bench.server import Server, cpu_plan


def parse_args():
    ap = argparse.ArgumentParser(prog="python3 -m bench", description=__doc__.split("\n\n")[0])
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
    ap.add_argument("--scale-budget", type=float, default=420, help="seconds for the scale table (default 420)")
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
        log_cost = []
        if scale is None:
            with open(raw_dir / "redis-benchmark-scale.log", "w") as raw_log:
                scale, scale_problems = run_scale(c, server, opts, Budget(opts.scale_budget), raw_log)
                log_cost, log_problems = run_log_cost(c, server, opts, Budget(opts.scale_budget), raw_log)
                scale_problems += log_problems
        c.close()
    finally:
        server.stop()

    loads = f"{load_before} before, {loadavg()} after"
    results = Results(variants, cells, problems, memory, notes=floor_notes + notes + peer_notes, bulk=bulk,
                      other_problems=bulk_notes + bulk_problems + peer_problems + scale_problems, core=core,
                      core_err=core_err, loads=loads, peers=peers, scale=scale, log_cost=log_cost)
    report = Report(opts, info, results)
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

