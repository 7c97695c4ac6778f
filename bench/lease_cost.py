"""RL.LEASE's cost against the leases a key holds: keys of 10, 100, 1 000 and 10 000
leases (written first by a script on the server), then calls that find them full (a new
lease refused: the count and the earliest expiry read), renewals of a held lease (a
write: ZADD and PEXPIREAT), and calls refused by a key of one live lease and all the
others expired (the expired leases counted, not read: a denial writes nothing, so they
stay), natively, through the function and through the script.

    python3 -m bench.lease_cost [--module PATH] [--repeat N] [--requests N]

prints the server time per call (INFO commandstats) of each, its ratio to the 10-lease
key, and the memory per lease. `make bench` runs it with the other tables.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from bench.common import ROOT, log
from bench.extra import Section
from bench.measure import commandstats, redis_benchmark
from bench.plan import command_exists, load_script
from bench.resp import Client
from bench.server import Server

SIZES = (10, 100, 1_000, 10_000)
KEYS = 20  # keys per size; calls are spread over them
AT = 4_000_000_000_000  # far ahead: no lease expires during the run

# The leases RL.LEASE would hold for n holders: members w1..wn scored by their expiry in
# Unix ms (an hour after AT, a millisecond apart), written in one script call.
FILL = """
local at = tonumber(ARGV[2])
for i = 1, tonumber(ARGV[1]) do
  redis.call('ZADD', KEYS[1], at + 3600000 + i, 'w' .. i)
end
redis.call('PEXPIREAT', KEYS[1], at + 3600000 + tonumber(ARGV[1]))
return 1
"""

# A key of one live lease (w1, an hour after AT) and n - 1 expired ones (before AT).
FILL_EXPIRED = """
local at = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], at + 3600000, 'w1')
for i = 2, tonumber(ARGV[1]) do
  redis.call('ZADD', KEYS[1], at - i, 'w' .. i)
end
redis.call('PEXPIREAT', KEYS[1], at + 3600000)
return 1
"""

SIDES = ("native", "function", "script")
MODES = ("denied", "renewal", "expired")
# The keys of each mode (the expired mode has keys of its own).
PREFIX = {"denied": "rl:leasecost:", "renewal": "rl:leasecost:", "expired": "rl:leaseexp:"}


@dataclass
class LeaseCost:
    leases: int
    bytes_per_lease: float
    # (mode, side) -> µs per call, one per repetition
    usec: Dict[tuple, List[float]] = field(default_factory=dict)

    def median(self, mode: str, side: str) -> float:
        return statistics.median(self.usec[(mode, side)])


def run_lease_cost(c: Client, server: Server, opts, raw_log):
    results: List[LeaseCost] = []
    problems: List[str] = []
    if not command_exists(c, "RL.LEASE"):
        return results, problems
    fill = load_script(c, FILL)
    fill_expired = load_script(c, FILL_EXPIRED)
    c.call("FUNCTION", "LOAD", "REPLACE", (ROOT / "lua" / "ratelimit.lua").read_text())
    script = load_script(c, (ROOT / "lua" / "scripts" / "rl_lease.lua").read_text())
    requests = max(20 * opts.clients, opts.requests // 3)
    for n in SIZES:
        c.call("FLUSHALL")
        for k in range(KEYS):
            c.call("EVALSHA", fill, 1, "rl:leasecost:%012d" % k, n, AT)
            c.call("EVALSHA", fill_expired, 1, "rl:leaseexp:%012d" % k, n, AT)
        sizes = [c.call("MEMORY", "USAGE", "rl:leasecost:%012d" % k, "SAMPLES", "0") or 0 for k in range(KEYS)]
        cost = LeaseCost(n, statistics.mean(sizes) / n)
        args = {
            "denied": [str(n), "1h", "AT", str(AT)],
            "renewal": [str(n), "1h", "ID", "w1", "AT", str(AT)],
            "expired": ["1", "1h", "AT", str(AT)],
        }
        prefix = {
            "native": (["RL.LEASE"], "rl.lease"),
            "function": (["FCALL", "rl_lease", "1"], "fcall"),
            "script": (["EVALSHA", script, "1"], "evalsha"),
        }
        failed = False
        for rep in range(opts.repeat):
            order = SIDES if rep % 2 == 0 else tuple(reversed(SIDES))
            for mode in MODES:
                for side in order:
                    if failed:
                        break
                    argv = prefix[side][0] + [PREFIX[mode] + "__rand_int__"] + args[mode]
                    c.call("CONFIG", "RESETSTAT")
                    run, err = redis_benchmark(opts.redis_benchmark, server.port, argv, opts.clients, 16, requests,
                                               KEYS, opts.run_timeout, raw_log, opts.client_cpus)
                    st = commandstats(c).get(prefix[side][1])
                    if run is None or not st or st.get("calls", 0) < requests:
                        problems.append(f"RL.LEASE {mode} {side} at {n:,} leases, run {rep + 1}: "
                                        f"{err or 'fewer calls counted than requests sent'}")
                        failed = True
                        break
                    cost.usec.setdefault((mode, side), []).append(st["usec"] / st["calls"])
        if failed:
            continue
        # Every key still holds its n leases: a denial writes nothing, a renewal
        # rewrites one.
        if any(c.call("ZCARD", p + "%012d" % k) != n for k in range(KEYS) for p in set(PREFIX.values())):
            problems.append(f"RL.LEASE at {n:,} leases: a key's lease count changed during the run")
        results.append(cost)
        log(f"  RL.LEASE {n:>7,} leases  {cost.bytes_per_lease:6.1f} bytes/lease  " + "  ".join(
            f"{mode} {side} {cost.median(mode, side):7.2f} µs" for mode in MODES for side in SIDES))
    c.call("FLUSHALL")
    return results, problems


def section(results: List[LeaseCost]) -> Optional[Section]:
    """The table: server µs per call of each mode and side, with its ratio to the key
    of the fewest leases (flat is 1.00)."""
    if not results:
        return None
    base = results[0]
    headers = ["Leases held", "Bytes per lease"] + [f"{mode} {side} µs" for mode in MODES for side in SIDES]
    rows = []
    for r in results:
        cells = [f"{r.leases:,}", f"{r.bytes_per_lease:.1f}"]
        for mode in MODES:
            for side in SIDES:
                m = r.median(mode, side)
                cells.append(f"{m:.2f} (×{m / base.median(mode, side):.2f})")
        rows.append(cells)
    intro = (f"Keys holding 10 to 10 000 leases: a new lease refused (the key is full), a renewal of a held "
             f"lease, and a new lease refused by a key of one live lease beside the others expired (limit 1), "
             f"natively, through the function rl_lease and its script; server time per call (INFO "
             f"commandstats), the median of the runs, and in parentheses its ratio to the {base.leases}-lease key.")
    return Section("RL.LEASE against the leases held", intro, headers, rows, [False] + [True] * (len(headers) - 1))


def table(results: List[LeaseCost]) -> str:
    """The section as a markdown table."""
    s = section(results)
    if s is None:
        return ""
    lines = ["| " + " | ".join(s.headers) + " |", "|" + "---|" * len(s.headers)]
    lines += ["| " + " | ".join(r) + " |" for r in s.rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m bench.lease_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", type=Path, default=ROOT / "target" / "release" / "libredis_ratelimit.so")
    ap.add_argument("--redis-server", default="redis-server")
    ap.add_argument("--redis-benchmark", default="redis-benchmark")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=30_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--run-timeout", type=float, default=60)
    opts = ap.parse_args(argv)
    opts.client_cpus = None
    server = Server(opts.redis_server, opts.module.resolve())
    server.start()
    try:
        c = server.client()
        out = ROOT / "bench" / "out"
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "redis-benchmark-lease.log", "w") as raw_log:
            results, problems = run_lease_cost(c, server, opts, raw_log)
        print(table(results))
        for p in problems:
            print(f"problem: {p}", file=sys.stderr)
        return 1 if problems or not results else 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
