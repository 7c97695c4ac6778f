"""The throwaway server of a run: redis-server (or valkey-server) with the modules on a
free loopback port, in a temporary directory; and keeping server and client on separate
CPUs.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple

from bench.resp import Client, ReplyError


def die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the benchmark process dies, however."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def cpu_plan(pin: bool) -> Tuple[Optional[set], Optional[set]]:
    """The CPUs of the server and of redis-benchmark: one each, apart, when there are two
    or more (a server and a client that share or swap cores make per-request figures at
    pipeline 1 swing by half)."""
    if not pin or not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return {cpus[0]}, {cpus[1]}


def pinned(cpus: Optional[set], also=None):
    """A preexec_fn that keeps the child on `cpus` (and runs `also` first)."""

    def run() -> None:
        if also:
            also()
        if cpus:
            try:
                os.sched_setaffinity(0, cpus)
            except OSError:
                pass

    return run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """redis-server with the module on a free loopback port in a temporary directory."""

    def __init__(self, binary: str, module: Path, cpus: Optional[set] = None, extra: Optional[List[Path]] = None):
        self.binary = binary
        self.module = module
        self.extra = extra or []
        self.cpus = cpus
        self.dir = Path(tempfile.mkdtemp(prefix="rl-bench-"))
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0

    def log_text(self) -> str:
        try:
            return (self.dir / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> None:
        last = ""
        for _ in range(5):
            self.port = free_port()
            conf = self.dir / "redis.conf"
            conf.write_text(
                "\n".join(
                    [
                        f"port {self.port}",
                        "bind 127.0.0.1",
                        "protected-mode yes",
                        f"dir {self.dir}",
                        f"logfile {self.dir / 'server.log'}",
                        'save ""',
                        "appendonly no",
                        "enable-debug-command local",
                        f"loadmodule {self.module}",
                        *(f"loadmodule {m}" for m in self.extra),
                        "",
                    ]
                )
            )
            self.proc = subprocess.Popen(
                [self.binary, str(conf)],
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches this script, which stops it
                preexec_fn=pinned(self.cpus, die_with_parent),
            )
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    c = Client(self.port, timeout=2)
                    try:
                        if c.call("PING") == "PONG":
                            if self._process_id(c) == self.proc.pid:
                                return
                            break  # another program's server took the port: try another
                    finally:
                        c.close()
                except (OSError, ReplyError):
                    pass
                time.sleep(0.05)
            last = self.log_text()
            self.kill()
        raise RuntimeError(f"{self.binary} did not start; its log:\n{last}")

    @staticmethod
    def _process_id(c: Client) -> int:
        """The process_id of the server that answers (INFO server)."""
        for line in c.text("INFO", "server").splitlines():
            if line.startswith("process_id:"):
                return int(line.split(":", 1)[1])
        return -1

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self) -> Client:
        return Client(self.port)

