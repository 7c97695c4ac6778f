"""Instructions per call of the module's commands, counted by callgrind.

    python3 -m bench.callgrind --module A.so [--module B.so ...] [--calls N]

Starts redis-server (or $REDIS_SERVER) under `valgrind --tool=callgrind` on a free
127.0.0.1 port with each module in turn, counts only inside the server's dispatch of a
module command (`RedisModuleCommandDispatcher`: the module's handler and everything it
calls, not the reading of the request or the writing of the reply to the socket), sends
each row's calls, and prints the instructions per call. A count, not a time: it does not
depend on how busy the machine is, so two builds compare exactly.
"""

import argparse
import os
import socket
import subprocess
import tempfile
import time

# (name, the calls: a function of the call's number giving its arguments)
ROWS = [
    ("RL.FIXED allowed", lambda i: ["RL.FIXED", f"f{i % 64}", "1000000000", "1h"]),
    ("RL.FIXED denied", lambda i: ["RL.FIXED", "fd", "1", "1h"]),
    # 1 000 an hour with a burst of a million: every call allowed, and the keys (their
    # TATs hours ahead) never expire during the run, as the floor's never do.
    ("RL.GCRA allowed", lambda i: ["RL.GCRA", f"g{i % 64}", "1000000", "1000", "1h"]),
    ("RL.GCRA denied", lambda i: ["RL.GCRA", "gd", "0", "1", "1h"]),
    (
        "RL.MULTI allowed",
        lambda i: ["RL.MULTI", "2", f"{{m{i % 64}}}a", f"{{m{i % 64}}}b",
                   "LIMIT", "1s", "1000000", "LIMIT", "1h", "1000000000"],
    ),
    (
        "RL.MULTI 2 keys × 3 windows allowed",
        lambda i: ["RL.MULTI", "2", f"{{m{i % 64}}}a", f"{{m{i % 64}}}b",
                   "LIMIT", "1s", "1000000", "LIMIT", "1m", "100000000", "LIMIT", "1h", "1000000000"],
    ),
    (
        "RL.SLIDING allowed",
        lambda i: ["RL.SLIDING", "1", f"s{i % 64}", "LIMIT", "1m", "1000000000"],
    ),
    (
        "RL.ALL 3 keys allowed",
        lambda i: ["RL.ALL", "3", f"{{u{i % 64}}}g", f"{{u{i % 64}}}f", f"{{u{i % 64}}}s",
                   "GCRA", "1", "1000000", "1000000", "1s", "FIXED", "2", "1000000000", "1h",
                   "SLIDING", "3", "LIMIT", "1m", "1000000000"],
    ),
]


# The floor module's rows (bench/floor/floor.c: the least a module can do for the job),
# measured with --floor.
FLOOR_ROWS = [
    ("FLOOR.FIXED allowed", lambda i: ["FLOOR.FIXED", f"f{i % 64}"]),
    ("FLOOR.MULTI allowed",
     lambda i: ["FLOOR.MULTI", "2", f"{{m{i % 64}}}a", f"{{m{i % 64}}}b"]),
]


def resp(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def send_all(port, commands):
    """Send the commands in one pipeline and read as many replies (any content)."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(b"".join(resp(c) for c in commands))
        f = s.makefile("rb")
        for _ in commands:
            read_reply(f)


def read_reply(f):
    line = f.readline()
    kind, rest = line[:1], line[1:].strip()
    if kind == b"*":
        for _ in range(int(rest)):
            read_reply(f)
    elif kind == b"$" and int(rest) >= 0:
        f.read(int(rest) + 2)
    elif kind == b"-":
        raise RuntimeError(rest.decode())


def measure(server, module, calls, rows=None):
    """Instructions per call of each row with `module`."""
    results = {}
    for name, make in rows or ROWS:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "callgrind.out")
            port = free_port()
            proc = subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--collect-atstart=no",
                 "--toggle-collect=RedisModuleCommandDispatcher",
                 "--toggle-collect=ValkeyModuleCommandDispatcher",
                 f"--callgrind-out-file={out}", server, "--port", str(port),
                 "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", d, "--loadmodule", module],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                for _ in range(600):
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=1).close()
                        break
                    except OSError:
                        time.sleep(0.1)
                send_all(port, [make(i) for i in range(calls)])
            finally:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                        s.sendall(resp(["SHUTDOWN", "NOSAVE"]))
                except OSError:
                    pass
                proc.wait(timeout=120)
            # A dump asked for from outside (callgrind_control) splits the profile into
            # parts: out, out.1, out.2, ...; each part's summary counts its own events.
            total = 0
            for part in os.listdir(d):
                if part == "callgrind.out" or part.startswith("callgrind.out."):
                    with open(os.path.join(d, part)) as f:
                        for line in f:
                            if line.startswith("summary:"):
                                total += int(line.split()[1])
            results[name] = total / calls
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--only", help="the rows whose name contains this")
    ap.add_argument("--floor", help="the floor module (bench/out/floor.so after make bench)")
    o = ap.parse_args()
    if o.only:
        ROWS[:] = [r for r in ROWS if o.only in r[0]]
    server = os.environ.get("REDIS_SERVER", "redis-server")
    o.module = [os.path.abspath(m) for m in o.module]
    o.floor = o.floor and os.path.abspath(o.floor)
    measured = [measure(server, m, o.calls) for m in o.module]
    head = "| row | " + " | ".join(f"module {i + 1}" for i in range(len(o.module)))
    if len(o.module) == 2:
        head += " | 2 ÷ 1"
    print(head + " |")
    print("|---" * (len(o.module) + 1 + (len(o.module) == 2)) + "|")
    for name, _ in ROWS:
        vals = [m[name] for m in measured]
        row = f"| {name} | " + " | ".join(f"{v:,.0f}" for v in vals)
        if len(vals) == 2 and vals[0]:
            row += f" | {vals[1] / vals[0]:.3f}×"
        print(row + " |")
    if o.floor:
        for name, v in measure(server, o.floor, o.calls, FLOOR_ROWS).items():
            print(f"| {name} | {v:,.0f} (floor module) |")
    for i, m in enumerate(o.module):
        print(f"module {i + 1}: {m}")


if __name__ == "__main__":
    main()
