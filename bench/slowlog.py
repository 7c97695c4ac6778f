#!/usr/bin/env python3
"""Summarise the SLOWLOG of a server on 127.0.0.1 for one command.

    bench/slowlog.py PORT COMMAND

Prints how many calls of COMMAND the slow log holds and the median, 99th percentile
and longest duration in microseconds. Set `slowlog-log-slower-than 0` and a large
`slowlog-max-len` before the run to log every call. Standard library only.
"""

import socket
import sys


def read_reply(f):
    line = f.readline()
    if not line:
        raise EOFError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data.decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise ValueError(f"bad reply line {line!r}")


def command(sock, f, *args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    sock.sendall(b"".join(out))
    return read_reply(f)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    port, name = int(sys.argv[1]), sys.argv[2].upper()
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    entries = command(sock, f, "SLOWLOG", "GET", "-1")
    # Each entry: id, timestamp, duration (µs), argv, client address, client name.
    durations = sorted(
        e[2] for e in entries if e[3] and str(e[3][0]).upper() == name
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
