"""Builds the floor module (bench/floor/floor.c) that `make bench` loads next to the
ratelimit module: commands that do only the unavoidable work of each limiter shape.

It is compiled with the system C compiler against the `redismodule.h` that ships in the
sources of the `redis-module` crate (the one the module itself is built with), found
through `cargo metadata`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bench" / "floor" / "floor.c"


def redismodule_h_dir(cargo: str) -> Optional[Path]:
    """The directory of the redismodule.h of the redis-module crate in use."""
    p = subprocess.run([cargo, "metadata", "--format-version", "1"], cwd=ROOT, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=300)
    if p.returncode != 0:
        return None
    for pkg in json.loads(p.stdout).get("packages", []):
        if pkg.get("name") == "redis-module":
            inc = Path(pkg["manifest_path"]).parent / "src" / "include"
            if (inc / "redismodule.h").is_file():
                return inc
    return None


def build(cargo: str, out_dir: Path) -> Tuple[Optional[Path], str]:
    """The path of the built floor module, or None and why."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None, "no C compiler (cc) to build the floor module"
    inc = redismodule_h_dir(cargo)
    if inc is None:
        return None, "redismodule.h not found in the redis-module crate's sources (cargo metadata)"
    out = out_dir / "floor.so"
    p = subprocess.run([cc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-I", str(inc), "-o", str(out),
                        str(SOURCE)], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    if p.returncode != 0:
        return None, "the floor module did not build: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    return out, ""
