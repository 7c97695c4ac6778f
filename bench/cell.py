"""CL.THROTTLE on this module against CL.THROTTLE on redis-cell: the same load from
redis-benchmark on two throwaway servers, one with each module, and the server's own
cost per call (`INFO commandstats`), with the ratio and its spread over repeated runs.

    python3 -m bench.cell --cell-module /path/to/libredis_cell.so

redis-cell is not part of this repository: point the benchmark at a build of it with
`--cell-module` or `REDIS_CELL_MODULE=/path/to/libredis_cell.so` (its own `cargo build
--release` makes one). Without one, nothing is measured and the reason is printed.
`run(...)` does the same from Python (for `make bench`).

Two modes, each on its own keys: `allowed` (a capacity no run uses up) and `denied`
(every key used up by a first call, then refused). Runs alternate between the two
servers, so a change in the machine's load shows in both alike; each ratio is this
module's cost over redis-cell's in the same round. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from bench.common import RAND, ROOT, log
from bench.measure import commandstats, redis_benchmark
from bench.plan import concrete
from bench.resp import ReplyError
from bench.server import Server, cpu_plan

STAT = "cl.throttle"

# mode -> (CL.THROTTLE arguments after the key, key prefix)
LINES = {
    # 1 per second, 100 000 at once: no run comes near the capacity, and each key's TAT
    # runs seconds ahead, so the keys stay (a limiter in use: its value is rewritten).
    "allowed": (["99999", "1", "1"], "cell:a:"),
    # One per hour: the first call of each key takes it, the rest are refused.
    "denied": (["0", "1", "3600"], "cell:d:"),
}


@dataclass
class Mode:
    """One mode's runs: server µs per call on each side, and each round's ratio."""

    ours: List[float] = field(default_factory=list)
    cell: List[float] = field(default_factory=list)
    ratios: List[float] = field(default_factory=list)

    def ratio(self) -> Optional[float]:
        return statistics.median(self.ratios) if self.ratios else None


@dataclass
class Results:
    modes: Dict[str, Mode] = field(default_factory=dict)
    problem: str = ""
    pipeline: int = 1
    requests: int = 0
    server: str = ""

    def table(self) -> str:
        """A Markdown table: medians, the ratio and its spread over the rounds."""
        if self.problem:
            return f"CL.THROTTLE against redis-cell: not measured ({self.problem})\n"
        rows = [
            "| CL.THROTTLE | this module, µs/call | redis-cell, µs/call | ratio | ratio, min to max |",
            "|---|---:|---:|---:|---|",
        ]
        for name, m in self.modes.items():
            if not m.ratios:
                continue
            rows.append(
                f"| {name} | {statistics.median(m.ours):.2f} | {statistics.median(m.cell):.2f} | "
                f"{m.ratio():.2f}× | {min(m.ratios):.2f}× to {max(m.ratios):.2f}× "
                f"({len(m.ratios)} rounds) |"
            )
        note = (f"\n{self.server}: server time per call (INFO commandstats usec_per_call), {self.requests} "
                f"requests per run, pipeline {self.pipeline}; ratio = this module / redis-cell, median of the "
                f"rounds.\n")
        return "\n".join(rows) + "\n" + note


def _fill(c, argv: List[str], keyspace: int) -> Optional[str]:
    """One call on every key (the denied mode's first, allowed calls)."""
    for start in range(0, keyspace, 2000):
        replies = c.pipeline([concrete(argv, i) for i in range(start, min(keyspace, start + 2000))])
        for r in replies:
            if isinstance(r, ReplyError):
                return str(r)
    return None


def _measure(server: Server, argv: List[str], mode: str, opts, raw_log) -> float:
    """Server µs per call of one redis-benchmark run of `argv`."""
    c = server.client()
    try:
        c.call("FLUSHALL")
        if mode == "denied":
            err = _fill(c, argv, opts.keyspace)
            if err:
                raise RuntimeError(f"error reply: {err}")
        probe = c.pipeline([concrete(argv, 0)])[0]
        if not (isinstance(probe, list) and len(probe) == 5):
            raise RuntimeError(f"unexpected reply {probe!r}")
        if probe[0] != (0 if mode == "allowed" else 1):
            raise RuntimeError(f"expected the {mode} path, got {probe!r}")
        c.call("CONFIG", "RESETSTAT")
        run, err = redis_benchmark(opts.redis_benchmark, server.port, argv, opts.clients, opts.pipeline,
                                   opts.requests, opts.keyspace, opts.run_timeout, raw_log, opts.client_cpus)
        if run is None:
            raise RuntimeError(err)
        st = commandstats(c).get(STAT)
        if not st or st.get("calls", 0) < opts.requests:
            raise RuntimeError(f"INFO commandstats shows {st and st.get('calls')} calls for {opts.requests}")
        if st.get("failed_calls", 0) or st.get("rejected_calls", 0):
            raise RuntimeError(f"{st.get('failed_calls')} failed / {st.get('rejected_calls')} rejected calls")
        return st["usec"] / st["calls"]
    finally:
        c.close()


def run(module: Path, cell_module: Optional[Path], *, redis_server: str = "redis-server",
        redis_benchmark: str = "redis-benchmark", requests: int = 200_000, repeat: int = 5,
        keyspace: int = 10_000, clients: int = 50, pipeline: int = 1, run_timeout: float = 120,
        pin: bool = True, acl_write_check: bool = True, raw_log=None) -> Results:
    """Measure both modules; a Results whose `problem` says why when nothing could be."""
    res = Results(pipeline=pipeline, requests=requests)
    if cell_module is None:
        res.problem = "no redis-cell build: pass --cell-module or set REDIS_CELL_MODULE"
        return res
    for path, what in ((module, "this module"), (cell_module, "redis-cell")):
        if not Path(path).is_file():
            res.problem = f"{what} file {path} does not exist"
            return res
    server_cpus, client_cpus = cpu_plan(pin)
    opts = argparse.Namespace(redis_benchmark=redis_benchmark, clients=clients, pipeline=pipeline,
                              requests=requests, keyspace=keyspace, run_timeout=run_timeout,
                              client_cpus=client_cpus)
    raw_log = raw_log or open(os.devnull, "w")
    ours = Server(redis_server, Path(module), server_cpus)
    cell = Server(redis_server, Path(cell_module), server_cpus)
    try:
        for s, what in ((ours, "this module"), (cell, "redis-cell")):
            try:
                s.start()
            except RuntimeError as e:
                res.problem = f"the server with {what} did not start: {str(e).splitlines()[-1]}"
                return res
        info = ours.client().text("INFO", "server")
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        name = "Valkey" if "valkey_version" in fields else "Redis"
        res.server = f"{name} {fields.get('valkey_version', fields.get('redis_version', '?')).strip()}"
        res.server += ", ratelimit.acl-write-check " + ("yes" if acl_write_check else "no")
        if not acl_write_check:
            # Redis 7.0 only: the module's own ACL check, which redis-cell does not make.
            ours.client().call("CONFIG", "SET", "ratelimit.acl-write-check", "no")
        modules = {m[1].decode() if isinstance(m[1], bytes) else m[1]
                   for m in cell.client().call("MODULE", "LIST")}
        if "redis-cell" not in modules:
            res.problem = f"{cell_module} loaded as {sorted(modules)}, not redis-cell"
            return res
        for rnd in range(repeat):
            for mode, (args, prefix) in LINES.items():
                argv = ["CL.THROTTLE", prefix + RAND, *args]
                m = res.modes.setdefault(mode, Mode())
                # Alternate which server goes first from round to round.
                order = [("ours", ours), ("cell", cell)]
                if rnd % 2:
                    order.reverse()
                got = {}
                for name, s in order:
                    try:
                        got[name] = _measure(s, argv, mode, opts, raw_log)
                    except RuntimeError as e:
                        res.problem = f"{name}, {mode}: {e}"
                        return res
                m.ours.append(got["ours"])
                m.cell.append(got["cell"])
                m.ratios.append(got["ours"] / got["cell"])
                log(f"  round {rnd + 1}/{repeat}  {mode:<7}  this module {got['ours']:6.2f} µs/call"
                    f"  redis-cell {got['cell']:6.2f} µs/call  ratio {got['ours'] / got['cell']:.2f}")
    finally:
        ours.stop()
        cell.stop()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench.cell", description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", type=Path, default=ROOT / "target" / "release" / "libredis_ratelimit.so")
    ap.add_argument("--cell-module", type=Path,
                    default=Path(os.environ["REDIS_CELL_MODULE"]) if os.environ.get("REDIS_CELL_MODULE") else None,
                    help="redis-cell's libredis_cell.so (default: $REDIS_CELL_MODULE)")
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--redis-benchmark", default=os.environ.get("REDIS_BENCHMARK", "redis-benchmark"))
    ap.add_argument("--requests", type=int, default=200_000, help="requests per run (default 200000)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--keyspace", type=int, default=10_000, help="keys per mode (default 10000)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--no-acl-write-check", action="store_true",
                    help="turn this module's own ACL check off (it runs on Redis 7.0 only; redis-cell has none)")
    ap.add_argument("--no-pin", action="store_true", help="do not keep servers and client on separate CPUs")
    o = ap.parse_args()
    res = run(o.module, o.cell_module, redis_server=o.redis_server, redis_benchmark=o.redis_benchmark,
              requests=o.requests, repeat=o.repeat, keyspace=o.keyspace, clients=o.clients,
              pipeline=o.pipeline, pin=not o.no_pin, acl_write_check=not o.no_acl_write_check)
    log(res.table())
    return 0 if not res.problem or res.problem.startswith("no redis-cell build") else 1


if __name__ == "__main__":
    sys.exit(main())
