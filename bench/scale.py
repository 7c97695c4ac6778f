"""Scale: cost per call and memory per key with many live limiter keys.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import List

from bench.common import RAND, log
from bench.measure import commandstats, redis_benchmark
from bench.plan import command_exists, load_script, parse_line
from bench.resp import Client
from bench.server import Server


# The commands measured at scale: every key of the key space written first (by a script
# on the server, in batches), windows long enough that none expires during the run.
SCALE_ROWS = [
    ("RL.FIXED", "RL.FIXED rl:scale:__rand_int__ 1000000 1h"),
    ("RL.GCRA", "RL.GCRA rl:scale:__rand_int__ 1000 1 1h"),
]

FILL_SCRIPT = """
local from, to = tonumber(ARGV[1]), tonumber(ARGV[2])
local prefix, suffix = ARGV[3], ARGV[4]
local argv = {}
for i = 5, #ARGV do argv[#argv + 1] = ARGV[i] end
for i = from, to - 1 do
  redis.call(argv[1], prefix .. string.format('%012d', i) .. suffix, unpack(argv, 2))
end
return to - from
"""


@dataclass
class ScaleResult:
    command: str
    keys: int
    bytes_per_key: float
    usec: List[float]
    fill_seconds: float


def used_memory(c: Client) -> int:
    for line in c.text("INFO", "memory").splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":", 1)[1])
    return 0


def run_scale(c: Client, server: Server, opts, raw_log):
    """Cost per call and memory per key with 10 000 to 10 000 000 live limiter keys
    (--scale)."""
    results: List[ScaleResult] = []
    problems: List[str] = []
    sha = load_script(c, FILL_SCRIPT)
    for name, line in SCALE_ROWS:
        argv = parse_line(line)
        if not command_exists(c, argv[0]):
            continue
        key_arg = next(i for i, a in enumerate(argv) if RAND in a)
        prefix, suffix = argv[key_arg].split(RAND, 1)
        rest = argv[:key_arg] + ["{key}"] + argv[key_arg + 1:]
        for keys in opts.scale:
            c.call("FLUSHALL")
            before = used_memory(c)
            t = time.monotonic()
            batch = 100_000
            for start in range(0, keys, batch):
                c.call("EVALSHA", sha, 0, start, min(keys, start + batch), prefix, suffix,
                       *[a for a in rest if a != "{key}"])
            fill_s = time.monotonic() - t
            n = c.call("DBSIZE")
            if n != keys:
                problems.append(f"scale {name}: {n} keys after writing {keys}")
                continue
            per_key = (used_memory(c) - before) / keys
            usec = []
            for _ in range(opts.repeat):
                c.call("CONFIG", "RESETSTAT")
                run, err = redis_benchmark(opts.redis_benchmark, server.port, argv, opts.clients, 16,
                                           opts.scale_requests, keys, opts.run_timeout, raw_log, opts.client_cpus)
                st = commandstats(c).get(argv[0].lower())
                if run is None or not st or st.get("calls", 0) < opts.scale_requests:
                    problems.append(f"scale {name} {keys:,} keys, run {len(usec) + 1}: "
                                    f"{err or 'fewer calls counted than requests sent'}")
                    usec = []
                    break
                usec.append(st["usec"] / st["calls"])
            if usec:
                results.append(ScaleResult(name, keys, per_key, usec, fill_s))
                log(f"  scale {name:<9} {keys:>12,} keys  {per_key:6.1f} bytes/key  "
                    f"{statistics.median(usec):6.2f} µs/call  (written in {fill_s:.1f} s)")
    c.call("FLUSHALL")
    return results, problems

