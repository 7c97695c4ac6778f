"""What every part of `make bench` shares: where the repository is, redis-benchmark's key
placeholder, the two modes, and the log line.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAND = "__rand_int__"

MODES = ("allowed", "denied")



def log(msg: str = "") -> None:
    print(msg, flush=True)


class Phases:
    """How long each part of a run took: printed as it ends, and kept for the results."""

    def __init__(self):
        self.done: list = []  # (name, seconds)
        self.loads: list = []  # the 1-minute load average at the end of each phase
        self.started = time.monotonic()

    def add(self, name: str, seconds: float) -> None:
        self.done.append((name, seconds))
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = -1.0
        self.loads.append(load)
        log(f"bench: {name}: {seconds:.0f} s (load average {load:.2f})")

    def run(self, name: str):
        phases = self

        class Timer:
            def __enter__(self):
                self.t = time.monotonic()
                log(f"bench: {name}...")
                return self

            def __exit__(self, *exc):
                phases.add(name, time.monotonic() - self.t)
                return False

        return Timer()

    def total(self) -> float:
        return sum(s for _, s in self.done)
