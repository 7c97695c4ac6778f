"""The criterion micro-benchmarks of the pure crate, run by cargo and read back.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import List, Tuple

from bench.common import ROOT


def run_criterion(cargo: str, log_path: Path) -> Tuple[List[tuple], str]:
    """`cargo bench` of the pure crate; its estimates written by this run, in ns: (name,
    median, low and high end of criterion's 95% interval)."""
    started = time.time()
    with open(log_path, "w") as f:
        p = subprocess.run([cargo, "bench", "-p", "ratelimit-core", "--bench", "algorithms"],
                           cwd=ROOT, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                           timeout=900)
    if p.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-15:]
        return [], "cargo bench failed:\n" + "\n".join(tail)
    return read_criterion(started), ""


def read_criterion(since: float) -> List[tuple]:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "criterion"
    out = []
    for est in sorted(target.glob("*/new/estimates.json")):
        if est.stat().st_mtime < since:
            continue
        try:
            bench_id = json.loads((est.parent / "benchmark.json").read_text())["full_id"]
            median = json.loads(est.read_text())["median"]
            ns = float(median["point_estimate"])
            lo = float(median["confidence_interval"]["lower_bound"])
            hi = float(median["confidence_interval"]["upper_bound"])
        except (OSError, KeyError, ValueError, TypeError):
            continue
        out.append((bench_id, ns, lo, hi))
    return out

