"""Real servers for the package's tests, started on free 127.0.0.1 ports in temporary
directories and killed at the end of the run:

- a server with the module (``$RATELIMIT_MODULE``, required);
- a server without it (the Lua twins);
- a Cluster of three primaries with the module (``redis-cli --cluster create``, or
  ``$REDIS_CLI``).

``$REDIS_SERVER`` runs them on another binary (Valkey: ``scripts/valkey.sh``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, List, Optional

import pytest
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from redis_native_ratelimit import RateLimiter
from redis_native_ratelimit.asyncio import AsyncRateLimiter

REPO = Path(__file__).resolve().parents[3]
START_WITHIN = 15  # seconds for a server to answer PING
CLUSTER_OK_WITHIN = 30  # seconds for a new Cluster to be ok on every node


def server_binary() -> str:
    return os.environ.get("REDIS_SERVER", "redis-server")


def module_path() -> str:
    path = os.environ.get("RATELIMIT_MODULE")
    if not path or not os.path.exists(path):
        pytest.exit(
            "set RATELIMIT_MODULE to the module's .so (make python-client does it), "
            f"not {path!r}",
            returncode=2,
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def whose_server(port: int) -> Optional[int]:
    """The process_id of the server that answers on a 127.0.0.1 port (INFO server), or
    None when none answers yet."""
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return int(client.info("server")["process_id"])
    except redis.RedisError:
        return None
    finally:
        client.close()


class Server:
    """One server process in a temporary directory of its own, verified to be the one
    that answers on its port."""

    def __init__(self, module: bool = True, cluster: bool = False):
        self.dir = Path(tempfile.mkdtemp(prefix="rl-py-"))
        self.proc: Optional[subprocess.Popen] = None
        failures = []
        for _ in range(5):  # a port taken between choosing and binding: try another
            self.port = free_port()
            lines = [
                f"port {self.port}",
                "bind 127.0.0.1",
                'save ""',
                "appendonly no",
                f"dir {self.dir}",
                "enable-debug-command yes",
            ]
            if module:
                lines.append(f"loadmodule {module_path()}")
            if cluster:
                cport = free_port()
                lines += [
                    "cluster-enabled yes",
                    "cluster-config-file nodes.conf",
                    "cluster-node-timeout 5000",
                    f"cluster-port {cport}",
                ]
            conf = self.dir / "redis.conf"
            conf.write_text("\n".join(lines) + "\n")
            log = open(self.dir / "server.log", "wb")
            self.proc = subprocess.Popen([server_binary(), str(conf)], cwd=self.dir, stdout=log, stderr=log)
            why = self._wait()
            if why is None:
                return
            failures.append(f"port {self.port}: {why}\n{self.log()}")
            self.stop()
        raise RuntimeError("server failed to start:\n" + "\n".join(failures))

    def start_again(self) -> None:
        """After stop(): the same server again, on the same port and configuration."""
        log = open(self.dir / "server.log", "ab")
        self.proc = subprocess.Popen([server_binary(), str(self.dir / "redis.conf")], cwd=self.dir, stdout=log, stderr=log)
        why = self._wait()
        if why is not None:
            raise RuntimeError(f"server failed to start again on port {self.port}: {why}\n{self.log()}")

    def _wait(self) -> Optional[str]:
        """None once the server answers on its port and is the process we spawned (its
        INFO's process_id is our child's pid: a port another test's server took between
        our choice and our bind is not ours); else why not."""
        deadline = time.monotonic() + START_WITHIN
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"exited with {self.proc.returncode}"
            answered = whose_server(self.port)
            if answered == self.proc.pid:
                return None
            if answered is not None:
                return f"port {self.port} is another server's (process_id {answered}, ours {self.proc.pid})"
            time.sleep(0.05)
        return f"no PING answer within {START_WITHIN} s"

    def log(self) -> str:
        try:
            return (self.dir / "server.log").read_text(errors="replace")
        except OSError:
            return ""

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    def __init__(self, n: int = 3):
        self.nodes: List[Server] = [Server(cluster=True) for _ in range(n)]
        cli = os.environ.get("REDIS_CLI", "redis-cli")
        out = subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{s.port}" for s in self.nodes)]
            + ["--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode != 0:
            self.remove()
            raise RuntimeError(f"{cli} --cluster create failed:\n{out.stdout}\n{out.stderr}")
        deadline = time.monotonic() + CLUSTER_OK_WITHIN
        for node in self.nodes:
            c = redis.Redis(port=node.port)
            while c.cluster("INFO").get("cluster_state") != "ok":
                if time.monotonic() > deadline:
                    self.remove()
                    raise RuntimeError(f"cluster never ok on port {node.port}")
                time.sleep(0.1)
            c.close()

    @property
    def port(self) -> int:
        return self.nodes[0].port

    def remove(self) -> None:
        for node in self.nodes:
            node.remove()


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.remove()


@pytest.fixture(scope="session")
def bare_server():
    """A server without the module: the twins' ground."""
    s = Server(module=False)
    yield s
    s.remove()


@pytest.fixture(scope="session")
def cluster():
    c = Cluster()
    yield c
    c.remove()


@pytest.fixture
def tag():
    """A hash tag of this test's own: its keys share a slot and no other test's."""
    return "{t" + uuid.uuid4().hex[:12] + "}"


class AwaitEach:
    """An AsyncRateLimiter whose calls run to completion on a private event loop, so
    that one test body checks the blocking and the asyncio limiter alike."""

    def __init__(self, make_client: Callable[[], Any], **kwargs: Any):
        self.loop = asyncio.new_event_loop()
        self.client = make_client()
        self.async_limiter = AsyncRateLimiter(self.client, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.async_limiter, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.loop.run_until_complete(_awaited(attr(*args, **kwargs)))

        return call

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


async def _awaited(value: Any) -> Any:
    return await value


def make_limiter(kind: str, mode: str, decode: bool, protocol: int, port: int, twins: bool = False):
    opts = dict(decode_responses=decode, protocol=protocol)
    if mode == "sync":
        if kind == "cluster":
            client = redis.cluster.RedisCluster(host="127.0.0.1", port=port, **opts)
        else:
            client = redis.Redis(port=port, **opts)
        return RateLimiter(client, twins=twins), client.close
    if kind == "cluster":
        limiter = AwaitEach(lambda: redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=port, **opts), twins=twins)
    else:
        limiter = AwaitEach(lambda: redis.asyncio.Redis(port=port, **opts), twins=twins)
    return limiter, limiter.close


VARIANTS = [
    (kind, mode, decode, protocol)
    for kind in ("standalone", "cluster")
    for mode in ("sync", "async")
    for decode in (False, True)
    for protocol in (2, 3)
]


def variant_id(v) -> str:
    kind, mode, decode, protocol = v
    return f"{kind}-{mode}-{'str' if decode else 'bytes'}-resp{protocol}"


@pytest.fixture(params=VARIANTS, ids=variant_id)
def variant(request):
    return request.param


@pytest.fixture
def limiter(request, variant):
    """The limiter under test, in every variant: standalone and Cluster, blocking and
    asyncio, decode_responses off and on, RESP2 and RESP3."""
    kind = variant[0]
    target = request.getfixturevalue("cluster" if kind == "cluster" else "server")
    rl, close = make_limiter(*variant, port=target.port)
    yield rl
    close()


@pytest.fixture
def plain(server):
    """A plain blocking client to the server with the module, to read state."""
    c = redis.Redis(port=server.port)
    yield c
    c.close()


class Clock:
    """Monotonic milliseconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def raw(request, variant):
    """A plain blocking client to the limiter's server (or Cluster), to read state."""
    target = request.getfixturevalue("cluster" if variant[0] == "cluster" else "server")
    if variant[0] == "cluster":
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=target.port)
    else:
        client = redis.Redis(port=target.port)
    yield client
    client.close()
