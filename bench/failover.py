"""Failover harness: how many requests a limit lets through twice when its primary dies.

One RL.FIXED limit (``LIMIT`` requests, every call with the same ``AT``, so nothing
refills during a run) is called by ``--clients`` threads. When half the limit has been
granted the primary is killed with SIGKILL and its stand-in takes over; the clients go
on until they have sent ``2 * LIMIT`` requests between them. A request is *granted*
when its caller got an allowed reply; the *over-grant* is how many grants exceed the
limit (what a promoted replica or a restarted server gave again because it never had
them).

Cases (each ``--runs`` times):

- ``steady``: two replicas in sync from the start (a write acknowledged by both before
  the clients begin); the one that received the most is promoted with ``REPLICAOF NO
  ONE`` (as Sentinel and Cluster choose) and the other follows it;
- ``wait``: the same, each call pipelined with ``WAIT 1 1000`` and a grant counted only
  when a replica acknowledged it (fail-closed, as the Python package's strict mode; the
  second replica is what acknowledges after the failover);
- ``aof``: no replica, ``appendonly yes`` with ``appendfsync always``; the same server
  restarted on its files;
- ``fresh``: a replica (started beforehand) attached with ``REPLICAOF`` once a tenth of
  the limit is granted, while the clients call; the primary killed as soon as the
  replica reports ``master_link_status:up`` (which it does before the writes that
  followed its snapshot have reached it).

Then a throughput phase (no failure): allowed calls a second of ``--clients`` client
processes with two replicas (``steady``), the same with ``WAIT 1`` after each call
(``wait``), and one server with ``appendfsync always`` (``aof``), in rounds, reported
against ``steady`` of the same run (the baseline). Usage::

    python3 -m bench.failover --module target/release/libredis_ratelimit.so [--server valkey-server]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import List, Optional

from bench.resp import Client, ReplyError
from bench.server import free_port

LIMIT = 10_000
# Every server of a run requires this password: on a machine where other programs start
# servers on free ports, none of their clients can talk to these by mistake.
PASSWORD = "failover-" + os.urandom(8).hex()
AT = 1_900_000_000_000
KEY = "rl:failover"
CALL = ("RL.FIXED", KEY, LIMIT, "1h", "AT", AT)


class Node:
    """A server in a directory of its own, restartable on the same port and files."""

    def __init__(self, binary: str, module: str, extra: List[str]):
        self.binary, self.module, self.extra = binary, module, extra
        self.dir = Path(tempfile.mkdtemp(prefix="rl-failover-"))
        self.port = free_port()
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        conf = self.dir / "redis.conf"
        conf.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    "bind 127.0.0.1",
                    f"dir {self.dir}",
                    f"logfile {self.dir / 'server.log'}",
                    'save ""',
                    "repl-diskless-sync-delay 0",
                    f"loadmodule {self.module}",
                    f"requirepass {PASSWORD}",
                    f"masterauth {PASSWORD}",
                    *self.extra,
                    "",
                ]
            )
        )
        self.proc = subprocess.Popen([self.binary, str(conf)], cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                c = Client(self.port, timeout=2)
                try:
                    c.call("AUTH", PASSWORD)
                    if c.call("PING") == "PONG":
                        return
                except ReplyError:  # LOADING
                    pass
                finally:
                    c.close()
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"server on {self.port} did not start:\n{(self.dir / 'server.log').read_text(errors='replace')}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def remove(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self) -> Client:
        return connect(self.port)

    def offset(self) -> int:
        """How much of its primary's stream this replica has processed."""
        c = self.client()
        try:
            info = c.text("INFO", "replication")
        finally:
            c.close()
        for line in info.splitlines():
            name, _, value = line.partition(":")
            if name in ("slave_repl_offset", "replica_repl_offset"):
                return int(value)
        return -1

    def link_up(self) -> bool:
        c = self.client()
        try:
            return "master_link_status:up" in c.text("INFO", "replication")
        finally:
            c.close()


def connect(port: int) -> Client:
    c = Client(port, timeout=10)
    c.call("AUTH", PASSWORD)
    return c


class Run:
    """The clients of one run: they call the current target until they have sent their
    share, switching to the stand-in when their server dies."""

    def __init__(self, clients: int, wait: bool):
        self.clients, self.wait = clients, wait
        self.lock = threading.Lock()
        self.granted = 0
        self.sent = 0
        self.target: Optional[int] = None
        self.switched = threading.Event()
        self.first_reply: Optional[float] = None
        self.answered_before_kill = 0
        self.kill_time: Optional[float] = None

    def worker(self, share: int) -> None:
        c = connect(self.target)
        done = 0
        while done < share:
            try:
                if self.wait:
                    reply, acked = c.pipeline([CALL, ("WAIT", 1, 1000)])
                    ok = not isinstance(reply, ReplyError) and reply[0] == 0 and acked >= 1
                else:
                    reply = c.pipeline([CALL])[0]
                    ok = not isinstance(reply, ReplyError) and reply[0] == 0
                if isinstance(reply, ReplyError):
                    raise ConnectionError(str(reply))
            except (OSError, ConnectionError):
                # The server died (or refuses writes while it is promoted): an
                # unanswered call is not a grant; go on with the stand-in.
                c.close()
                self.switched.wait(60)
                while True:
                    try:
                        c = connect(self.target)
                        break
                    except OSError:
                        time.sleep(0.01)
                continue
            done += 1
            with self.lock:
                self.sent += 1
                if self.first_reply is None:
                    self.first_reply = time.monotonic()
                if self.kill_time is None:
                    self.answered_before_kill += 1
                if ok:
                    self.granted += 1
        c.close()

    def start(self, port: int) -> List[threading.Thread]:
        self.target = port
        share = 2 * LIMIT // self.clients
        threads = [threading.Thread(target=self.worker, args=(share,)) for _ in range(self.clients)]
        for t in threads:
            t.start()
        return threads

    def wait_for_grants(self, n: int) -> None:
        while True:
            with self.lock:
                if self.granted >= n:
                    self.kill_time = time.monotonic()
                    return
            time.sleep(0.0005)

    def throughput(self) -> float:
        return self.answered_before_kill / max(1e-9, (self.kill_time or 0) - (self.first_reply or 0))


def _calls(port: int, key: str, n: int, wait: bool) -> None:
    """One client process of the throughput phase: `n` allowed calls on its own key."""
    c = connect(port)
    call = ("RL.FIXED", key, 10 * n, "1h", "AT", AT)
    for _ in range(n):
        if wait:
            reply, acked = c.pipeline([call, ("WAIT", 1, 1000)])
            assert acked >= 1, acked
        else:
            reply = c.pipeline([call])[0]
        assert reply[0] == 0, reply
    c.close()


def throughput(case: str, binary: str, module: str, clients: int, calls: int) -> float:
    """Allowed calls a second with `clients` client processes (no interpreter lock
    between them), no failure: the cost of WAIT (``wait``) or of fsync on every write
    (``aof``) against steady replication."""
    import multiprocessing

    aof = ["appendonly yes", "appendfsync always"] if case == "aof" else ["appendonly no"]
    primary = Node(binary, module, aof)
    primary.start()
    nodes = [primary]
    try:
        if case in ("steady", "wait"):
            for _ in range(2):
                r = Node(binary, module, ["appendonly no", f"replicaof 127.0.0.1 {primary.port}"])
                nodes.append(r)
                r.start()
            c = primary.client()
            try:
                c.call("SET", "rl:synced", 1)
                while c.call("WAIT", 2, 1000) < 2:
                    pass
            finally:
                c.close()
        ctx = multiprocessing.get_context("fork")
        procs = [
            ctx.Process(target=_calls, args=(primary.port, f"rl:tp:{i}", calls, case == "wait"))
            for i in range(clients)
        ]
        start = time.monotonic()
        for p in procs:
            p.start()
        for p in procs:
            p.join()
            if p.exitcode != 0:
                raise RuntimeError(f"a client of the {case} throughput phase failed")
        return clients * calls / (time.monotonic() - start)
    finally:
        for n in nodes:
            n.remove()


def promote(node: Node) -> None:
    c = node.client()
    try:
        c.call("REPLICAOF", "NO", "ONE")
    finally:
        c.close()


def run_case(case: str, binary: str, module: str, clients: int) -> dict:
    aof = ["appendonly yes", "appendfsync always"] if case == "aof" else ["appendonly no"]
    primary = Node(binary, module, aof)
    primary.start()
    nodes = [primary]
    holds: List[socket.socket] = []
    try:
        replica = None
        replicas = []
        if case in ("steady", "wait"):
            for _ in range(2):
                r = Node(binary, module, ["appendonly no", f"replicaof 127.0.0.1 {primary.port}"])
                nodes.append(r)
                r.start()
                replicas.append(r)
            for r in replicas:
                while not r.link_up():
                    time.sleep(0.01)
            # A replica says its link is up before the writes that followed its
            # snapshot have reached it: wait until a write reaches both, as a
            # deployment in steady state has it.
            c = primary.client()
            try:
                c.call("SET", "rl:synced", 1)
                while c.call("WAIT", 2, 1000) < 2:
                    pass
                c.call("DEL", "rl:synced")
            finally:
                c.close()
        if case == "fresh":
            # Started now, attached while the clients call (below).
            replica = Node(binary, module, ["appendonly no"])
            nodes.append(replica)
            replica.start()
        run = Run(clients, wait=(case == "wait"))
        threads = run.start(primary.port)
        if case == "fresh":
            # Attach the replica while the clients call; fail over as soon as it says
            # its link is up.
            run.wait_for_grants(LIMIT // 10)
            run.kill_time = None
            c = replica.client()
            try:
                c.call("REPLICAOF", "127.0.0.1", primary.port)
            finally:
                c.close()
            while not replica.link_up():
                time.sleep(0.001)
            run.kill_time = time.monotonic()
        else:
            run.wait_for_grants(LIMIT // 2)
        primary.kill()
        if case == "aof":
            primary.start()
            run.target = primary.port
        else:
            if replicas:
                # Promote the replica that received the most, as Sentinel and Cluster do.
                replica = max(replicas, key=lambda r: r.offset())
            # Keep the dead primary's address from being taken by another process:
            # a replica that reconnects to a new, empty server there before its
            # promotion would resynchronise from it and drop every grant it held.
            hold = socket.socket()
            hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            hold.bind(("127.0.0.1", primary.port))
            holds.append(hold)
            promote(replica)
            for other in (r for r in replicas if r is not replica):
                c = other.client()
                try:
                    c.call("REPLICAOF", "127.0.0.1", replica.port)
                finally:
                    c.close()
            run.target = replica.port
        c = connect(run.target)
        try:
            held = c.call("GET", KEY)
        finally:
            c.close()
        with run.lock:
            given = run.granted
        run.switched.set()
        for t in threads:
            t.join()
        return {
            "granted": run.granted,
            "over": max(0, run.granted - LIMIT),
            "sent": run.sent,
            "throughput": run.throughput(),
            "given_at_kill": given,
            "held": int(held or 0),
        }
    finally:
        for n in nodes:
            n.remove()
        for h in holds:
            h.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", required=True)
    ap.add_argument("--server", default="redis-server")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cases", default="steady,wait,aof,fresh")
    ap.add_argument("--throughput-calls", type=int, default=3_000, help="calls per client process in the throughput phase (0: no throughput phase)")
    args = ap.parse_args()
    results = {}
    for case in args.cases.split(","):
        results[case] = [run_case(case, args.server, args.module, args.clients) for _ in range(args.runs)]
    # The throughput phase: rounds of steady, wait and aof in turn, so that a change of
    # the machine's load falls on all three alike.
    speeds: dict = {"steady": [], "wait": [], "aof": []}
    for _ in range(args.runs if args.throughput_calls > 0 else 0):
        for case in speeds:
            speeds[case].append(throughput(case, args.server, args.module, args.clients, args.throughput_calls))
    version = subprocess.run([args.server, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; {args.clients} clients; limit {LIMIT}, {2 * LIMIT} requests a run; {args.runs} runs")
    print("| case | over-grants per run (of 20 000 requests) | runs with none | stand-in held at promotion, of the grants given by then |")
    print("|---|---|---|---|")
    for case, rs in results.items():
        overs = ", ".join(str(r["over"]) for r in rs)
        none = sum(1 for r in rs if r["over"] == 0)
        held = ", ".join(f"{r['held']}/{r['given_at_kill']}" for r in rs)
        print(f"| {case} | {overs} | {none}/{len(rs)} | {held} |")
    if args.throughput_calls <= 0:
        return
    base = statistics.median(speeds["steady"])
    print()
    print(f"Throughput, allowed calls a second, {args.clients} client processes, median of {args.runs} rounds:")
    print("| case | calls/s | vs steady |")
    print("|---|---|---|")
    for case, vals in speeds.items():
        tp = statistics.median(vals)
        print(f"| {case} | {tp:,.0f} | {tp / base:.2f}x |")


if __name__ == "__main__":
    main()
