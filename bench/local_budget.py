"""Local budgets on one hot key: N processes (2, 4, 8) on this machine checking one key.

Two phases, on one throwaway server with the module (verified to be the process this
run started), every measurement ``--rounds`` times, the configurations taking turns,
the best round reported with the load average around it:

1. **Throughput** (every check allowed): one RL.GCRA limit whose burst the run never
   exhausts (10^8 at once, refilled at one a second), so that every check is granted
   and counted. Checks per second of N processes, each in one loop:

   - ``raw``: RL.GCRA per check on a socket of its own, the request bytes made once and
     the reply read with the least work Python can do (the fastest plain call);
   - ``redis-py``: RL.GCRA per check with redis-py's ``execute_command``, the client
     the package uses (what an application calls);
   - ``budget b``: ``limiter.local_budget(Gcra(...), key, batch=b).take()`` for b in 1,
     10, 100, 1 000.

   Server calls per check from the server's own ``INFO commandstats`` (every call of
   the run: batches and give-backs); the units the server counted (its TAT, read after
   every budget is closed) against the units the takers spent.

2. **A limit that binds**: RL.FIXED with ALIGN, ``--limit`` units per 1 s window, taken
   by N processes that ask for far more. ``raw`` RL.FIXED per check against a budget of
   1 000 (and 100). Every allowed check is counted in the window its units came from
   (the window of the batch, from its reply's reset and the wall clock the server and
   the processes share), and the sum over the processes must never be above the limit in
   any window; the server's own count of each window is sampled too. A give-back whose
   reply says it reached a later window than the one it was sent in is counted (it would
   let that window over-grant). The latency of a refusal: a budget's (answered in the
   process, or after a call), and a plain call's.

    python -m bench.local_budget --module target/release/libredis_ratelimit.so
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import socket
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]

KEY = "rl:budget:hot"
# Phase 1: a burst that the run never exhausts, refilled at one a second.
GCRA = (100_000_000, 1, "1s")
WINDOW_MS = 1000  # phase 2's windows
BATCHES = (1, 10, 100, 1000)
PROCESSES = (2, 4, 8)


# -- the workers (one process each) ---------------------------------------------------------


def _raw_caller(port: int, argv: Tuple[Any, ...]):
    """One plain call of ``argv`` per invocation on a socket of its own: the request
    encoded once, the reply's first field read (0 allowed, 1 refused)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    parts = [b"*%d\r\n" % len(argv)]
    for a in argv:
        b = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    request = b"".join(parts)
    send = sock.sendall
    recv = sock.recv
    buf = bytearray()

    def call() -> bool:
        send(request)
        # A limiter reply: an array of integers ending in "\r\n"; read until all of it
        # came (the number of lines is 1 + its length).
        buf.clear()
        while True:
            buf.extend(recv(4096))
            n = buf.find(b"\r\n")
            if n > 0:
                want = int(buf[1:n]) + 1
                if buf.count(b"\r\n") >= want:
                    break
        return buf[n + 3:n + 4] == b"0"

    return call, sock


class Windows:
    """Phase 2: what one process took, counted in the window its units came from."""

    def __init__(self) -> None:
        self.spent = 0  # allowed checks since the last batch
        self.current: Optional[int] = None  # the window of the last batch
        self.by_window: Dict[int, int] = {}
        self.ambiguous = 0
        self.called = False
        self.refunds: List[Tuple[int, int, int]] = []  # (units, window sent in, window reached)

    def window_of(self, sent_ms: float, got_ms: float, reset_ms: int) -> Optional[int]:
        lo, hi = int(sent_ms) + reset_ms - 1, int(got_ms) + reset_ms + 1
        ends = [e for e in range(-(-lo // WINDOW_MS) * WINDOW_MS, hi + 1, WINDOW_MS)]
        if len(ends) != 1:
            self.ambiguous += 1
            return None
        return ends[0] // WINDOW_MS - 1

    def flush(self) -> None:
        if self.spent:
            self.by_window[self.current if self.current is not None else -1] = (
                self.by_window.get(self.current if self.current is not None else -1, 0) + self.spent
            )
            self.spent = 0


def _window_client(port: int, windows: Windows):
    """A redis-py client that tells ``windows`` of every batch and give-back."""
    import redis

    class Watched(redis.Redis):
        def execute_command(self, *args: Any, **options: Any) -> Any:
            sent = time.time() * 1000
            reply = super().execute_command(*args, **options)
            got = time.time() * 1000
            words = [a.decode() if isinstance(a, bytes) else str(a) for a in args]
            if "UPTO" in words:
                windows.called = True
                if int(reply[0]) == 0 and int(reply[-1]) > 0:
                    windows.flush()
                    windows.current = windows.window_of(sent, got, int(reply[4]))
            elif "REFUND" in words:
                units = int(words[words.index("COST") + 1]) if "COST" in words else 1
                reached = windows.window_of(sent, got, int(reply[4])) if int(reply[4]) > 0 else None
                windows.refunds.append((units, int(sent // WINDOW_MS), -1 if reached is None else reached))
            return reply

    return Watched(port=port)


def _plain_calls(call: Any, seconds: float) -> Tuple[int, int, float]:
    """One plain call per check for ``seconds``: checks, allowed, the time taken."""
    perf = time.perf_counter
    n = allowed = 0
    start = perf()
    end = start + seconds
    while True:
        for _ in range(32):
            if call():
                allowed += 1
        n += 32
        if perf() >= end:
            return n, allowed, perf() - start


def worker(job: Dict[str, Any], barrier: Any, out: Any) -> None:
    try:
        out.put(_work(job, barrier))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        import traceback

        out.put({"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"})
        try:
            barrier.abort()
        except Exception:  # noqa: BLE001
            pass


def _work(job: Dict[str, Any], barrier: Any) -> Dict[str, Any]:
    import redis

    from redis_native_ratelimit import Fixed, Gcra, RateLimiter

    mode, port, seconds = job["mode"], job["port"], job["seconds"]
    burst, count, period = GCRA
    limit = job.get("limit", 0)
    result: Dict[str, Any] = {"mode": mode}
    perf = time.perf_counter
    if mode in ("raw", "raw-fixed"):
        argv = ("RL.GCRA", KEY, burst, count, period) if mode == "raw" else ("RL.FIXED", KEY, limit, f"{WINDOW_MS}ms", "ALIGN")
        call, sock = _raw_caller(port, argv)
        call()  # connected, warm
        barrier.wait()
        n = allowed = 0
        lat: List[int] = []
        if mode == "raw":
            n, allowed, elapsed = _plain_calls(call, seconds)
            result.update(checks=n, allowed=allowed, seconds=elapsed, server_calls=n)
            sock.close()
            return result
        # raw-fixed: the latency of the refused calls too (every fourth).
        ns = time.perf_counter_ns
        start = perf()
        end = start + seconds
        while perf() < end:
            t = ns()
            ok = call()
            dt = ns() - t
            n += 1
            if ok:
                allowed += 1
            elif n % 4 == 0:
                lat.append(dt)
        result["denied_ns"] = lat
        result.update(checks=n, allowed=allowed, seconds=perf() - start, server_calls=n)
        sock.close()
        return result
    if mode == "redis-py":
        client = redis.Redis(port=port)
        args = ("RL.GCRA", KEY, burst, count, period)
        ex = client.execute_command
        ex(*args)
        barrier.wait()
        n, allowed, elapsed = _plain_calls(lambda: ex(*args)[0] == 0, seconds)
        result.update(checks=n, allowed=allowed, seconds=elapsed, server_calls=n)
        client.close()
        return result
    batch = job["batch"]
    if mode == "budget":
        client = redis.Redis(port=port)
        budget = RateLimiter(client).local_budget(Gcra(burst, count, period), KEY, batch=batch, timeout_ms=None)
        take = budget.take
        barrier.wait()
        n = allowed = 0
        start = perf()
        end = start + seconds
        while True:
            for _ in range(256):
                if take().allowed:
                    allowed += 1
            n += 256
            if perf() >= end:
                break
        elapsed = perf() - start
        budget.close()
        result.update(checks=n, allowed=allowed, seconds=elapsed, stats=budget.stats())
        client.close()
        return result
    # budget-fixed: a limit that binds; every allowed check counted in its window.
    windows = Windows()
    client = _window_client(port, windows)
    budget = RateLimiter(client).local_budget(Fixed(limit, f"{WINDOW_MS}ms", align=True), KEY, batch=batch, timeout_ms=None)
    take = budget.take
    ns = time.perf_counter_ns
    local: List[int] = []
    called: List[int] = []
    barrier.wait()
    n = allowed = denied = 0
    start = perf()
    end = start + seconds
    while perf() < end:
        for _ in range(64):
            windows.called = False
            t = ns()
            r = take()
            dt = ns() - t
            if r.allowed:
                windows.spent += 1
            else:
                denied += 1
                if windows.called:
                    called.append(dt)
                elif denied % 16 == 0:
                    local.append(dt)
        n += 64
    elapsed = perf() - start
    windows.flush()
    budget.close()
    result.update(
        checks=n,
        allowed=n - denied,
        seconds=elapsed,
        stats=budget.stats(),
        by_window=windows.by_window,
        ambiguous=windows.ambiguous,
        refunds=windows.refunds,
        local_ns=local,
        called_ns=called,
    )
    client.close()
    return result


# -- the parent ----------------------------------------------------------------------------------


def commandstats(r: Any) -> Dict[str, int]:
    out = {}
    for name, v in r.info("commandstats").items():
        out[name.replace("cmdstat_", "").lower()] = int(v["calls"])
    return out


def run_once(server: Any, mode: str, n: int, seconds: float, batch: int = 0, limit: int = 0) -> Dict[str, Any]:
    import redis

    r = redis.Redis(port=server.port)
    r.delete(KEY)
    r.config_resetstat()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(dict(mode=mode, port=server.port, seconds=seconds, batch=batch, limit=limit), barrier, out))
        for _ in range(n)
    ]
    for p in procs:
        p.start()
    samples: List[Tuple[int, int]] = []  # phase 2: (window, the server's count seen)
    try:
        barrier.wait(timeout=120)
        began = time.time()
        load_start = os.getloadavg()[0]
        if mode == "budget-fixed":
            sampler = redis.Redis(port=server.port)
            while time.time() < began + seconds:
                before = time.time() * 1000
                with sampler.pipeline(transaction=False) as p:
                    p.get(KEY)
                    p.pttl(KEY)
                    value, pttl = p.execute()
                after = time.time() * 1000
                if value is not None and pttl > 0:
                    lo, hi = int(before) + pttl - 1, int(after) + pttl + 1
                    ends = list(range(-(-lo // WINDOW_MS) * WINDOW_MS, hi + 1, WINDOW_MS))
                    if len(ends) == 1:
                        samples.append((ends[0] // WINDOW_MS - 1, int(value)))
                time.sleep(0.02)
            sampler.close()
        results = [out.get(timeout=seconds + 120) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    errors = [x["error"] for x in results if "error" in x]
    if errors:
        raise RuntimeError("a worker failed:\n" + errors[0])
    stats = commandstats(r)
    command = "rl.gcra" if mode in ("raw", "redis-py", "budget") else "rl.fixed"
    tat = r.get(KEY)
    r.close()
    checks = sum(x["checks"] for x in results)
    elapsed = max(x["seconds"] for x in results)
    row = dict(
        mode=mode,
        n=n,
        batch=batch,
        checks=checks,
        allowed=sum(x["allowed"] for x in results),
        seconds=elapsed,
        per_second=checks / elapsed,
        server_calls=stats.get(command, 0),
        load=(load_start, os.getloadavg()[0]),
        results=results,
        samples=samples,
        began=began,
    )
    if mode == "budget":
        # Every check allowed, every budget closed: the server's TAT counts exactly the
        # units kept (granted less given back) from the first batch's time on, one second
        # each; the takers must have spent no more.
        kept = sum(x["stats"]["granted"] - x["stats"]["given_back"] for x in results)
        row["kept"] = kept
        row["spent"] = sum(x["stats"]["spent"] for x in results)
        row["tat_units"] = None if tat is None else (int(tat) - int(began * 1e6)) / 1e6
    return row


def keep_best(best: Dict[Tuple[str, int, int], Dict[str, Any]], rnd: int, row: Dict[str, Any]) -> None:
    """Keep the round with the most checks a second of each configuration; say each."""
    key = (row["mode"], row["n"], row["batch"])
    if key not in best or row["per_second"] > best[key]["per_second"]:
        best[key] = row
    print(f"  round {rnd + 1}: {row['mode']:12} n={row['n']} batch={row['batch']:<5} {row['per_second']:>12,.0f} checks/s  "
          f"load {row['load'][0]:.2f}", file=sys.stderr, flush=True)


def quantile(xs: List[int], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def machine() -> str:
    from bench.report import cpu_model

    return f"{os.cpu_count()} cores ({cpu_model() or platform.machine()}), Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", required=True, help="the module's .so")
    ap.add_argument("--server", default="redis-server", help="redis-server or valkey-server")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one measurement")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of every measurement (the best is reported)")
    ap.add_argument("--processes", default=",".join(map(str, PROCESSES)))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--limit", type=int, default=20_000, help="phase 2: units per 1 s window (below what plain calls reach, so that both refuse)")
    opts = ap.parse_args()
    import redis

    counts = [int(x) for x in opts.processes.split(",")]
    batches = [int(x) for x in opts.batches.split(",")]
    from bench.server import Server

    server = Server(opts.server, Path(opts.module).resolve())
    server.start()  # on a free port, verified to be the process it started
    info = redis.Redis(port=server.port).info("server")
    version = info.get("valkey_version") or info.get("redis_version")
    print(f"# Local budgets on one hot key\n\nMachine: {machine()}; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} at the start.")
    print(f"Server: {info.get('server_name', 'redis')} {version}, the module's release build; redis-py {redis.__version__}.\n")
    began = time.time()
    try:
        configs1 = [(m, n, 0) for n in counts for m in ("raw", "redis-py")] + [("budget", n, b) for n in counts for b in batches]
        best1: Dict[Tuple[str, int, int], Dict[str, Any]] = {}
        problems: List[str] = []
        for rnd in range(opts.rounds):
            for mode, n, b in configs1:
                row = run_once(server, mode, n, opts.seconds, batch=b)
                if mode == "budget":
                    if row["spent"] > row["kept"]:
                        problems.append(f"budget {b}, {n} processes: spent {row['spent']} > kept {row['kept']}")
                    if row["tat_units"] is not None and row["kept"] > row["tat_units"] + 1:
                        problems.append(f"budget {b}, {n} processes: kept {row['kept']} > the server's {row['tat_units']:.0f}")
                keep_best(best1, rnd, row)
        print("## Every check allowed (RL.GCRA, a burst the run never exhausts)\n")
        print(f"Best of {opts.rounds} rounds of {opts.seconds:g} s; ratios against the faster plain call of the same "
              "processes in the same run (`raw`).\n")
        print("| processes | how | checks/s | × raw | × redis-py | server calls / check | load (1 min) |")
        print("|---|---|---|---|---|---|---|")
        for n in counts:
            raw = best1[("raw", n, 0)]["per_second"]
            rpy = best1[("redis-py", n, 0)]["per_second"]
            for mode, b in [("raw", 0), ("redis-py", 0)] + [("budget", b) for b in batches]:
                row = best1[(mode, n, b)]
                how = {"raw": "RL.GCRA per check, raw socket", "redis-py": "RL.GCRA per check, redis-py"}.get(mode, f"local budget, batch {b:,}")
                calls = row["server_calls"] / row["checks"]
                print(f"| {n} | {how} | {row['per_second']:,.0f} | {row['per_second'] / raw:.2f} | "
                      f"{row['per_second'] / rpy:.2f} | {calls:.4f} | {row['load'][0]:.2f}–{row['load'][1]:.2f} |")
        print()
        for n in counts:
            for b in batches:
                row = best1[("budget", n, b)]
                print(f"- {n} processes, batch {b}: {row['spent']:,} units spent, {row['kept']:,} kept by the server "
                      f"(granted less given back), the server's TAT says {row['tat_units']:,.0f}")
        # Phase 2.
        configs2 = [("raw-fixed", n, 0) for n in counts] + [("budget-fixed", n, b) for n in counts for b in (100, 1000)]
        best2: Dict[Tuple[str, int, int], Dict[str, Any]] = {}
        over: List[str] = []
        for rnd in range(opts.rounds):
            for mode, n, b in configs2:
                row = run_once(server, mode, n, opts.seconds, batch=b, limit=opts.limit)
                if mode == "budget-fixed":
                    totals: Dict[int, int] = {}
                    for x in row["results"]:
                        for w, k in x["by_window"].items():
                            totals[int(w)] = totals.get(int(w), 0) + k
                    row["totals"] = totals
                    row["max_window"] = max(totals.values()) if totals else 0
                    row["late"] = sum(1 for x in row["results"] for u, s, reached in x["refunds"] if reached > s)
                    row["refunds"] = sum(len(x["refunds"]) for x in row["results"])
                    row["ambiguous"] = sum(x["ambiguous"] for x in row["results"])
                    server_max: Dict[int, int] = {}
                    for w, c in row["samples"]:
                        server_max[w] = max(server_max.get(w, 0), c)
                    row["server_max"] = max(server_max.values()) if server_max else 0
                    row["unattributed"] = totals.pop(-1, 0)
                    row["max_window"] = max(totals.values()) if totals else 0
                    for w, k in totals.items():
                        if k > opts.limit:
                            over.append(f"{n} processes, batch {b}, window {w}: {k} > {opts.limit}")
                keep_best(best2, rnd, row)
        print(f"\n## A limit that binds (RL.FIXED ALIGN, {opts.limit:,} per 1 s window)\n")
        print("| processes | how | checks/s | allowed/s | × raw (checks) | server calls / check | most taken in a window | the server's count, most seen | late give-backs | load (1 min) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n in counts:
            raw = best2[("raw-fixed", n, 0)]
            for mode, b in [("raw-fixed", 0), ("budget-fixed", 100), ("budget-fixed", 1000)]:
                row = best2[(mode, n, b)]
                how = "RL.FIXED per check, raw socket" if mode == "raw-fixed" else f"local budget, batch {b:,}"
                most = f"{row['max_window']:,}" if mode != "raw-fixed" else "—"
                seen = f"{row['server_max']:,}" if mode != "raw-fixed" else "—"
                late = f"{row['late']} of {row['refunds']}" if mode != "raw-fixed" else "—"
                print(f"| {n} | {how} | {row['per_second']:,.0f} | {row['allowed'] / row['seconds']:,.0f} | "
                      f"{row['per_second'] / raw['per_second']:.2f} | {row['server_calls'] / row['checks']:.5f} | {most} | {seen} | {late} | "
                      f"{row['load'][0]:.2f}–{row['load'][1]:.2f} |")
        print("\nLatency of a refusal (µs): p50 / p99 / p99.9")
        print()
        print("| processes | plain call (RL.FIXED, refused) | budget 1 000, answered in the process | budget 1 000, after a call |")
        print("|---|---|---|---|")
        for n in counts:
            raw = [d for x in best2[("raw-fixed", n, 0)]["results"] for d in x.get("denied_ns", [])]
            row = best2[("budget-fixed", n, 1000)]
            local = [d for x in row["results"] for d in x["local_ns"]]
            called = [d for x in row["results"] for d in x["called_ns"]]

            def q(xs: List[int]) -> str:
                if not xs:
                    return "none"
                return " / ".join(f"{quantile(xs, p) / 1000:.1f}" for p in (0.5, 0.99, 0.999)) + f" ({len(xs):,} sampled)"

            print(f"| {n} | {q(raw)} | {q(local)} | {q(called)} |")
        print()
        ambiguous = sum(r["ambiguous"] for r in best2.values() if "ambiguous" in r)
        unattributed = sum(r["unattributed"] for r in best2.values() if "unattributed" in r)
        print(f"Batches whose window the reply left undecided: {ambiguous} ({unattributed:,} units spent from them, "
              "left out of the per-window sums).")
        print(f"Over-grants: {'none' if not over else '; '.join(over)}.")
        print(f"Accounting: {'consistent' if not problems else '; '.join(problems)}.")
        print(f"\nLoad average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
              f"the run took {time.time() - began:.0f} s.")
        return 1 if over or problems else 0
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
