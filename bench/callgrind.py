"""Instructions per call of the module's commands and of the Lua twins, counted by callgrind.

    python3 -m bench.callgrind --module A.so [--module B.so ...] [--calls N]
    python3 -m bench.callgrind --twins [--lua DIR] [--calls N]

Starts redis-server (or $REDIS_SERVER) under `valgrind --tool=callgrind` on a free
127.0.0.1 port with each module in turn, counts only inside the server's dispatch of a
module command (`RedisModuleCommandDispatcher`, Valkey 9's `ValkeyModuleCommandDispatcher`:
the module's handler and everything it calls, not the reading of the request or the
writing of the reply to the socket), sends each row's calls, and prints the instructions
per call. A count, not a time: it does not depend on how busy the machine is, so two
builds compare exactly.

With `--twins` (no module loaded) it counts inside `FCALL` and `EVALSHA`
(`fcallCommand`, `evalShaCommand`: the Lua run and the server calls it makes, not the
request's reading nor the reply's writing) for each twin's function (the library
`lua/ratelimit.lua`) and script (`lua/scripts/<function>.lua`), and for the hand-written
forms of the same job and reply (`bench/lua/<kind>_minimal.lua` as a script, and the
same code as a function of a library of its own), and prints the ratios of the twin's
function to the hand-written function and of the twin's script to the hand-written
script. `--lua DIR` measures the twins of another tree (a checkout of main, say).
"""

import argparse
import hashlib
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


# The twins' rows (--twins): (command, its function, a call's keys and arguments, the
# hand-written script of the same job in bench/lua/ and its keys and arguments, or None).
# Allowed calls on 64 keys, as the module's rows.
TWIN_ROWS = [
    ("RL.FIXED", "rl_fixed",
     lambda i: ([f"f{i % 64}"], ["1000000000", "1h"]),
     "fixed_minimal", lambda i: ([f"f{i % 64}"], ["1000000000", "3600000"])),
    ("RL.GCRA", "rl_gcra",
     lambda i: ([f"g{i % 64}"], ["1000000", "1000000", "1s"]),
     "gcra_minimal", lambda i: ([f"g{i % 64}"], ["1000000", "1000000", "1000"])),
    # A day's window of 10 buckets: every call of a run falls in one bucket, so that the
    # state (and the count) does not depend on how fast the calls come.
    ("RL.SLIDING", "rl_sliding",
     lambda i: ([f"s{i % 64}"], ["LIMIT", "1d", "1000000000"]),
     "sliding_minimal", lambda i: ([f"s{i % 64}"], ["86400000", "1000000000"])),
    # The other twins, against their own earlier counts only.
    ("RL.MULTI", "rl_multi",
     lambda i: ([f"{{m{i % 64}}}a", f"{{m{i % 64}}}b"], ["LIMIT", "1h", "1000000000", "LIMIT", "1d", "1000000000"]),
     None, None),
    ("RL.LOG", "rl_log", lambda i: ([f"l{i % 64}"], ["10000", "1h", "META", "u"]), None, None),
    ("RL.LEASE", "rl_lease", lambda i: ([f"e{i % 64}"], ["10000", "1h"]), None, None),
    ("RL.ALL", "rl_all",
     lambda i: ([f"{{u{i % 64}}}g", f"{{u{i % 64}}}f", f"{{u{i % 64}}}s"],
                ["GCRA", "1", "1000000", "1000000", "1s", "FIXED", "2", "1000000000", "1h",
                 "SLIDING", "3", "LIMIT", "1d", "1000000000"]), None, None),
    ("CL.THROTTLE", "cl_throttle", lambda i: ([f"t{i % 64}"], ["99999", "1", "1"]), None, None),
]

BENCH_LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lua")


def minimal_library(names):
    """The hand-written scripts as one Functions library, `minimal`: each script's code,
    unchanged, as the body of a function of the same name (KEYS and ARGV its
    parameters)."""
    out = ["#!lua name=minimal"]
    for name in names:
        with open(os.path.join(BENCH_LUA, name + ".lua")) as f:
            body = f.read()
        out.append(f"redis.register_function('{name}', function(KEYS, ARGV)\n{body}\nend)")
    return "\n".join(out) + "\n"


def sha1(text):
    return hashlib.sha1(text.encode()).hexdigest()


def twin_forms(lua_dir):
    """The four forms of each twin row: (command, form, setup commands, the calls)."""
    with open(os.path.join(lua_dir, "ratelimit.lua")) as f:
        library = f.read()
    minimal = minimal_library([row[3] for row in TWIN_ROWS if row[3]])
    out = []
    for command, function, args, hand, hand_args in TWIN_ROWS:
        with open(os.path.join(lua_dir, "scripts", function + ".lua")) as f:
            script = f.read()

        def call(head, make):
            def one(i):
                keys, rest = make(i)
                return [*head, str(len(keys)), *keys, *rest]
            return one
        out += [
            (command, "function", [["FUNCTION", "LOAD", "REPLACE", library]],
             call(["FCALL", function], args)),
            (command, "script", [["SCRIPT", "LOAD", script]],
             call(["EVALSHA", sha1(script)], args)),
        ]
        if hand:
            with open(os.path.join(BENCH_LUA, hand + ".lua")) as f:
                hand_script = f.read()
            out += [
                (command, "hand-written function", [["FUNCTION", "LOAD", "REPLACE", minimal]],
                 call(["FCALL", hand], hand_args)),
                (command, "hand-written script", [["SCRIPT", "LOAD", hand_script]],
                 call(["EVALSHA", sha1(hand_script)], hand_args)),
            ]
    return out


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
        # Valkey 9 names the dispatcher ValkeyModuleCommandDispatcher.
        results[name] = count(server, ["--loadmodule", module],
                              ["RedisModuleCommandDispatcher", "ValkeyModuleCommandDispatcher"],
                              [], [make(i) for i in range(calls)])
    return results


def measure_twins(server, lua_dir, calls):
    """Instructions per call of each twin row's four forms: {(command, form): count}."""
    return {
        (command, form): count(server, [], ["fcallCommand", "evalShaCommand"], setup,
                               [make(i) for i in range(calls)])
        for command, form, setup, make in twin_forms(lua_dir)
    }


def count(server, server_args, toggles, setup, commands):
    """Instructions per command of `commands`, counted inside the functions `toggles`, on
    a server of its own started with `server_args` and given `setup` first."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "callgrind.out")
        port = free_port()
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no",
             *[f"--toggle-collect={t}" for t in toggles],
             f"--callgrind-out-file={out}", server, "--port", str(port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", d, *server_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            if setup:
                send_all(port, setup)
            send_all(port, commands)
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
        return total / len(commands)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", default=[])
    ap.add_argument("--twins", action="store_true",
                    help="count the twins (function, script) and the hand-written forms")
    ap.add_argument("--lua", default=os.path.join(os.path.dirname(BENCH_LUA), "..", "lua"),
                    help="the twins' directory (the library and scripts/), lua/ by default")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--only", help="the rows whose name contains this")
    ap.add_argument("--floor", help="the floor module (bench/out/floor.so after make bench)")
    o = ap.parse_args()
    if not o.module and not o.twins:
        ap.error("give --module (one or more) or --twins")
    if o.only:
        ROWS[:] = [r for r in ROWS if o.only in r[0]]
        TWIN_ROWS[:] = [r for r in TWIN_ROWS if o.only in r[0]]
    server = os.environ.get("REDIS_SERVER", "redis-server")
    if o.module:
        modules(server, o)
    if o.twins:
        twins(server, os.path.abspath(o.lua), o.calls)


def modules(server, o):
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


def twins(server, lua_dir, calls):
    """The twins' table: instructions per allowed call of each form, and the ratios."""
    got = measure_twins(server, lua_dir, calls)
    print("| twin (allowed) | function | script | hand-written function | hand-written script "
          "| function ÷ hand-written | script ÷ hand-written |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for command, *_, hand, _ in TWIN_ROWS:
        f, s = got[(command, "function")], got[(command, "script")]
        if hand:
            hf, hs = got[(command, "hand-written function")], got[(command, "hand-written script")]
            print(f"| {command} | {f:,.0f} | {s:,.0f} | {hf:,.0f} | {hs:,.0f} | {f / hf:.2f}× | {s / hs:.2f}× |")
        else:
            print(f"| {command} | {f:,.0f} | {s:,.0f} | | | | |")
    print(f"twins: {lua_dir}; server: {server}")


if __name__ == "__main__":
    main()
