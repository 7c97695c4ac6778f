#!/usr/bin/env python3
"""The rate limit service against the reference (envoyproxy/ratelimit), on one Redis.

Starts redis-server (or --server) with the module on a free 127.0.0.1 port, this
service, and, when --reference names a built `ratelimit` binary, the reference with
the same configuration files, both on loopback. Then, for each service in turn, in
rounds (the services alternate, so a busy moment of the machine hits both):

- requests per second with --concurrency clients (closed loop);
- p50/p99 latency at a fixed load (--rate requests per second, open loop);
- Redis commands and server microseconds per request, from INFO commandstats;
- the over-count: --concurrency clients for --overcount-seconds sending requests that
  carry a descriptor allowing one request an hour and one allowing a million; how much
  the second one counted beyond the requests that were let through (the reference
  also with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true).

Prints a Markdown table (and writes it to --out), with the machine and its load.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

CONFIG = """\
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
  - key: route
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
"""

OVERCOUNT = """\
domain: overcount
descriptors:
  - key: tight
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: roomy
    rate_limit: {unit: hour, requests_per_unit: 1000000}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_cli(port, *args):
    out = subprocess.run(
        ["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=30
    )
    return out.stdout


def start_redis(server, module, workdir):
    port = free_port()
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", workdir, "--loadmodule", module],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 30
    while time.time() < deadline:
        info = redis_cli(port, "INFO", "server")
        m = re.search(r"process_id:(\d+)", info)
        if m:
            if int(m.group(1)) != proc.pid:
                proc.kill()
                sys.exit(f"port {port} is served by another process")
            return proc, port
        time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start")


def wait_port(port, proc, log):
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"a service exited:\n{open(log).read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    sys.exit(f"a service did not listen:\n{open(log).read()}")


def start_service(name, binary, env, grpc_port, workdir):
    log = os.path.join(workdir, f"{name}.log")
    proc = subprocess.Popen([binary], env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    wait_port(grpc_port, proc, log)
    return proc


def commandstats(port):
    calls = usec = 0
    per = {}
    for line in redis_cli(port, "INFO", "commandstats").splitlines():
        m = re.match(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)", line)
        if m:
            calls += int(m.group(2))
            usec += int(m.group(3))
            per[m.group(1).lower()] = int(m.group(2))
    return calls, usec, per


def load(tool, target, *args):
    out = subprocess.run([tool, "--target", target, *args], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"the load generator failed: {out.stderr}")
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--service", required=True, help="this service's binary (a release build)")
    p.add_argument("--load", required=True, help="the ratelimit-envoy-load binary")
    p.add_argument("--module", required=True, help="the module (libredis_ratelimit.so)")
    p.add_argument("--server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    p.add_argument("--reference", help="a built envoyproxy/ratelimit binary (optional)")
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--rate", type=int, default=2000, help="requests per second of the latency runs")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--descriptors", default="1,3", help="descriptors per request, for each scenario")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--overcount-seconds", type=int, default=2,
                   help="how long --concurrency clients send the over-count requests")
    p.add_argument("--out", help="also write the table to this file")
    a = p.parse_args()

    workdir = tempfile.mkdtemp(prefix="ratelimit-envoy-bench-")
    root = os.path.join(workdir, "runtime")
    conf = os.path.join(root, "ratelimit", "config")
    os.makedirs(conf)
    with open(os.path.join(conf, "bench.yaml"), "w") as f:
        f.write(CONFIG)
    with open(os.path.join(conf, "overcount.yaml"), "w") as f:
        f.write(OVERCOUNT)
    procs = []
    try:
        redis, port = start_redis(a.server, a.module, workdir)
        procs.append(redis)
        base = {"PATH": os.environ.get("PATH", ""), "RUNTIME_ROOT": root,
                "RUNTIME_SUBDIRECTORY": "ratelimit", "LOG_LEVEL": "warn",
                "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": f"127.0.0.1:{port}"}
        services = {}
        ours = free_port()
        env = dict(base, GRPC_HOST="127.0.0.1", GRPC_PORT=str(ours), HOST="127.0.0.1",
                   PORT=str(free_port()))
        procs.append(start_service("ratelimit-envoy", a.service, env, ours, workdir))
        services["ratelimit-envoy"] = ours
        # The over-count is also measured on the reference with its option to stop
        # counting in every descriptor once one is over its limit.
        overcounted = {}
        if a.reference:
            for name, extra in [("reference", {}),
                                ("reference, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true",
                                 {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"})]:
                ref = free_port()
                env = dict(base, GRPC_HOST="127.0.0.1", GRPC_PORT=str(ref), HOST="127.0.0.1",
                           PORT=str(free_port()), DEBUG_HOST="127.0.0.1", DEBUG_PORT=str(free_port()),
                           USE_STATSD="false", RUNTIME_WATCH_ROOT="false", REDIS_POOL_SIZE="10", **extra)
                procs.append(start_service(name.split(",")[0] + str(len(procs)), a.reference, env, ref, workdir))
                overcounted[name] = ref
                if not extra:
                    services[name] = ref
        time.sleep(1)

        results = {}
        scenarios = [int(d) for d in a.descriptors.split(",")]
        for rnd in range(a.rounds):
            for n in scenarios:
                for name, gport in services.items():
                    target = f"http://127.0.0.1:{gport}"
                    redis_cli(port, "FLUSHALL")
                    redis_cli(port, "CONFIG", "RESETSTAT")
                    m = load(a.load, target, "--mode", "max", "--seconds", str(a.seconds),
                             "--concurrency", str(a.concurrency), "--descriptors", str(n))
                    calls, usec, per = commandstats(port)
                    r = load(a.load, target, "--mode", "rate", "--seconds", str(a.seconds),
                             "--rate", str(a.rate), "--descriptors", str(n))
                    row = {"rps": m["rps"], "p50": r["p50_us"], "p99": r["p99_us"],
                           "cmds": calls / max(m["requests"], 1), "usec": usec / max(m["requests"], 1),
                           "errors": m["errors"] + r["errors"], "per": per}
                    results.setdefault((name, n), []).append(row)
                    print(f"round {rnd + 1} {name} {n} descriptor(s): {row['rps']:.0f} req/s, "
                          f"p50 {row['p50']} us, p99 {row['p99']} us, {row['cmds']:.2f} commands and "
                          f"{row['usec']:.1f} us of Redis per request", file=sys.stderr)

        over = {}
        for name, gport in {"ratelimit-envoy": services["ratelimit-envoy"], **overcounted}.items():
            redis_cli(port, "FLUSHALL")
            hour = int(time.time()) // 3600 * 3600
            m = load(a.load, f"http://127.0.0.1:{gport}", "--mode", "max", "--concurrency",
                     str(a.concurrency), "--seconds", str(a.overcount_seconds), "--domain", "overcount",
                     "--keys", "tight,roomy", "--constant")
            allowed = m["requests"] - m["over_limit"]
            roomy = redis_cli(port, "GET", f"overcount_roomy_v0_{hour}").strip() or "0"
            over[name] = (m["requests"], allowed, int(roomy))

        # Best of the rounds, each figure on its own: the least disturbed run.
        results = {k: {"rps": max(r["rps"] for r in rows), "p50": min(r["p50"] for r in rows),
                       "p99": min(r["p99"] for r in rows), "cmds": min(r["cmds"] for r in rows),
                       "usec": min(r["usec"] for r in rows), "errors": sum(r["errors"] for r in rows)}
                   for k, rows in results.items()}
        load1 = open("/proc/loadavg").read().split()[:3]
        cpu = "?"
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        lines = [f"Machine: {os.cpu_count()} cores ({cpu}), load average {' '.join(load1)} at the end; "
                 f"{a.server.split('/')[-1]} on 127.0.0.1, {a.concurrency} clients for requests per second, "
                 f"{a.rate} requests per second for latency, {a.seconds} s a run, best of {a.rounds} rounds.", "",
                 "| service | descriptors | requests/s | p50 µs | p99 µs | Redis commands / request | Redis µs / request |",
                 "|---|---|---|---|---|---|---|"]
        for n in scenarios:
            for name in services:
                r = results[(name, n)]
                lines.append(f"| {name} | {n} | {r['rps']:.0f} | {r['p50']} | {r['p99']} | {r['cmds']:.2f} | {r['usec']:.2f} |")
            if "reference" in services:
                o, ref = results[("ratelimit-envoy", n)], results[("reference", n)]
                lines.append(f"| ratio (ours / reference) | {n} | {o['rps'] / ref['rps']:.2f} | "
                             f"{o['p50'] / max(ref['p50'], 1):.2f} | {o['p99'] / max(ref['p99'], 1):.2f} | "
                             f"{o['cmds'] / max(ref['cmds'], 1e-9):.2f} | {o['usec'] / max(ref['usec'], 1e-9):.2f} |")
        lines += ["", "| service | requests | let through | counted by the roomy descriptor | over-count |",
                  "|---|---|---|---|---|"]
        for name, (total, allowed, roomy) in over.items():
            lines.append(f"| {name} | {total} | {allowed} | {roomy} | {roomy - allowed} |")
        table = "\n".join(lines)
        print(table)
        if a.out:
            with open(a.out, "w") as f:
                f.write(table + "\n")
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
