"""Strict mode with a real replica: an allowed request is answered once a replica holds
its write; when the replica does not answer in time, the grant is refused (fail-closed)
or let through (fail-open); a primary killed with -9 and replaced by its replica never
lets more through than the limit counted by grants the callers were given."""

from __future__ import annotations

import threading
import time

import pytest
import redis
import redis.asyncio
import redis.cluster
from conftest import AwaitEach, Server

from redis_native_ratelimit import RateLimiter, Strict

AT = 1_900_000_000_000  # every call's AT: the windows neither start nor end in a test
LINK_UP_WITHIN = 20  # seconds for a replica to report its link up


def replica_of(primary: Server) -> Server:
    replica = Server()
    c = redis.Redis(port=replica.port)
    c.replicaof("127.0.0.1", primary.port)
    deadline = time.monotonic() + LINK_UP_WITHIN
    while c.info("replication").get("master_link_status") != "up":
        if time.monotonic() > deadline:
            replica.remove()
            raise RuntimeError("replica never reported its link up")
        time.sleep(0.05)
    c.close()
    return replica


@pytest.fixture
def pair():
    primary = Server()
    replica = replica_of(primary)
    yield primary, replica
    replica.remove()
    primary.remove()


@pytest.mark.parametrize("twins", [False, True])
def test_a_strict_grant_is_on_the_replica_when_it_is_answered(pair, tag, twins):
    primary, replica = pair
    rl = RateLimiter(redis.Redis(port=primary.port), strict=Strict(replicas=1, timeout_ms=10_000), twins=twins)
    on_replica = redis.Redis(port=replica.port)
    key = f"{tag}:fixed"
    for n in range(1, 6):
        r = rl.fixed(key, 5, "1h", at=AT)
        assert r.allowed
        # WAIT returned: the replica holds the write now, before anything else is sent.
        assert int(on_replica.get(key)) == n
        assert on_replica.pexpiretime(key) == AT + 3_600_000
    assert rl.strict.last_acknowledged == 1
    # A denial and a peek are returned as the server gave them.
    assert not rl.fixed(key, 5, "1h", at=AT).allowed
    assert rl.fixed(key, 5, "1h", cost=0, at=AT).remaining == 0
    log = rl.log(f"{tag}:log", 3, "1h", meta="user:1", at=AT)
    assert log.allowed and on_replica.zcard(f"{tag}:log") == 1


def test_a_grant_no_replica_acknowledged_is_refused_or_let_through_as_chosen(pair, tag):
    primary, replica = pair
    # With the replica up, a grant is acknowledged (a timeout long enough for a loaded
    # machine: WAIT returns as soon as the replica acknowledges).
    patient = RateLimiter(redis.Redis(port=primary.port), strict=Strict(timeout_ms=10_000))
    assert patient.fixed(f"{tag}:a", 10, "1h", at=AT).allowed
    assert patient.strict.last_acknowledged == 1
    replica.stop()  # kill -9: nothing acknowledges from now on
    closed = RateLimiter(redis.Redis(port=primary.port), strict=Strict(timeout_ms=50))
    open_ = RateLimiter(redis.Redis(port=primary.port), strict=Strict(timeout_ms=50, fail_open=True))
    r = closed.fixed(f"{tag}:a", 10, "1h", at=AT)
    assert not r.allowed and r.remaining == 0 and r.retry_after_ms == 50
    assert closed.strict.last_acknowledged == 0
    # The refused grant stays counted on the primary: the limit errs on the side of fewer.
    assert int(redis.Redis(port=primary.port).get(f"{tag}:a")) == 2
    r = open_.fixed(f"{tag}:b", 10, "1h", at=AT)
    assert r.allowed and r.remaining == 9
    assert open_.strict.last_acknowledged == 0
    # A denial is a denial whatever the replicas.
    for _ in range(9):
        open_.fixed(f"{tag}:b", 10, "1h", at=AT)
    assert not closed.fixed(f"{tag}:b", 10, "1h", at=AT).allowed


def test_strict_mode_on_the_asyncio_limiter(pair, tag):
    primary, replica = pair
    limiter = AwaitEach(lambda: redis.asyncio.Redis(port=primary.port), strict=Strict(timeout_ms=10_000))
    on_replica = redis.Redis(port=replica.port)
    try:
        assert limiter.gcra(f"{tag}:g", 4, 1, "1s", at=AT).allowed
        assert on_replica.get(f"{tag}:g") is not None
        replica.stop()
        limiter.async_limiter.strict = Strict(timeout_ms=50)
        assert not limiter.gcra(f"{tag}:g", 4, 1, "1s", at=AT).allowed
    finally:
        limiter.close()


def test_strict_mode_refuses_a_cluster_client(cluster):
    with pytest.raises(ValueError, match="one primary"):
        RateLimiter(redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port), strict=Strict())


def test_strict_arguments_are_checked():
    with pytest.raises(ValueError, match="replicas"):
        Strict(replicas=0)
    with pytest.raises(ValueError, match="WAIT 0"):
        Strict(timeout_ms=0)


def test_no_strict_grant_is_given_again_after_the_primary_is_killed_and_its_replica_promoted(pair, tag):
    """Four threads take grants of one limit from the primary, strict and fail-closed;
    the primary is killed with -9 while they call; the replica is promoted and takes the
    rest. The grants the threads were given, before and after, never exceed the limit,
    and the promoted replica counts at least every strict grant."""
    primary, replica = pair
    limit, key = 200, f"{tag}:fixed"
    given = []  # grants each thread was given by the primary
    lock = threading.Lock()
    killed = threading.Event()

    def worker() -> None:
        rl = RateLimiter(redis.Redis(port=primary.port, socket_timeout=5), strict=Strict(timeout_ms=5_000))
        for _ in range(limit):
            if killed.is_set():
                return
            try:
                r = rl.fixed(key, limit, "1h", at=AT)
            except redis.RedisError:
                return  # the primary is gone: an unanswered call was not a grant
            if r.allowed:
                with lock:
                    given.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(given) < limit // 2 and time.monotonic() < deadline and any(t.is_alive() for t in threads):
        time.sleep(0.001)
    primary.stop()  # kill -9 while the threads call
    killed.set()
    for t in threads:
        t.join(timeout=60)
    before = len(given)
    assert before > 0
    promoted = redis.Redis(port=replica.port)
    promoted.replicaof("NO", "ONE")
    rl = RateLimiter(promoted)
    counted = limit - rl.fixed(key, limit, "1h", cost=0, at=AT).remaining
    assert counted >= before, "the promoted replica lost a grant a caller was given"
    after = 0
    for _ in range(limit):
        if rl.fixed(key, limit, "1h", at=AT).allowed:
            after += 1
    assert before + after <= limit
    assert counted + after == limit
