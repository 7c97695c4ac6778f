"""`make bench`: the native commands against their Lua twins, side by side.

Starts a throwaway redis-server (or $REDIS_SERVER) with the module on a free 127.0.0.1
port, in a temporary directory, loads the twins, and for every row of bench/rows.py
drives load with redis-benchmark. For each command it records requests/s, latency
percentiles (client side) and the server's own cost per call (`INFO commandstats`), in
an allowed mode and a denied mode, as the median of a few runs with their spread; then
the memory of one limiter key, the `limits` library, RL.LOG against its entries, the
scale table and the bulk TTL sweep. It writes the tables to the terminal and to
bench/results.md, bench/results.csv and a chart, bench/results.svg.

Every run sends a fixed number of requests, so a row costs what its runs cost; a run
that fails or hangs past --run-timeout fails the benchmark. The time of each phase is
printed and written in the results.

Only the Python standard library is used. The server is killed at the end, also on
errors and Ctrl-C.
"""

from __future__ import annotations

import argparse
import csv
import os
import pickle
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from bench import floor
from bench.bulk import run_bulk
from bench.common import ROOT, Phases, log
from bench.compare import run_compare
from bench.criterion import run_criterion
from bench.estimate import print_plan
from bench.extra import run_all_vs_singles, run_cell, run_log_cost_units, run_log_worst
from bench.lease_cost import run_lease_cost
from bench.lease_cost import section as lease_cost_section
from bench.log_cost import run_log_cost
from bench.measure import Target, memory_per_key, run_all
from bench.peers import run_peers
from bench.plan import build_plan
from bench.report import Report, Results, machine_info
from bench.resp import ReplyError
from bench.rows import BULK, ROWS
from bench.scale import run_scale
from bench.server import Server, cpu_plan

# What `make bench` (about six minutes on a quiet two-core machine, the build included)
# and `make bench-full` (--full) run. Options given on the command line win.
PRESETS = {
    "default": dict(requests=30_000, repeat=5, denied_pipelines="16", scale="10000,1000000",
                    scale_requests=100_000, bulk_keys=250_000, peer_hits=1_000),
    "full": dict(requests=100_000, repeat=7, denied_pipelines="1,16", scale="10000,1000000,10000000",
                 scale_requests=200_000, bulk_keys=1_000_000, peer_hits=3_000),
}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true",
                    help="the long run (make bench-full): more requests and runs, P1 in both modes, "
                         "10 000 000 keys in the scale table, 1 000 000 in the sweep, the criterion benchmarks")
    ap.add_argument("--plan", action="store_true",
                    help="print the requests and runs of each row, and the seconds of the last results; run nothing")
    ap.add_argument("--module", type=Path, default=ROOT / "target" / "release" / "libredis_ratelimit.so")
    ap.add_argument("--compare-module", type=Path, metavar="PATH",
                    help="compare two builds instead: the native rows on a server with --module (A) and on one "
                         "with PATH (B), runs interleaved, B ÷ A with its spread (bench/out/compare.*)")
    ap.add_argument("--build", metavar="CMD", help="a shell command run first as the timed 'build' phase")
    ap.add_argument("--venv", metavar="REQUIREMENTS",
                    help="make the virtualenv for the peer rows (scripts/venv.sh REQUIREMENTS), timed")
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--redis-benchmark", default=os.environ.get("REDIS_BENCHMARK", "redis-benchmark"))
    ap.add_argument("--cargo", default=os.environ.get("CARGO", "cargo"))
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipelines", default="1,16", help="pipelines of the allowed mode, comma-separated (1,16)")
    ap.add_argument("--denied-pipelines", help="pipelines of the denied mode (16; --full: 1,16)")
    ap.add_argument("--requests", type=int,
                    help="requests per run, times the row's share (30000; --full: 100000)")
    ap.add_argument("--keyspace", type=int, default=100_000, help="keys of the allowed mode (100000)")
    ap.add_argument("--denied-keyspace", type=int, default=1_000, help="keys of the denied mode (1000)")
    ap.add_argument("--repeat", type=int, help="runs per figure: the median is kept, min-max shown (5; --full: 7)")
    ap.add_argument("--only", action="append", default=[], help="run only these rows (repeatable)")
    ap.add_argument("--core", action="store_true", help="run the criterion benchmarks of the pure crate first")
    ap.add_argument("--bulk-keys", type=int, help="keys of the bulk sweeps (250000; --full: 1000000)")
    ap.add_argument("--run-timeout", type=float, default=60,
                    help="seconds one redis-benchmark run may take before the benchmark fails (60)")
    ap.add_argument("--bulk-timeout", type=float, default=120, help="seconds one bulk sweep may take (120)")
    ap.add_argument("--no-pin", action="store_true", help="do not keep server and client on separate CPUs")
    ap.add_argument("--out", type=Path, help="where results.{md,csv,svg} go (bench/; --full: bench/full/)")
    ap.add_argument("--scale", help="live keys for the scale table, comma-separated, '' skips it "
                                    "(10000,1000000; --full: up to 10000000)")
    ap.add_argument("--scale-requests", type=int, help="requests per scale run (100000; --full: 200000)")
    ap.add_argument("--peers-python", default=os.environ.get("BENCH_PYTHON"),
                    help="a python with the `limits` library (bench/requirements.txt) for the peer rows")
    ap.add_argument("--peer-hits", type=int, help="hits per peer measurement and run (1000; --full: 3000)")
    ap.add_argument("--no-floor", action="store_true", help="do not build and load the floor module")
    ap.add_argument("--cell-module", type=Path,
                    default=Path(os.environ["REDIS_CELL_MODULE"]) if os.environ.get("REDIS_CELL_MODULE") else None,
                    help="a build of redis-cell (libredis_cell.so) to measure CL.THROTTLE against "
                         "(default: $REDIS_CELL_MODULE; without one, that table is left out with a note)")
    o = ap.parse_args(argv)
    o.profile = "full" if o.full else "default"
    for k, v in PRESETS[o.profile].items():
        if getattr(o, k) is None:
            setattr(o, k, v)
    if o.out is None:
        o.out = ROOT / "bench" / ("full" if o.full else "")
    o.core = o.core or o.full
    o.pipelines = [int(x) for x in o.pipelines.split(",") if x.strip()]
    o.denied_pipelines = [int(x) for x in o.denied_pipelines.split(",") if x.strip()]
    o.scale = [int(x) for x in o.scale.split(",") if x.strip()]
    return o


def loadavg() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def shell_phase(phases: Phases, name: str, cmd: str, capture: bool = False) -> str:
    """Run a shell command as a timed phase; its output goes to the terminal (or is
    returned). A failure stops the benchmark."""
    with phases.run(name):
        p = subprocess.run(cmd, shell=True, cwd=ROOT, stdin=subprocess.DEVNULL, text=True,
                           stdout=subprocess.PIPE if capture else None)
    if p.returncode != 0:
        raise RuntimeError(f"{name} failed: {cmd} exited {p.returncode}")
    return (p.stdout or "").strip()


def main() -> int:
    opts = parse_args()
    if opts.plan:
        return print_plan(opts)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    phases = Phases()
    load_before = loadavg()
    log(f"bench: {'make bench-full' if opts.full else 'make bench'}; load average {load_before}")
    if opts.build:
        shell_phase(phases, "build", opts.build)
    for tool in (opts.redis_server, opts.redis_benchmark):
        if not shutil.which(tool):
            log(f"bench: {tool} not found (Debian/Ubuntu: apt-get install redis-server redis-tools)")
            return 1
    for m in (opts.module, opts.compare_module):
        if m is not None and not m.is_file():
            log(f"bench: no module at {m} (make build)")
            return 1
    rows = [r for r in ROWS if not opts.only or r.name in opts.only]
    raw_dir = ROOT / "bench" / "out"
    raw_dir.mkdir(parents=True, exist_ok=True)

    if opts.venv and not opts.compare_module:
        opts.peers_python = shell_phase(phases, "virtualenv", f"scripts/venv.sh {shlex.quote(opts.venv)}",
                                        capture=True).splitlines()[-1]

    core, core_err = [], ""
    if opts.core and not opts.compare_module:
        with phases.run("criterion benchmarks of ratelimit-core (log in bench/out/criterion.log)"):
            core, core_err = run_criterion(opts.cargo, raw_dir / "criterion.log")
        for name, ns, _, _ in core:
            log(f"  {name:<40} {ns:9.1f} ns")
        if core_err:
            log(core_err)

    extra, floor_notes = [], []
    if not opts.no_floor:
        with phases.run("floor module"):
            so, why = floor.build(opts.cargo, raw_dir)
        if so:
            extra.append(so)
        else:
            floor_notes.append(f"floor rows: {why}")
            log(f"bench: {why}")

    opts.server_cpus, opts.client_cpus = cpu_plan(not opts.no_pin)
    if opts.compare_module:
        return run_compare(opts, rows, extra, phases, raw_dir, load_before) or (1 if floor_notes else 0)

    server = Server(opts.redis_server, opts.module.resolve(), opts.server_cpus, extra)
    try:
        server.start()
        c = server.client()
        info = machine_info(c, opts)
        log(f"bench: {info['server']} on 127.0.0.1:{server.port} with {opts.module}")
        log(f"bench: {info['cpu']}, {info['cores']} cores; {info['module']}")
        variants, notes = build_plan(c, rows, opts.keyspace, opts.denied_keyspace)
        for n in notes:
            log(f"bench: note: {n}")
        with phases.run("commands against their twins"), open(raw_dir / "redis-benchmark.log", "w") as raw_log:
            measured = run_all([Target("", server, c, variants)], opts, raw_log)
            memory = memory_per_key(c, variants)
        bulk, bulk_notes, bulk_problems = [], [], []
        peers, peer_notes, peer_problems = None, [], []
        scale, scale_problems, log_cost, log_problems = [], [], [], []
        sections, cell_notes, cell_res = [], [], None
        bulks = [b for b in BULK if not opts.only or b.name in opts.only]
        if not opts.only:
            with phases.run("the limits library"):
                peers, peer_notes, peer_problems = run_peers(server, opts, raw_dir)
            with open(raw_dir / "redis-benchmark-scale.log", "w") as raw_log:
                with phases.run("RL.LOG against its entries"):
                    log_cost, log_problems = run_log_cost(c, server, opts, raw_log)
                with phases.run("RL.LEASE against the leases held"):
                    lease_results, problems = run_lease_cost(c, server, opts, raw_log)
                    lease_section = lease_cost_section(lease_results)
                    sections += [lease_section] if lease_section else []
                    log_problems += problems
                with phases.run("RL.LOG: COST 100 against COST 1, and the longest calls"):
                    for run in (lambda: run_log_cost_units(c, server, opts, raw_log), lambda: run_log_worst(c, opts)):
                        section, problems = run()
                        sections += [section] if section else []
                        log_problems += problems
                if opts.scale:
                    with phases.run("scale"):
                        scale, scale_problems = run_scale(c, server, opts, raw_log)
            with phases.run("RL.ALL against the three single commands"):
                section, problems = run_all_vs_singles(c, opts)
                sections += [section] if section else []
                log_problems += problems
        if bulks:
            with phases.run("bulk TTL sweep"):
                bulk, bulk_notes, bulk_problems = run_bulk(c, bulks, opts)
        c.close()
    finally:
        server.stop()
    if not opts.only:
        with phases.run("CL.THROTTLE against redis-cell"), open(raw_dir / "redis-benchmark-cell.log", "w") as raw_log:
            section, cell_notes, problems, cell_res = run_cell(opts, raw_log)
            sections += [section] if section else []
            log_problems += problems

    loads = f"{load_before} before, {loadavg()} after"
    failures = [f"{row} {kind} ({mode}): {msg}" for (row, kind, mode), msg in measured.problems.items()]
    failures += bulk_problems + peer_problems + scale_problems + log_problems + floor_notes
    if core_err:
        failures.append(core_err.splitlines()[0])
    results = Results(variants, measured, memory, notes=notes + peer_notes + bulk_notes + cell_notes, bulk=bulk,
                      failures=failures, core=core, loads=loads, peers=peers, scale=scale,
                      log_cost=log_cost, sections=sections, cell=cell_res, phases=phases)
    report = Report(opts, info, results)
    with phases.run("report"):
        opts.out.mkdir(parents=True, exist_ok=True)
        report.terminal()
        with open(opts.out / "results.csv", "w", newline="") as f:
            csv.writer(f).writerows(report.csv_rows())
        (opts.out / "results.svg").write_text(report.svg())
    # The Markdown last, so that it has the time of every phase, its own writing aside.
    (opts.out / "results.md").write_text(report.markdown())
    # Everything measured, to write the tables and the chart again without a run:
    # python3 -c "import pickle, bench.report; r = pickle.load(open('bench/out/report.pickle', 'rb')); ..."
    with open(raw_dir / "report.pickle", "wb") as f:
        pickle.dump(report, f)
    log()
    log(report.phase_line())
    log(f"bench: wrote {opts.out / 'results.md'}, results.csv and results.svg")
    if failures:
        log(f"bench: FAILED, {len(failures)} part(s) without figures:")
        for f in failures:
            log(f"  - {f}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        log("bench: interrupted; the server was stopped")
        sys.exit(130)
    except (RuntimeError, OSError, ReplyError, subprocess.SubprocessError) as e:
        log(f"bench: {e}")
        sys.exit(1)
