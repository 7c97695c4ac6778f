"""RL.LOG's cost against the size of its log: logs of 10, 100, 1 000 and 10 000 entries
(written first by a script on the server), then calls that find them full (the denied
path, which reads the most: the count, the newest entry and the oldest that must
leave), native and twin, and the memory per entry."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import List, Optional

from bench.common import ROOT, log
from bench.measure import Budget, commandstats, redis_benchmark
from bench.plan import command_exists, load_script
from bench.resp import Client
from bench.server import Server

SIZES = (10, 100, 1_000, 10_000)
KEYS = 20  # logs per size; calls are spread over them

# The entries RL.LOG would have written for n requests a millisecond apart (member
# seq:user:<n>, score the time in µs), written directly in one script call.
FILL = """
local at = tonumber(ARGV[2])
for i = 1, tonumber(ARGV[1]) do
  redis.call('ZADD', KEYS[1], (at + i) * 1000, i .. ':user:' .. (i % 1000))
end
redis.call('PEXPIREAT', KEYS[1], at + tonumber(ARGV[1]) + 3600000)
return 1
"""


@dataclass
class LogCost:
    entries: int
    bytes_per_entry: float
    native_usec: Optional[float]
    twin_usec: Optional[float]


def run_log_cost(c: Client, server: Server, opts, budget: Budget, raw_log):
    results: List[LogCost] = []
    problems: List[str] = []
    if not command_exists(c, "RL.LOG"):
        return results, problems
    fill = load_script(c, FILL)
    twin_path = ROOT / "lua" / "log.lua"
    twin = load_script(c, (ROOT / "lua" / "prelude.lua").read_text() + "\n" + twin_path.read_text())
    at = 4_000_000_000_000  # far ahead: nothing leaves the window during the run
    for n in SIZES:
        if budget.left() < 0:
            problems.append(f"RL.LOG cost at {n:,} entries: skipped, time budget spent")
            continue
        c.call("FLUSHALL")
        for k in range(KEYS):
            c.call("EVALSHA", fill, 1, "rl:logcost:%012d" % k, n, at)
        sizes = [c.call("MEMORY", "USAGE", "rl:logcost:%012d" % k, "SAMPLES", "0") or 0 for k in range(KEYS)]
        per_entry = statistics.mean(sizes) / n
        usec = {}
        for kind, argv in (
            ("native", ["RL.LOG", "rl:logcost:__rand_int__", str(n), "1h", "META", "user:1", "AT", str(at)]),
            ("twin", ["EVALSHA", twin, "1", "rl:logcost:__rand_int__", str(n), "1h", "META", "user:1", "AT", str(at)]),
        ):
            runs = []
            for _ in range(opts.repeat):
                c.call("CONFIG", "RESETSTAT")
                requests = max(200, min(opts.requests, 2_000_000 // n))
                run, err = redis_benchmark(opts.redis_benchmark, server.port, argv, opts.clients, 16, requests, KEYS,
                                           max(10.0, opts.run_timeout), raw_log, opts.client_cpus)
                st = commandstats(c).get("rl.log" if kind == "native" else "evalsha")
                if run is None or not st or not st.get("calls"):
                    problems.append(f"RL.LOG {kind} at {n:,} entries: {err or 'no calls counted'}")
                    break
                runs.append(st["usec"] / st["calls"])
            usec[kind] = statistics.median(runs) if runs else None
        results.append(LogCost(n, per_entry, usec.get("native"), usec.get("twin")))
        log(f"  RL.LOG   {n:>7,} entries  {per_entry:6.1f} bytes/entry  native {usec.get('native') or 0:8.2f} µs"
            f"  twin {usec.get('twin') or 0:9.2f} µs")
    c.call("FLUSHALL")
    return results, problems
