"""The peer rows of `make bench`: the Python `limits` library (installed from PyPI into
the project's virtualenv, driven through its own API) against the native commands and
their Lua twins, on the same limits and keys, from Python clients.

Run by `python3 -m bench` (bench/peers.py) with the virtualenv's python:

    limits_client.py --port P --out result.json [--hits N] [--threads T] [--repeat R]

For each algorithm it measures, for the library, the native command and its twin, R
times (every client in turn, the order reversed every other time), the median and
every run:

- the server's time per hit: every command a hit sends (counted on the client), times
  that command's `usec_per_call` in `INFO commandstats` (a script's time includes the
  commands it runs), divided by the hits;
- the hits per second one Python client gets, one hit after the other;
- the latency of a hit (p50, p99, p99.9) with T threads hitting at once, each with its
  own connection. This is bound by the Python client (one process, one interpreter
  lock) on a small machine: it shows what a Python application sees, not the server.
  The percentiles are those of all runs' hits together.

Keys are drawn at random from 10 000 identifiers with a limit of 10 per minute, so
every hit is allowed and writes (about two hits per identifier).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List, Optional

import redis
from limits import RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import (FixedWindowRateLimiter, MovingWindowRateLimiter,
                               SlidingWindowCounterRateLimiter)

ROOT = Path(__file__).resolve().parent.parent
LIMIT, WINDOW = 10, "1m"
IDS = 10_000

# algorithm, the library's strategy, the native command (its key at index 1 or after a
# numkeys at index 1), the twin's file under lua/
ALGORITHMS = [
    ("fixed window", FixedWindowRateLimiter, ["RL.FIXED", "{key}", str(LIMIT), WINDOW], "rl_fixed.lua"),
    ("moving window", MovingWindowRateLimiter, ["RL.LOG", "{key}", str(LIMIT), WINDOW], "rl_log.lua"),
    ("sliding window counter", SlidingWindowCounterRateLimiter,
     ["RL.SLIDING", "1", "{key}", "LIMIT", WINDOW, str(LIMIT)], "rl_sliding.lua"),
]

SENT: Counter = Counter()
_lock = threading.Lock()
_original = redis.Redis.execute_command


def _counting(self, *args, **kwargs):
    with _lock:
        SENT[str(args[0]).upper()] += 1
    return _original(self, *args, **kwargs)


redis.Redis.execute_command = _counting  # every command any client here sends is counted


def commandstats(r: redis.Redis) -> Dict[str, Dict[str, float]]:
    return {k.lower(): v for k, v in r.info("commandstats").items()}


def usec_per_hit(r: redis.Redis, sent: Dict[str, int], hits: int) -> Optional[float]:
    stats = commandstats(r)
    total = 0.0
    for name, n in sent.items():
        st = stats.get(f"cmdstat_{name.lower()}")
        if not st or not st.get("calls"):
            return None
        total += n * st["usec"] / st["calls"]
    return total / hits


def percentile(sorted_ms: List[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def measure_once(make_hit: Callable[[], Callable[[str], object]], admin: redis.Redis, keys: List[str],
                 hits: int, threads: int, rnd: random.Random) -> dict:
    """One run: `hits` hits one after the other (hits/s, server time per hit), then the
    same number from `threads` threads at once (their latencies)."""
    hit = make_hit()
    for k in keys[:50]:  # warm up: scripts loaded, connections open
        hit(k)
    admin.flushall()
    admin.config_resetstat()
    SENT.clear()
    draws = [rnd.choice(keys) for _ in range(hits)]
    started = time.perf_counter()
    for k in draws:
        hit(k)
    seconds = time.perf_counter() - started
    sent = dict(SENT)
    server_us = usec_per_hit(admin, sent, hits)
    # Latency with many clients at once.
    admin.flushall()
    per_thread = max(1, hits // threads)
    lat: List[float] = []
    errors: List[str] = []

    def worker(n: int) -> None:
        h = make_hit()
        wr = random.Random(rnd.random() + n)
        mine = []
        try:
            for _ in range(per_thread):
                k = wr.choice(keys)
                t = time.perf_counter()
                h(k)
                mine.append((time.perf_counter() - t) * 1000)
        except Exception as e:  # reported, never hidden
            errors.append(f"{type(e).__name__}: {e}")
        with _lock:
            lat.extend(mine)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    conc_seconds = time.perf_counter() - t0
    return {"hits_per_s": hits / seconds, "server_usec_per_hit": server_us,
            "commands_per_hit": {k: v / hits for k, v in sent.items()},
            "concurrent_hits_per_s": len(lat) / conc_seconds if lat else None, "latencies": lat, "errors": errors}


def summarize(runs: List[dict], hits: int, threads: int) -> dict:
    """The median of the runs, their min and max, and the latency percentiles of all the
    runs' concurrent hits together."""
    lat = sorted(x for r in runs for x in r["latencies"])

    def med(key):
        vals = [r[key] for r in runs if r[key] is not None]
        return statistics.median(vals) if vals else None

    def runs_of(key):
        return [r[key] for r in runs if r[key] is not None]

    return {
        "hits": hits,
        "runs": len(runs),
        "hits_per_s": med("hits_per_s"),
        "hits_per_s_runs": runs_of("hits_per_s"),
        "server_usec_per_hit": med("server_usec_per_hit"),
        "server_usec_per_hit_runs": runs_of("server_usec_per_hit"),
        "commands_per_hit": runs[-1]["commands_per_hit"],
        "threads": threads,
        "concurrent_hits_per_s": med("concurrent_hits_per_s"),
        "p50_ms": percentile(lat, 0.50) if lat else None,
        "p99_ms": percentile(lat, 0.99) if lat else None,
        "p999_ms": percentile(lat, 0.999) if lat else None,
        "errors": [e for r in runs for e in r["errors"]][:3],
    }


def article_sliding(port: int):
    """The article's sliding-window pattern as published: EVAL of its INCR + EXPIRE
    script on the current second's key, then MGET of the last 15 seconds' keys and the
    sums of the last 1, 10 and 15 seconds against 1 000, 5 000 and 7 000, on the
    client. A hit is allowed when no sum is over its limit."""
    r = redis.Redis(port=port)
    script = r.register_script((ROOT / "lua" / "published" / "sliding_window_incr.lua").read_text())

    def hit(k: str) -> bool:
        now = int(time.time())
        script(keys=[f"{{{k}:}}{now}"])
        counts = r.mget([f"{{{k}:}}{now - i}" for i in range(15)])
        total = 0
        for i, c in enumerate(counts):
            total += int(c or 0)
            if (i == 0 and total > 1000) or (i == 9 and total > 5000) or (i == 14 and total > 7000):
                return False
        return True

    return hit


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--hits", type=int, default=20_000, help="hits per run")
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each client, interleaved")
    o = ap.parse_args()
    rnd = random.Random(7)
    url = f"redis://127.0.0.1:{o.port}"
    admin = redis.Redis(port=o.port)
    notes: List[str] = []  # left out because the module has no such command
    failures: List[str] = []  # any other error: the benchmark fails

    def left_out(what: str, e: Exception) -> None:
        if "unknown command" in str(e).lower():
            notes.append(f"{what} skipped: the loaded module has no such command")
        else:
            failures.append(f"{what}: {e}")

    item = RateLimitItemPerMinute(LIMIT)
    # (algorithm, variant, label, make_hit, keys), in the order of the table.
    entries = []
    for algo, strategy, native, twin_file in ALGORITHMS:
        keys = [f"peer:{algo.replace(' ', '-')}:{i:06d}" for i in range(IDS)]

        def library(strategy=strategy):
            limiter = strategy(storage_from_string(url))
            return lambda k: limiter.hit(item, k)

        entries.append((algo, "limits", f"limits {strategy.__name__}", library, keys))
        try:
            admin.execute_command(*[a.replace("{key}", f"peer:probe:{native[0]}") for a in native])
        except redis.ResponseError as e:
            left_out(f"{algo}: {native[0]}", e)
            continue
        numkeys = native[1] == "1" and native[2] == "{key}"

        def native_hit(native=native):
            r = redis.Redis(port=o.port)
            return lambda k: r.execute_command(*[a.replace("{key}", k) for a in native])

        entries.append((algo, "native", native[0], native_hit, keys))
        twin_path = ROOT / "lua" / "scripts" / twin_file
        if not twin_path.is_file():
            notes.append(f"{algo}: twin skipped, lua/{twin_file} does not exist")
            continue
        sha = admin.script_load(twin_path.read_text())
        rest = native[3:] if numkeys else native[2:]

        def twin_hit(rest=rest, sha=sha):
            r = redis.Redis(port=o.port)
            return lambda k: r.evalsha(sha, 1, k, *rest)

        entries.append((algo, "twin", f"lua/scripts/{twin_file}", twin_hit, keys))
    # The article's 1 s / 10 s / 15 s sliding windows: its pattern against RL.SLIDING.
    algo = "sliding windows 1 s, 10 s, 15 s"
    keys = [f"peer:article:{i:06d}" for i in range(IDS)]
    entries.append((algo, "published", "published 15-key pattern", lambda: article_sliding(o.port), keys))
    article = ["RL.SLIDING", "1", "{key}", "LIMIT", "1s", "1000", "LIMIT", "10s", "5000", "LIMIT", "15s", "7000"]
    try:
        admin.execute_command(*[a.replace("{key}", "peer:probe:article") for a in article])

        def sliding_hit():
            r = redis.Redis(port=o.port)
            return lambda k: r.execute_command(*[a.replace("{key}", k) for a in article])

        entries.append((algo, "native", "RL.SLIDING", sliding_hit, keys))
        sliding_sha = admin.script_load((ROOT / "lua" / "scripts" / "rl_sliding.lua").read_text())

        def sliding_twin():
            r = redis.Redis(port=o.port)
            return lambda k: r.evalsha(sliding_sha, 1, k, *article[3:])

        entries.append((algo, "twin", "lua/scripts/rl_sliding.lua", sliding_twin, keys))
    except redis.ResponseError as e:
        left_out(f"{algo}: RL.SLIDING", e)
    # Every client in turn in each repetition, in the opposite order every other one.
    runs: List[List[dict]] = [[] for _ in entries]
    for rep in range(o.repeat):
        order = list(range(len(entries))) if rep % 2 == 0 else list(reversed(range(len(entries))))
        for i in order:
            runs[i].append(measure_once(entries[i][3], admin, entries[i][4], o.hits, o.threads, rnd))
    admin.flushall()
    results = [{"algorithm": algo, "variant": variant, "label": label, "name": algo,
                **summarize(runs[i], o.hits, o.threads)}
               for i, (algo, variant, label, _, _) in enumerate(entries)]
    failures += [f"{r['label']} ({r['algorithm']}): {e}" for r in results for e in r["errors"]]
    o.out.write_text(json.dumps({"results": results, "notes": notes, "failures": failures, "limit": f"{LIMIT} per {WINDOW}",
                                 "ids": IDS}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
