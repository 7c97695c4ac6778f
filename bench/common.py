"""What every part of `make bench` shares: where the repository is, redis-benchmark's key
placeholder, the two modes, and the log line.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAND = "__rand_int__"

MODES = ("allowed", "denied")



def log(msg: str = "") -> None:
    print(msg, flush=True)
