#!/usr/bin/env python3
"""Summarise the SLOWLOG of a server on 127.0.0.1 for one command.

    python3 -m bench.slowlog PORT COMMAND      (from the repository root)

Prints how many calls of COMMAND the slow log holds and the median, 99th percentile
and longest duration in microseconds. Set `slowlog-log-slower-than 0` and a large
`slowlog-max-len` before the run to log every call. Standard library only.
"""

import sys

from bench.resp import Client


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    port, name = int(sys.argv[1]), sys.argv[2].upper()
    c = Client(port)
    entries = c.call("SLOWLOG", "GET", "-1")
    c.close()
    # Each entry: id, timestamp, duration (µs), argv, client address, client name.
    durations = sorted(
        e[2] for e in entries if e[3] and e[3][0].decode(errors="replace").upper() == name
    )
    if not durations:
        print(f"no {name} call in the slow log")
        return
    n = len(durations)
    p50 = durations[n // 2]
    p99 = durations[min(n - 1, (n * 99) // 100)]
    print(f"{name}: {n} calls, median {p50} us, p99 {p99} us, max {durations[-1]} us")


if __name__ == "__main__":
    main()
