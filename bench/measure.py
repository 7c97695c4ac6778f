"""Measuring: redis-benchmark runs (requests/s, latency percentiles) with the server's own
cost per call (INFO commandstats), every row, variant and mode; and the memory of one
limiter key.

A run costs what its requests cost: there is no time budget that drops runs. Each
redis-benchmark run has a timeout only as a guard against a hang, and a run that hits it
is a failure of the benchmark, named in the results.
"""

from __future__ import annotations

import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from bench.common import MODES, log
from bench.plan import Variant, concrete, load_script, parse_line
from bench.resp import Client, ReplyError
from bench.server import Server, die_with_parent, pinned

# Runs a command line once on every key of a range, on the server (one call per key,
# placeholders replaced as redis-benchmark replaces them): how the state of a run is
# written before it, without a round trip per key. An error reply stops it and is
# returned as it is.
FILL_LOOP = """
local from, to = tonumber(ARGV[1]), tonumber(ARGV[2])
local tpl, has = {}, {}
for i = 3, #ARGV do
  tpl[#tpl + 1] = ARGV[i]
  has[#tpl] = string.find(ARGV[i], '__rand_int__', 1, true) ~= nil
end
local argv = {}
for i = from, to - 1 do
  local id = string.format('%012d', i)
  for j = 1, #tpl do
    if has[j] then argv[j] = string.gsub(tpl[j], '__rand_int__', id) else argv[j] = tpl[j] end
  end
  local r = redis.pcall(unpack(argv))
  if type(r) == 'table' and r.err then return r end
end
return to - from
"""


# The same for a script, which a script cannot call with EVALSHA: its text becomes a
# function of KEYS and ARGV, called once per key (ARGV[3]: numkeys, then the template).
WRAPPED_LOOP = """
local function body(KEYS, ARGV)
%s
end
local from, to, numkeys = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tpl, has = {}, {}
for i = 4, #ARGV do
  tpl[#tpl + 1] = ARGV[i]
  has[#tpl] = string.find(ARGV[i], '__rand_int__', 1, true) ~= nil
end
for i = from, to - 1 do
  local id = string.format('%%012d', i)
  local keys, argv = {}, {}
  for j = 1, #tpl do
    local a = tpl[j]
    if has[j] then a = string.gsub(a, '__rand_int__', id) end
    if j <= numkeys then keys[#keys + 1] = a else argv[#argv + 1] = a end
  end
  body(keys, argv)
end
return to - from
"""


def is_limiter_reply(reply) -> bool:
    return isinstance(reply, list) and len(reply) >= 5 and all(isinstance(x, int) for x in reply[:5])


def fill(c: Client, argv: List[str], keyspace: int, batch: int = 2000) -> Optional[str]:
    """Run the command once on every key of the key space from the client, pipelined (for
    scripts, which a script cannot call); an error reply is returned."""
    for start in range(0, keyspace, batch):
        replies = c.pipeline([concrete(argv, i) for i in range(start, min(keyspace, start + batch))])
        for r in replies:
            if isinstance(r, ReplyError):
                return str(r)
    return None


def fill_on_server(c: Client, loop_sha: str, argv: List[str], keyspace: int, batch: int = 10_000) -> Optional[str]:
    """Run a command once on every key of the key space, in batches of one script call."""
    for start in range(0, keyspace, batch):
        r = c.pipeline([["EVALSHA", loop_sha, "0", str(start), str(min(keyspace, start + batch)), *argv]])[0]
        if isinstance(r, ReplyError):
            return str(r)
    return None


def commandstats(c: Client) -> Dict[str, Dict[str, float]]:
    stats = {}
    for line in c.text("INFO", "commandstats").splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, _, fields = line[len("cmdstat_") :].partition(":")
        values = {}
        for kv in fields.split(","):
            k, _, v = kv.partition("=")
            try:
                values[k] = float(v)
            except ValueError:
                pass
        stats[name.lower()] = values
    return stats


@dataclass
class Run:
    rps: float
    p50: float
    p99: float
    usec: float  # server µs per call
    p999: float = 0.0
    secs: float = 0.0  # wall time of the redis-benchmark run
    rep: int = 0  # the repetition it belongs to (runs of one repetition are paired in ratios)


def spread(vals: List[float]) -> Optional[Tuple[float, float, float]]:
    """(median, min, max), or None without values."""
    if not vals:
        return None
    return statistics.median(vals), min(vals), max(vals)


@dataclass
class Cell:
    """All the runs of one variant, mode and pipeline."""

    runs: List[Run] = field(default_factory=list)
    requests: int = 0
    keyspace: int = 0

    def median(self, attr: str) -> Optional[float]:
        vals = [getattr(r, attr) for r in self.runs]
        return statistics.median(vals) if vals else None

    def spread(self, attr: str) -> Optional[Tuple[float, float, float]]:
        return spread([getattr(r, attr) for r in self.runs])


def paired(a: Optional[Cell], b: Optional[Cell], attr: str) -> Optional[Tuple[float, float, float]]:
    """a ÷ b for each repetition measured in both (the two runs of a repetition ran close
    together), as (median, min, max)."""
    if not a or not b:
        return None
    bs = {r.rep: getattr(r, attr) for r in b.runs}
    return spread([getattr(r, attr) / bs[r.rep] for r in a.runs if bs.get(r.rep)])


def redis_benchmark(tool: str, port: int, argv: List[str], clients: int, pipeline: int,
                    requests: int, keyspace: int, timeout: float, raw_log,
                    cpus: Optional[set] = None) -> Tuple[Optional[Run], str]:
    cmd = [tool, "-h", "127.0.0.1", "-p", str(port), "-c", str(clients), "-n", str(requests),
           "-r", str(keyspace), "-P", str(pipeline), *argv]
    started = time.monotonic()
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=pinned(cpus, die_with_parent))
    except subprocess.TimeoutExpired:
        return None, f"redis-benchmark did not finish in {timeout:g} s (--run-timeout)"
    secs = time.monotonic() - started
    raw_log.write(f"$ {shlex.join(cmd[:13])} {shlex.join(argv)[:200]}\n{p.stdout}{p.stderr}\n")
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return None, f"redis-benchmark failed: {msg[-1] if msg else p.returncode}"
    run = parse_benchmark(p.stdout)
    if run is None:
        return None, f"unexpected redis-benchmark output: {p.stdout[-300:]!r}"
    run.secs = secs
    return run, ""


def parse_benchmark(text: str) -> Optional[Run]:
    """requests/s, p50, p99 and p99.9 (ms) from redis-benchmark's full output: its
    summary, and the first line of its percentile distribution at or above 99.9 %."""
    lines = text.replace("\r", "\n").splitlines()
    rps = p50 = p99 = p999 = None
    in_percentiles = False
    for i, line in enumerate(lines):
        t = line.strip()
        if t.startswith("Latency by percentile distribution"):
            in_percentiles = True
        elif t.startswith("Cumulative distribution"):
            in_percentiles = False
        elif in_percentiles and p999 is None and "% <= " in t:
            try:
                pct, rest = t.split("% <= ", 1)
                if float(pct) >= 99.9:
                    p999 = float(rest.split()[0])
            except (ValueError, IndexError):
                pass
        elif t.startswith("throughput summary:"):
            try:
                rps = float(t.split(":", 1)[1].split()[0])
            except (ValueError, IndexError):
                return None
        elif t.startswith("avg") and "p50" in t and i + 1 < len(lines):
            heads, vals = t.split(), lines[i + 1].split()
            if len(heads) == len(vals):
                rec = dict(zip(heads, vals))
                try:
                    p50, p99 = float(rec["p50"]), float(rec["p99"])
                except (KeyError, ValueError):
                    return None
    if rps is None or p50 is None or p99 is None:
        return None
    return Run(rps, p50, p99, 0.0, p999 if p999 is not None else p99)


@dataclass
class Target:
    """A server the runs go to: the run's own, or one of the two of a comparison."""

    label: str  # "" for the run's server; "A" or "B" in a comparison of two builds
    server: Server
    c: Client
    plan: List[Variant]
    loop_sha: str = ""

    def key(self, kind: str) -> str:
        """The variant name of a cell: the kind, or the build's label in a comparison."""
        return self.label or kind


def pipelines_for(opts, mode: str) -> List[int]:
    return opts.pipelines if mode == "allowed" else opts.denied_pipelines


def requests_for(row, opts) -> int:
    """Requests per run: --requests times the row's share (rows whose twin costs many
    single-key calls send fewer), at least 20 per connection."""
    return max(20 * opts.clients, int(round(opts.requests * row.share)))


@dataclass
class Measured:
    cells: Dict[Tuple[str, str, str, int], Cell] = field(default_factory=dict)
    # (row, variant, mode) -> why it has no figures (a failure of the run)
    problems: Dict[Tuple[str, str, str], str] = field(default_factory=dict)
    probes: Dict[Tuple[str, str, str], object] = field(default_factory=dict)
    # row -> seconds spent on it (writing its keys, probing, running), all repetitions
    row_seconds: Dict[str, float] = field(default_factory=dict)
    runs: int = 0
    requests: int = 0


def prepare(t: Target, variants: List[Variant], mode: str) -> Optional[str]:
    """FLUSHALL, then the row's keys written as the mode wants them: its setup line, then
    one call on every key, with the row's fill line or the native command (the twin keeps
    the same state), on the server; a script row's own call from the client."""
    row = variants[0].row
    keyspace = variants[0].keyspace[mode]
    t.c.call("FLUSHALL")
    if not t.loop_sha:
        t.loop_sha = load_script(t.c, FILL_LOOP)
    if row.setup:
        err = fill_on_server(t.c, t.loop_sha, parse_line(row.setup), keyspace)
        if err:
            return err
    if row.fill:
        return fill_on_server(t.c, t.loop_sha, parse_line(row.fill), keyspace)
    native = next((v for v in variants if v.kind == "native"), None)
    if native:
        return fill_on_server(t.c, t.loop_sha, native.lines[mode], keyspace)
    script = variants[0]
    if script.text:
        # EVALSHA sha numkeys key... arg...: the same call, run by the wrapped script.
        sha = load_script(t.c, WRAPPED_LOOP % script.text)
        return fill_on_server(t.c, sha, script.lines[mode][2:], keyspace)
    return fill(t.c, script.lines[mode], keyspace)


def probe(t: Target, v: Variant, mode: str, key_number: int, m: Measured) -> bool:
    """One call on a key of its own, before any run touches it: it must take the path
    the mode is for (a limiter's reply says which)."""
    key = (v.row.name, t.key(v.kind), mode)
    reply = t.c.pipeline([concrete(v.lines[mode], key_number)])[0]
    if isinstance(reply, ReplyError):
        m.problems[key] = f"error reply: {reply}"
        return False
    if is_limiter_reply(reply) and reply[0] != (0 if mode == "allowed" else 1):
        m.problems[key] = f"expected every call {mode}, got {reply!r}"
        return False
    m.probes[key] = reply
    return True


def measure_variant(t: Target, v: Variant, mode: str, rep: int, opts, raw_log, m: Measured) -> None:
    """One run per pipeline of the mode."""
    key = (v.row.name, t.key(v.kind), mode)
    argv, keyspace = v.lines[mode], v.keyspace[mode]
    requests = requests_for(v.row, opts)
    for pipeline in pipelines_for(opts, mode):
        t.c.call("CONFIG", "RESETSTAT")
        run, err = redis_benchmark(opts.redis_benchmark, t.server.port, argv, opts.clients, pipeline, requests,
                                   keyspace, opts.run_timeout, raw_log, opts.client_cpus)
        m.runs += 1
        m.requests += requests
        where = f" on build {t.label}" if t.label else ""
        if run is None:
            m.problems[key] = f"run {rep + 1} at pipeline {pipeline}{where}: {err}"
            return
        st = commandstats(t.c).get(v.stat)
        if not st or st.get("calls", 0) < requests:
            m.problems[key] = (f"run {rep + 1} at pipeline {pipeline}{where}: INFO commandstats shows "
                               f"{st and st.get('calls')} {v.stat} calls for {requests} requests")
            return
        if st.get("failed_calls", 0) or st.get("rejected_calls", 0):
            m.problems[key] = (f"run {rep + 1} at pipeline {pipeline}{where}: {st.get('failed_calls')} failed / "
                               f"{st.get('rejected_calls')} rejected calls")
            return
        run.usec = st["usec"] / st["calls"]
        run.rep = rep
        cell = m.cells.setdefault((v.row.name, t.key(v.kind), mode, pipeline), Cell())
        cell.runs.append(run)
        cell.requests, cell.keyspace = requests, keyspace
        label = f"{v.kind} {t.label}" if t.label else v.kind
        log(f"  run {rep + 1}/{opts.repeat}  {v.row.name:<22} {label:<8} {mode:<7} P{pipeline:<3}"
            f" {run.rps:>11,.0f} req/s  p50 {run.p50:6.3f} ms  p99 {run.p99:6.3f} ms"
            f"  {run.usec:7.2f} µs/call  ({run.secs:.1f} s)")


def run_all(targets: List[Target], opts, raw_log) -> Measured:
    """Every row, mode and pipeline, `opts.repeat` times. The rows run in turn within a
    repetition, so a change in the machine's load shows in all of them alike; within a
    row the variants (or the two builds of a comparison) run back to back, in the
    opposite order every other repetition, so a drift touches both sides of a ratio."""
    m = Measured()
    # A run that is not kept first, on every server: the first run after a start is
    # slower (connections, memory, caches) and would weigh on the first row alone.
    for t in targets:
        redis_benchmark(opts.redis_benchmark, t.server.port, ["PING"], opts.clients, 1, 20_000, 1,
                        opts.run_timeout, raw_log, opts.client_cpus)
    rows: List[str] = []
    for t in targets:
        for v in t.plan:
            if v.row.name not in rows:
                rows.append(v.row.name)
    for rep in range(opts.repeat):
        for mode in MODES:
            for name in rows:
                started = time.monotonic()
                order = targets if rep % 2 == 0 else list(reversed(targets))
                for t in order:
                    variants = [v for v in t.plan if v.row.name == name and mode in v.lines
                                and (name, t.key(v.kind), mode) not in m.problems]
                    if not variants:
                        continue
                    err = prepare(t, variants, mode)
                    if err:
                        for v in variants:
                            m.problems[(name, t.key(v.kind), mode)] = f"writing the keys before run {rep + 1}: {err}"
                        continue
                    # Each variant probes a key of its own (all in the same state), before the runs.
                    variants = [v for i, v in enumerate(variants) if probe(t, v, mode, i, m)]
                    for v in variants if rep % 2 == 0 else list(reversed(variants)):
                        measure_variant(t, v, mode, rep, opts, raw_log, m)
                m.row_seconds[name] = m.row_seconds.get(name, 0.0) + time.monotonic() - started
    # Two sides of a pair (a command and its twin, or one command on two builds) must
    # answer alike on the same state.
    for name in rows:
        for mode in MODES:
            got = {k: p for (r, k, md), p in m.probes.items() if r == name and md == mode and isinstance(p, list)}
            base_kind = "A" if "A" in got else "native"
            base = got.get(base_kind)
            for k, p in got.items():
                if k in ("twin", "function", "B") and base is not None and p[:3] != base[:3]:
                    m.problems[(name, k, mode)] = f"answered {p!r} where {base_kind} answered {base!r}"
    return m


def memory_per_key(c: Client, variants: List[Variant]) -> Dict[Tuple[str, str], Tuple[float, int]]:
    """Bytes per key (MEMORY USAGE) after two allowed calls on one key, and how many keys
    one call writes."""
    out = {}
    for v in variants:
        if v.row.setup:
            continue
        argv = concrete(v.lines["allowed"], 0)
        c.call("FLUSHALL")
        replies = c.pipeline([argv, argv])
        if any(isinstance(r, ReplyError) for r in replies):
            continue
        keys = c.call("KEYS", "*")
        if not keys:
            continue
        sizes = [c.call("MEMORY", "USAGE", k, "SAMPLES", "0") or 0 for k in keys]
        out[(v.row.name, v.kind)] = (sum(sizes) / len(sizes), len(keys))
    c.call("FLUSHALL")
    return out

