"""The comparisons of `make bench` that are not one command against its twin:

- RL.ALL against the three single commands it stands for, sent in one pipeline (which is
  not atomic), and against its twin;
- RL.LOG with COST 100 against COST 1 (one member per allowed request, whatever its cost);
- RL.LOG's longest single calls at its bounds (limit 10 000, COST 10 000, 256-byte META),
  from the server's slow log;
- CL.THROTTLE on this module against CL.THROTTLE on redis-cell, when a build of
  redis-cell is given (`REDIS_CELL_MODULE=/path/to/libredis_cell.so make bench`);

and the targets the issues set, each next to what this run measured. The targets are
reported, never asserted. Standard library only.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from bench.common import RAND, ROOT, log
from bench.measure import commandstats, redis_benchmark
from bench.plan import command_exists, load_script
from bench.resp import Client, ReplyError
from bench.server import Server


@dataclass
class Section:
    """One table of its own: a title, what it shows, the table, and its CSV lines."""

    title: str
    intro: str
    headers: List[str]
    rows: List[List[str]]
    right: List[bool]
    csv: List[dict] = field(default_factory=list)


def spread(vals: List[float]) -> Tuple[float, float, float]:
    return statistics.median(vals), min(vals), max(vals)


def us(vals: List[float]) -> str:
    m, lo, hi = spread(vals)
    return f"{m:.2f} ({lo:.2f}–{hi:.2f})"


def ratio_runs(a: List[float], b: List[float]) -> List[float]:
    return [x / y for x, y in zip(a, b) if y]


def rx(vals: List[float]) -> str:
    m, lo, hi = spread(vals)
    return f"{m:.2f}× ({lo:.2f}–{hi:.2f})"


def twin_script(c: Client, name: str) -> str:
    return load_script(c, (ROOT / "lua" / "scripts" / name).read_text())


# --- RL.ALL against the three single commands -------------------------------------------

ALL_KEYS = ("rl:allvs:g:", "rl:allvs:f:", "rl:allvs:s:")
ALL_RULES = ["GCRA", "1", "1000000", "1000000", "1s", "FIXED", "2", "1000000", "1h",
             "SLIDING", "3", "LIMIT", "1m", "1000000"]


def all_lines(i: int, sha: str) -> Dict[str, List[List[str]]]:
    """The commands of one request on identifier i, for each way of sending it."""
    g, f, s = (p + "%012d" % i for p in ALL_KEYS)
    return {
        "RL.ALL": [["RL.ALL", "3", g, f, s, *ALL_RULES]],
        "three single commands": [["RL.GCRA", g, "1000000", "1000000", "1s"],
                                  ["RL.FIXED", f, "1000000", "1h"],
                                  ["RL.SLIDING", "1", s, "LIMIT", "1m", "1000000"]],
        "RL.ALL function": [["FCALL", "rl_all", "3", g, f, s, *ALL_RULES]],
        "three single functions": [["FCALL", "rl_gcra", "1", g, "1000000", "1000000", "1s"],
                                   ["FCALL", "rl_fixed", "1", f, "1000000", "1h"],
                                   ["FCALL", "rl_sliding", "1", s, "LIMIT", "1m", "1000000"]],
        "RL.ALL script": [["EVALSHA", sha, "3", g, f, s, *ALL_RULES]],
    }


ALL_STATS = {"RL.ALL": ("rl.all",), "three single commands": ("rl.gcra", "rl.fixed", "rl.sliding"),
             "RL.ALL function": ("fcall",), "three single functions": ("fcall",),
             "RL.ALL script": ("evalsha",)}
# Calls counted per request under each way's stats.
ALL_CALLS = {"three single functions": 3}


def run_all_vs_singles(c: Client, opts) -> Tuple[Optional[Section], List[str]]:
    """Server µs per request of each way, the same identifiers in the same order, runs
    interleaved; the keys are written once first so that every request updates them."""
    if not command_exists(c, "RL.ALL"):
        return None, []
    sha = twin_script(c, "rl_all.lua")
    c.call("FUNCTION", "LOAD", "REPLACE", (ROOT / "lua" / "ratelimit.lua").read_text())
    keys = 10_000
    requests = max(2_000, opts.requests // 3)
    batch = 16
    c.call("FLUSHALL")
    for start in range(0, keys, 1000):
        for r in c.pipeline([all_lines(i, sha)["RL.ALL"][0] for i in range(start, start + 1000)]):
            if isinstance(r, ReplyError) or not (isinstance(r, list) and r[0] == 0):
                return None, [f"RL.ALL against the three commands: the first call replied {r!r}"]
    runs: Dict[str, List[float]] = {k: [] for k in ALL_STATS}
    for rep in range(opts.repeat):
        ids = random.Random(rep).choices(range(keys), k=requests)
        order = list(ALL_STATS) if rep % 2 == 0 else list(reversed(ALL_STATS))
        for way in order:
            c.call("CONFIG", "RESETSTAT")
            for start in range(0, requests, batch):
                cmds = [cmd for i in ids[start:start + batch] for cmd in all_lines(i, sha)[way]]
                for r in c.pipeline(cmds):
                    if isinstance(r, ReplyError) or not (isinstance(r, list) and r[0] == 0):
                        return None, [f"RL.ALL against the three commands: {way} replied {r!r}"]
            st = commandstats(c)
            total = sum(st.get(name, {}).get("usec", 0) for name in ALL_STATS[way])
            calls = [st.get(name, {}).get("calls", 0) for name in ALL_STATS[way]]
            if any(n != requests * ALL_CALLS.get(way, 1) for n in calls):
                return None, [f"RL.ALL against the three commands: {way}: {calls} calls counted for {requests}"]
            runs[way].append(total / requests)
    c.call("FLUSHALL")
    base = runs["RL.ALL"]
    functions = runs["three single functions"]
    rows, csv = [], []
    for way, vals in runs.items():
        r = ratio_runs(vals, base)
        rows.append([way, " + ".join(s.upper() for s in ALL_STATS[way]) + (" × 3" if way in ALL_CALLS else ""),
                     us(vals), "1×" if way == "RL.ALL" else rx(r),
                     rx(ratio_runs(vals, functions)) if way == "RL.ALL function" else "–"])
        csv.append(dict(command=f"RL.ALL vs {way}", variant="all-vs-singles", mode="allowed", pipeline=batch,
                        clients=1, requests=requests, keyspace=keys, runs=len(vals),
                        usec_per_call=spread(vals)[0], usec_per_call_min=min(vals), usec_per_call_max=max(vals),
                        usec_per_call_runs=";".join(f"{v:.3f}" for v in vals),
                        ratio_to="RL.ALL" if way != "RL.ALL" else None,
                        ratio=spread(r)[0] if way != "RL.ALL" else None))
    log("  " + "; ".join(f"{row[0]} {row[2]} µs/request" for row in rows))
    intro = (f"One request judged by a GCRA, a fixed window and a sliding window on three keys of one identifier "
             f"(`RL.ALL 3 g f s GCRA 1 1000000 1000000 1s FIXED 2 1000000 1h SLIDING 3 LIMIT 1m 1000000`), "
             f"sent three ways from one connection, {batch} requests per pipeline, {requests:,} requests per run "
             f"on {keys:,} identifiers whose keys exist, {opts.repeat} runs of each in turn: as RL.ALL, as the "
             "three single commands in one pipeline (which is not atomic: another client can act between them, "
             "and a request denied by one is still counted by the others), as RL.ALL's function and the three "
             "single functions (FCALL), and as RL.ALL's script (EVALSHA). *Server µs/request*: the `usec` of "
             "every command the request sends over the requests (median, min–max); *÷ RL.ALL*, *÷ three "
             "functions*: run by run.")
    headers = ["Sent as", "Commands", "Server µs/request", "÷ RL.ALL", "÷ three functions"]
    return Section("RL.ALL against the three single commands", intro, headers, rows,
                   [False, False, True, True, True], csv), []


# --- RL.LOG: COST 100 against COST 1 ----------------------------------------------------

def run_log_cost_units(c: Client, server: Server, opts, raw_log) -> Tuple[Optional[Section], List[str]]:
    """Allowed calls of COST 1 and COST 100 on 1 000 keys (a run sends each key a few
    dozen calls: at COST 100 a few thousand units, under the limit of 10 000), native
    and twin."""
    if not command_exists(c, "RL.LOG"):
        return None, []
    sha = twin_script(c, "rl_log.lua")
    keys, requests = 1_000, max(20 * opts.clients, opts.requests // 3)
    runs: Dict[Tuple[str, int], List[float]] = {}
    for rep in range(opts.repeat):
        for kind in ("native", "twin"):
            for cost in ((1, 100) if rep % 2 == 0 else (100, 1)):
                c.call("FLUSHALL")
                args = ["rl:logunits:" + RAND, "10000", "1h", "META", "user:42", "COST", str(cost)]
                argv = ["RL.LOG", *args] if kind == "native" else ["EVALSHA", sha, "1", *args]
                probe = c.pipeline([[a.replace(RAND, "probe") for a in argv]])[0]
                if not (isinstance(probe, list) and probe[0] == 0):
                    return None, [f"RL.LOG COST {cost} ({kind}): the first call replied {probe!r}"]
                c.call("CONFIG", "RESETSTAT")
                run, err = redis_benchmark(opts.redis_benchmark, server.port, argv, opts.clients, 16, requests, keys,
                                           opts.run_timeout, raw_log, opts.client_cpus)
                st = commandstats(c).get("rl.log" if kind == "native" else "evalsha")
                if run is None or not st or st.get("calls", 0) < requests:
                    return None, [f"RL.LOG COST {cost} ({kind}), run {rep + 1}: "
                                  f"{err or 'fewer calls counted than requests sent'}"]
                # One member per allowed call, whatever its cost: the logs hold one
                # entry per call the server ran (none denied, none failed; the probe's
                # key is not among them, its call was before the stats were reset).
                entries = sum(c.pipeline([["ZCARD", "rl:logunits:%012d" % k] for k in range(keys)]))
                if st.get("failed_calls", 0) or entries != st["calls"]:
                    return None, [f"RL.LOG COST {cost} ({kind}): {entries} entries after {st['calls']:.0f} calls "
                                  f"({st.get('failed_calls', 0):.0f} failed)"]
                runs.setdefault((kind, cost), []).append(st["usec"] / st["calls"])
    c.call("FLUSHALL")
    rows, csv = [], []
    for kind in ("native", "twin"):
        one, hundred = runs[(kind, 1)], runs[(kind, 100)]
        r = ratio_runs(hundred, one)
        rows.append([kind, us(one), us(hundred), rx(r)])
        for cost, vals in ((1, one), (100, hundred)):
            csv.append(dict(command=f"RL.LOG COST {cost}", variant=kind, mode="allowed", pipeline=16,
                            clients=opts.clients, requests=requests, keyspace=keys, runs=len(vals),
                            usec_per_call=spread(vals)[0], usec_per_call_min=min(vals), usec_per_call_max=max(vals),
                            usec_per_call_runs=";".join(f"{v:.3f}" for v in vals),
                            ratio_to="COST 1" if cost == 100 else None, ratio=spread(r)[0] if cost == 100 else None))
    log("  " + "; ".join(f"RL.LOG {row[0]} COST 1 {row[1]} µs, COST 100 {row[2]} µs ({row[3]})" for row in rows))
    intro = (f"Allowed calls (`RL.LOG key 10000 1h META user:42 COST n`) on {keys:,} keys, pipeline 16, "
             f"{requests:,} requests per run, {opts.repeat} runs of each: a call writes one member whatever its "
             "cost, so COST 100 should cost what COST 1 costs. Server µs per call (median, min–max); the ratio run "
             "by run.")
    return Section("RL.LOG: COST 100 against COST 1", intro, ["Variant", "COST 1 µs/call", "COST 100 µs/call",
                                                               "COST 100 ÷ COST 1"], rows, [False, True, True, True],
                   csv), []


# --- RL.LOG: the longest single calls at its bounds -------------------------------------

LIMIT = 10_000
META = "m" * 256
T0 = 1_900_000_000_000
WORST_TRIALS = 5


def worst_cases():
    """(name, fill, call) for each case: `fill` the calls that set the key up (AT in ms),
    `call` the measured call's arguments after the key; each trial on a new key."""
    full = [["RL.LOG", None, str(LIMIT), "1h", "META", META, "AT", str(T0 + i)] for i in range(LIMIT)]
    burst = [["RL.LOG", None, str(LIMIT), "1h", "META", META, "AT", str(T0 + i // 10)] for i in range(LIMIT)]
    return [
        ("allowed: COST 10 000 on an empty log", [], [str(LIMIT), "1h", "META", META, "COST", str(LIMIT),
                                                     "AT", str(T0)], 0),
        ("allowed: one more on 9 999 entries", full[:-1], [str(LIMIT), "1h", "META", META, "AT", str(T0 + LIMIT)], 0),
        ("allowed: 10 000 entries have left at once (64 removed), COST 10 000 enters",
         burst, [str(LIMIT), "1h", "META", META, "COST", str(LIMIT), "AT", str(T0 + 3_600_000 + 1_000)], 0),
        ("denied: COST 1 on 10 000 entries", full, [str(LIMIT), "1h", "META", META, "AT", str(T0 + LIMIT)], 1),
        ("denied: COST 10 000 on 10 000 entries", full,
         [str(LIMIT), "1h", "META", META, "COST", str(LIMIT), "AT", str(T0 + LIMIT)], 1),
    ]


def slow_call(c: Client, argv: List[str]) -> Tuple[object, int]:
    """The reply of one call and its duration in the server's slow log (µs)."""
    c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    c.call("SLOWLOG", "RESET")
    reply = c.pipeline([argv])[0]
    entries = c.call("SLOWLOG", "GET", "10")
    c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    name = argv[0].encode()
    durations = [int(e[2]) for e in entries if e[3] and e[3][0].upper() == name]
    return reply, durations[0] if durations else -1


def run_log_worst(c: Client, opts) -> Tuple[Optional[Section], List[str]]:
    """Each case, native and twin, on a new key per trial: median and longest."""
    if not command_exists(c, "RL.LOG"):
        return None, []
    sha = twin_script(c, "rl_log.lua")
    old = c.call("CONFIG", "GET", "slowlog-log-slower-than")
    rows, csv, problems = [], [], []
    try:
        for name, fill, call, expect in worst_cases():
            got: Dict[str, List[int]] = {"native": [], "twin": []}
            for trial in range(WORST_TRIALS):
                for kind in ("native", "twin"):
                    key = f"rl:logworst:{kind}:{trial}"
                    c.call("DEL", key)
                    for start in range(0, len(fill), 2000):
                        for r in c.pipeline([[a if a is not None else key for a in f] for f in fill[start:start + 2000]]):
                            if isinstance(r, ReplyError) or r[0] != 0:
                                return None, [f"RL.LOG worst calls, {name}: the fill replied {r!r}"]
                    argv = ["RL.LOG", key, *call] if kind == "native" else ["EVALSHA", sha, "1", key, *call]
                    reply, usec = slow_call(c, argv)
                    if not isinstance(reply, list) or reply[0] != expect or usec < 0:
                        return None, [f"RL.LOG worst calls, {name} ({kind}): replied {reply!r}"]
                    got[kind].append(usec)
                    c.call("DEL", key)
            rows.append([name, f"{statistics.median(got['native']):.0f}", f"{max(got['native'])}",
                         f"{statistics.median(got['twin']):.0f}", f"{max(got['twin'])}"])
            for kind, vals in got.items():
                csv.append(dict(command=f"RL.LOG worst: {name}", variant=kind, mode="single call", pipeline=1,
                                clients=1, requests=len(vals), runs=len(vals), usec_per_call=statistics.median(vals),
                                usec_per_call_min=min(vals), usec_per_call_max=max(vals),
                                usec_per_call_runs=";".join(str(v) for v in vals)))
            log(f"  RL.LOG {name:<58} native {rows[-1][1]:>5} µs (longest {rows[-1][2]:>5})"
                f"  twin {rows[-1][3]:>6} µs (longest {rows[-1][4]:>6})")
    finally:
        c.call("CONFIG", "SET", "slowlog-log-slower-than", old[1] if isinstance(old, list) and len(old) > 1 else "10000")
        c.call("SLOWLOG", "RESET")
    intro = (f"Single calls at RL.LOG's bounds (limit {LIMIT:,}, COST up to {LIMIT:,}, `META` of 256 bytes, the "
             f"longest allowed), each on a key set up by calls before it and timed by the server's slow log (the "
             f"command alone, µs), {WORST_TRIALS} trials on new keys: the median and the longest. A call that "
             "finds 10 000 entries gone out of the window at once removes the oldest 64 of them (later writes "
             "remove the rest, as many each), so no call frees more than 64 entries.")
    return Section("RL.LOG: the longest single calls", intro, ["Call", "Native µs", "Native longest µs", "Twin µs",
                                                              "Twin longest µs"], rows,
                   [False, True, True, True, True], csv), problems


# --- CL.THROTTLE against redis-cell -----------------------------------------------------

def run_cell(opts, raw_log) -> Tuple[Optional[Section], List[str], List[str], object]:
    """bench/cell.py's rounds with this run's requests and repetitions; a note when no
    redis-cell build is given."""
    from bench import cell

    if not opts.cell_module:
        return None, ["CL.THROTTLE against redis-cell: not measured, no redis-cell build given "
                      "(REDIS_CELL_MODULE=/path/to/libredis_cell.so make bench; docs/benchmarks.md)"], [], None
    res = cell.run(opts.module, opts.cell_module, redis_server=opts.redis_server,
                   redis_benchmark=opts.redis_benchmark, requests=opts.requests, repeat=opts.repeat,
                   keyspace=10_000, clients=opts.clients, pipeline=1, run_timeout=opts.run_timeout,
                   pin=not opts.no_pin, raw_log=raw_log)
    if res.problem:
        return None, [], [f"CL.THROTTLE against redis-cell: {res.problem}"], res
    rows, csv = [], []
    for mode, m in res.modes.items():
        rows.append([mode, us(m.ours), us(m.cell), rx(m.ratios)])
        csv.append(dict(command="CL.THROTTLE vs redis-cell", variant="native", mode=mode, pipeline=1,
                        clients=opts.clients, requests=opts.requests, keyspace=10_000, runs=len(m.ours),
                        usec_per_call=spread(m.ours)[0], usec_per_call_min=min(m.ours),
                        usec_per_call_max=max(m.ours), usec_per_call_runs=";".join(f"{v:.3f}" for v in m.ours),
                        ratio_to="redis-cell", ratio=spread(m.ratios)[0], ratio_min=min(m.ratios),
                        ratio_max=max(m.ratios)))
    intro = (f"The same load (redis-benchmark, {opts.clients} connections, pipeline 1, {opts.requests:,} requests "
             f"per run, 10 000 keys) on two servers started for it, one with this module and one with redis-cell "
             f"({opts.cell_module.name}), runs alternating between them, {opts.repeat} rounds; allowed: "
             "`CL.THROTTLE key 99999 1 1`, denied: `CL.THROTTLE key 0 1 3600` on used keys. Server µs per call "
             f"(median, min–max) and this module ÷ redis-cell, round by round. {res.server}.")
    return Section("CL.THROTTLE against redis-cell", intro, ["Mode", "This module µs/call", "redis-cell µs/call",
                                                            "This module ÷ redis-cell"], rows,
                   [False, True, True, True], csv), [], [], res


# --- Targets ----------------------------------------------------------------------------

@dataclass
class Target:
    what: str
    measured: Optional[float]  # the median ratio
    low: Optional[float]
    high: Optional[float]
    bound: float
    at_most: bool  # the ratio must be at most `bound` (else at least)
    source: str


def targets_section(targets: List[Target]) -> Optional[Section]:
    rows = []
    for t in targets:
        if t.measured is None:
            rows.append([t.what, "–", f"{'≤' if t.at_most else '≥'} {t.bound:g}×", "not measured", t.source])
            continue
        ok = t.measured <= t.bound if t.at_most else t.measured >= t.bound
        rows.append([t.what, f"{t.measured:.2f}× ({t.low:.2f}–{t.high:.2f})",
                     f"{'≤' if t.at_most else '≥'} {t.bound:g}×", "met" if ok else "missed", t.source])
    if not rows:
        return None
    intro = ("What the issues set as goals, each with the median ratio of this run and its min–max over the runs "
             "(the tables it comes from are named). A target is reported, never asserted: a missed one is "
             "explained in docs/benchmarks.md.")
    return Section("Targets", intro, ["Target", "Measured", "Goal", "Result", "From"], rows,
                   [False, True, True, False, False])
