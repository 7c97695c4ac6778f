"""The longest single calls at the bounds, from the server's SLOWLOG (the time the server
spent in the call, in microseconds), over several trials each:

- ``log``: RL.LOG on a full log (10 000 entries of 256-byte META) whose entries all
  left the window at once: the call removes at most 64 of them;
- ``all``: RL.ALL of 16 LOG rules, each on such a log;
- ``sliding``: RL.SLIDING on 64 keys, each holding 1 000 buckets (10 windows of 100
  buckets, every bucket counted), naming the 10 windows: the call reads and writes all
  of them (``sliding-32``, with ``--old-bounds``: keys of 32 windows of 100 buckets,
  what builds before the 1 000-bucket cap kept; the call names 16 of them).

Usage::

    python3 -m bench.longest --module target/release/libredis_ratelimit.so [--server valkey-server] [--trials 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess

from bench.resp import Client
from bench.server import Server

AT = 1_900_000_000_000
META = "m" * 256


def log_fill(c: Client, key: str, at_ms: int) -> None:
    """A full log: 10 000 entries at `at_ms`, numbered as RL.LOG numbers them."""
    c.call("DEL", key)
    args = ["ZADD", key]
    for seq in range(1, 10_001):
        args += [str(at_ms * 1000), f"{seq:016d}:1:{META}"]
    c.call(*args)


def sliding_fill(c: Client, key: str, at_ms: int, windows: int = 10) -> None:
    """`windows` windows of 100 buckets (1 s, 2 s, ...), every bucket counted at `at_ms`."""
    entries = []
    for s in range(1, windows + 1):
        w_us = s * 1_000_000
        width = w_us // 100
        j = (at_ms * 1000) // width
        first = j - 100
        entries.append(f"{s * 1000}:100:{first}:" + ".".join(["1"] * 101))
    c.call("SET", key, ",".join(entries), "PX", "3600000")


def slowest(c: Client, name: str) -> int:
    entries = c.call("SLOWLOG", "GET", "-1")
    durations = [e[2] for e in entries if e[3] and e[3][0].decode().upper() == name]
    if len(durations) != 1:
        raise RuntimeError(f"{len(durations)} {name} calls in the slow log, expected 1")
    return durations[0]


def trial(c: Client, case: str) -> int:
    c.call("SLOWLOG", "RESET")
    later = str(AT + 1_000)
    if case == "log":
        log_fill(c, "log:full", AT)
        c.call("SLOWLOG", "RESET")
        r = c.call("RL.LOG", "log:full", 10_000, "1s", "META", META, "AT", later)
        assert r[0] == 0, r
        return slowest(c, "RL.LOG")
    if case == "all":
        keys = [f"{{all}}:{i}" for i in range(16)]
        for k in keys:
            log_fill(c, k, AT)
        rules = []
        for i in range(16):
            rules += ["LOG", i + 1, 10_000, "1s", "META", META]
        c.call("SLOWLOG", "RESET")
        r = c.call("RL.ALL", 16, *keys, *rules, "AT", later)
        assert r[0] == 0, r
        return slowest(c, "RL.ALL")
    if case in ("sliding", "sliding-32"):
        windows = 32 if case == "sliding-32" else 10
        keys = [f"{{sl}}:{i}" for i in range(64)]
        for k in keys:
            sliding_fill(c, k, AT, windows)
        limits = []
        for s in range(1, min(windows, 16) + 1):
            limits += ["LIMIT", f"{s}s", 1_000_000]
        c.call("SLOWLOG", "RESET")
        r = c.call("RL.SLIDING", 64, *keys, *limits, "BUCKETS", 100, "AT", str(AT))
        assert r[0] == 0, r
        return slowest(c, "RL.SLIDING")
    raise ValueError(case)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", required=True)
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument(
        "--old-bounds",
        action="store_true",
        help="also RL.SLIDING on keys of 32 windows of 100 buckets (what builds before the 1 000-bucket cap kept)",
    )
    args = ap.parse_args()
    server = Server(args.server, args.module)
    server.start()
    try:
        c = server.client()
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
        c.call("CONFIG", "SET", "slowlog-max-len", "1024")
        version = subprocess.run([args.server, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"{version}; {args.trials} trials each")
        print("| call at the bounds | median | longest |")
        print("|---|---|---|")
        for case in ("log", "all", "sliding") + (("sliding-32",) if args.old_bounds else ()):
            times = [trial(c, case) for _ in range(args.trials)]
            print(f"| {case} | {statistics.median(times)} us | {max(times)} us |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
