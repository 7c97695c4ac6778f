"""The peer rows: bench/limits_client.py, run with a python that has the `limits` library
(the project's virtualenv), against the server of the run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.common import ROOT, log
from bench.server import Server, die_with_parent, pinned


def run_peers(server: Server, opts, raw_dir: Path):
    """bench/limits_client.py in the virtualenv: the `limits` library against the commands."""
    if not opts.peers_python:
        return None, ["peer rows skipped: no --peers-python (make bench passes the virtualenv's python)"], []
    out = raw_dir / "peers.json"
    out.unlink(missing_ok=True)
    cmd = [opts.peers_python, str(ROOT / "bench" / "limits_client.py"), "--port", str(server.port), "--out", str(out),
           "--hits", str(opts.peer_hits), "--threads", str(opts.clients), "--repeat", str(opts.repeat)]
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
                           preexec_fn=pinned(opts.client_cpus, die_with_parent))
    except subprocess.TimeoutExpired:
        return None, [], ["peer rows: bench/limits_client.py did not finish in 900 s"]
    if p.returncode != 0 or not out.is_file():
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:] or ["?"]
        return None, [], [f"peer rows: bench/limits_client.py failed: {tail[0]}"]
    data = json.loads(out.read_text())
    for r in data["results"]:
        us = r["server_usec_per_hit_runs"] or [0]
        log(f"  peer {r['label']:<36} {r['hits_per_s']:>8,.0f} hits/s  "
            f"{(r['server_usec_per_hit'] or 0):6.2f} µs/hit ({min(us):.2f}-{max(us):.2f})  p99.9 {r['p999_ms'] or 0:.2f} ms")
    return (data, [f"peer rows: {n}" for n in data.get("notes", [])],
            [f"peer rows: {f}" for f in data.get("failures", [])])
