"""The harness talks only to servers it started: a server is taken as ours only when
INFO's process_id is our child's pid, and a port another server answers on is given up
for the next free one (other developers' tests start servers on this machine too)."""

from __future__ import annotations

import subprocess
import sys

import conftest


def test_the_wait_refuses_another_servers_answer(server):
    """Our child (here a process that never listens) and another server on the port: the
    other server's PONG is not taken for ours."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        attempt = conftest.Server.__new__(conftest.Server)
        attempt.proc, attempt.port = child, server.port
        why = attempt._wait()
        assert why is not None and "another server's" in why, why
        assert f"process_id {server.proc.pid}" in why and f"ours {child.pid}" in why
    finally:
        child.kill()
        child.wait()


def test_a_start_on_a_taken_port_moves_to_another(server, monkeypatch):
    """The first port chosen is the running server's: that attempt fails, the next free
    port is tried, and the server started is ours."""
    chosen = [server.port]
    free = conftest.free_port
    monkeypatch.setattr(conftest, "free_port", lambda: chosen.pop() if chosen else free())
    started = conftest.Server(module=False)
    try:
        assert started.port != server.port
        assert conftest.whose_server(started.port) == started.proc.pid
        assert conftest.whose_server(server.port) == server.proc.pid
    finally:
        started.remove()
