"""RL.LOG's cost against the size of its log: logs of 10, 100, 1 000 and 10 000 entries
(written first by a script on the server), then calls that find them full (the denied
path, which reads the most: the count, the newest entry and the oldest that must
leave), native and twin, and the memory per entry."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import List

from bench.common import ROOT, log
from bench.measure import commandstats, redis_benchmark
from bench.plan import command_exists, load_script
from bench.resp import Client
from bench.server import Server

SIZES = (10, 100, 1_000, 10_000)
KEYS = 20  # logs per size; calls are spread over them

# The entries RL.LOG would have written for n requests of cost 1 a millisecond apart
# (member seq:cost:meta as docs/log.md describes it, score the time in µs), written
# directly in one script call.
FILL = """
local at = tonumber(ARGV[2])
for i = 1, tonumber(ARGV[1]) do
  redis.call('ZADD', KEYS[1], (at + i) * 1000, string.format('%016d:1:user:%d', i, i % 1000))
end
redis.call('PEXPIREAT', KEYS[1], at + tonumber(ARGV[1]) + 3600000)
return 1
"""


@dataclass
class LogCost:
    entries: int
    bytes_per_entry: float
    requests: int
    native_usec: List[float]  # one per repetition
    twin_usec: List[float]


def log_requests(opts) -> int:
    """Requests per run: a third of --requests (every call is a denied one, cheap)."""
    return max(20 * opts.clients, opts.requests // 3)


def run_log_cost(c: Client, server: Server, opts, raw_log):
    results: List[LogCost] = []
    problems: List[str] = []
    if not command_exists(c, "RL.LOG"):
        return results, problems
    fill = load_script(c, FILL)
    twin_path = ROOT / "lua" / "scripts" / "rl_log.lua"
    twin = load_script(c, twin_path.read_text())
    at = 4_000_000_000_000  # far ahead: nothing leaves the window during the run
    requests = log_requests(opts)
    for n in SIZES:
        c.call("FLUSHALL")
        for k in range(KEYS):
            c.call("EVALSHA", fill, 1, "rl:logcost:%012d" % k, n, at)
        sizes = [c.call("MEMORY", "USAGE", "rl:logcost:%012d" % k, "SAMPLES", "0") or 0 for k in range(KEYS)]
        per_entry = statistics.mean(sizes) / n
        usec: dict = {"native": [], "twin": []}
        calls = {
            "native": ["RL.LOG", "rl:logcost:__rand_int__", str(n), "1h", "META", "user:1", "AT", str(at)],
            "twin": ["EVALSHA", twin, "1", "rl:logcost:__rand_int__", str(n), "1h", "META", "user:1", "AT", str(at)],
        }
        failed = False
        for rep in range(opts.repeat):
            for kind in ("native", "twin") if rep % 2 == 0 else ("twin", "native"):
                if failed:
                    break
                c.call("CONFIG", "RESETSTAT")
                run, err = redis_benchmark(opts.redis_benchmark, server.port, calls[kind], opts.clients, 16, requests,
                                           KEYS, opts.run_timeout, raw_log, opts.client_cpus)
                st = commandstats(c).get("rl.log" if kind == "native" else "evalsha")
                if run is None or not st or st.get("calls", 0) < requests:
                    problems.append(f"RL.LOG {kind} at {n:,} entries, run {rep + 1}: "
                                    f"{err or 'fewer calls counted than requests sent'}")
                    failed = True
                    break
                usec[kind].append(st["usec"] / st["calls"])
        if failed:
            continue
        results.append(LogCost(n, per_entry, requests, usec["native"], usec["twin"]))
        log(f"  RL.LOG   {n:>7,} entries  {per_entry:6.1f} bytes/entry  native {statistics.median(usec['native']):8.2f} µs"
            f"  twin {statistics.median(usec['twin']):9.2f} µs")
    c.call("FLUSHALL")
    return results, problems
