"""RL.ALL across the slots of a real three-node Cluster (started by the tests, the module
on each node), on redis-py's blocking and asyncio Cluster clients: one RL.ALL per slot
in ascending slot order, what the earlier slots took given back when a later one
refuses (REFUND, RL.RELEASE), the reply of the whole call, a BAN rule refused, and
concurrent clients that never get a rule past its limit and leave every count equal to
the calls allowed."""

from __future__ import annotations

import asyncio
import threading

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
from flask import Flask, jsonify
from redis.crc import key_slot

from conftest import AwaitEach
from redis_native_ratelimit import All, Ban, Fixed, Gcra, Lease, RateLimiter
from redis_native_ratelimit.wsgi import RateLimitMiddleware

T = 1_900_000_000_000


def ascending_slots(tag: str, names):
    """A key per name, each in a slot of its own, the slots ascending in the names'
    order (so that the test knows which slot is settled first)."""
    tag = tag.strip("{}")
    by_slot = {}
    n = 0
    while len(by_slot) < len(names):
        key = f"{{{tag}:{n}}}"
        by_slot.setdefault(key_slot(key.encode()), key)
        n += 1
    return [f"{tag_key}:{name}" for (_, tag_key), name in zip(sorted(by_slot.items()), names)]


@pytest.fixture
def plain(cluster):
    c = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port)
    yield c
    c.close()


@pytest.fixture(params=["sync", "async"])
def limiter(request, cluster):
    if request.param == "sync":
        client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port)
        yield RateLimiter(client)
        client.close()
    else:
        rl = AwaitEach(lambda: redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster.port))
        yield rl
        rl.close()


def test_a_later_slot_that_refuses_gives_back_what_the_earlier_ones_took(limiter, plain, tag):
    a, b = ascending_slots(tag, ["ip", "account"])
    rules = [(a, Fixed(5, "1h", name="ip")), (b, Fixed(2, "1h", name="account"))]
    seen = [limiter.all(rules, at=T) for _ in range(3)]
    assert [r.allowed for r in seen] == [True, True, False]
    # Allowed: the rule with the least remaining across the slots, as RL.ALL replies.
    assert (seen[0].rule, seen[0].key, seen[0].remaining, seen[0].limit) == (2, b, 1, 2)
    # Refused by the account's slot (settled second): its rule, its place in the call.
    assert (seen[2].rule, seen[2].key, seen[2].remaining) == (2, b, 0) and seen[2].retry_after_ms > 0
    # The address's slot took a unit for the refused call, and it was given back.
    assert plain.get(a) == b"2" and plain.get(b) == b"2"
    assert seen[2].quota.name == "account"


def test_the_reply_names_the_first_of_equal_remainings_and_rules_in_the_call_order(limiter, tag):
    a, b = ascending_slots(tag, ["x", "y"])
    # The rules in the call's order are b then a: b is rule 1 though its slot comes second.
    result = limiter.all([(b, Fixed(3, "1h")), (a, Fixed(3, "1h"))], at=T)
    assert (result.allowed, result.rule, result.key, result.remaining) == (True, 1, b, 2)
    denied = limiter.all([(b, Fixed(1, "1h")), (a, Fixed(3, "1h"))], at=T)
    assert (denied.allowed, denied.rule, denied.key) == (False, 1, b)


def test_a_lease_an_earlier_slot_took_is_released_when_a_later_one_refuses(limiter, plain, tag):
    slot, rate = ascending_slots(tag, ["slot", "rate"])
    rules = [(slot, Lease(5, "1m")), (rate, Fixed(1, "1h"))]
    first = limiter.all(rules)
    # The client made the lease id: one for the whole call, as one RL.ALL has.
    assert first.allowed and isinstance(first.lease_id, str) and plain.zscore(slot, first.lease_id) is not None
    assert limiter.release(slot, first.lease_id)
    refused = limiter.all(rules, id="second", new_lease=True)  # an id of ours, new
    assert (refused.allowed, refused.rule, refused.lease_id) == (False, 2, None)
    assert plain.exists(slot) == 0, "the refused call's lease was released"
    # A lease the caller holds is renewed by a call with its id: a refusal in a later
    # slot does not take it away (a renewal cannot be undone).
    assert limiter.lease(slot, 5, "1m", id="held").allowed
    assert not limiter.all(rules, id="held").allowed
    assert plain.zscore(slot, "held") is not None


def test_peeks_and_refunds_across_slots(limiter, plain, tag):
    a, b = ascending_slots(tag, ["a", "b"])
    rules = [(a, Fixed(2, "1h")), (b, Fixed(1, "1h"))]
    assert limiter.all(rules, cost=0, at=T).allowed and plain.exists(a, b) == 0  # a peek writes nothing
    assert limiter.all(rules, at=T).allowed
    peek = limiter.all(rules, cost=0, at=T)
    assert (peek.allowed, peek.rule, peek.remaining) == (True, 2, 0)
    assert plain.get(a) == b"1" and plain.get(b) == b"1"
    given_back = limiter.all(rules, refund=True, at=T)
    assert given_back.allowed and plain.exists(a, b) == 0  # each slot refunded (full again: deleted)


def test_a_ban_rule_across_slots_is_refused_before_any_call(limiter, plain, tag):
    a, b = ascending_slots(tag, ["attempts", "box"])
    with pytest.raises(ValueError, match="BAN rule cannot be settled across Cluster slots"):
        limiter.all([(a, Fixed(2, "1m")), (b, Ban(3, "10m", "1h"))])
    assert plain.exists(a, b) == 0
    # In one slot (one hash tag) it is one RL.ALL, as usual.
    same = [f"{tag}:box:attempts", f"{tag}:box:box"]  # the test's own hash tag
    assert limiter.all([(same[0], Fixed(2, "1m")), (same[1], Ban(3, "10m", "1h"))]).allowed


def test_concurrent_blocking_clients_never_pass_a_limit_and_leave_exact_counts(cluster, plain, tag):
    slot, wide, narrow = ascending_slots(tag, ["slot", "wide", "narrow"])
    rules = [(slot, Lease(100, "1m")), (wide, Fixed(40, "1h")), (narrow, Gcra(14, 1, "1h"))]
    allowed, errors = [], []

    def client():
        rl = RateLimiter(redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port))
        try:
            for _ in range(10):
                result = rl.all(rules)
                if result.allowed:
                    allowed.append(result.lease_id)
                    assert rl.release(slot, result.lease_id)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            rl.client.close()

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # 80 calls against a GCRA of 15 at once (one more an hour): at most 15, and as each
    # refused call gave back what it took, every count is exactly the calls allowed.
    assert 1 <= len(allowed) <= 15
    assert plain.get(wide) == str(len(allowed)).encode()
    assert RateLimiter(plain).gcra(narrow, 14, 1, "1h", cost=0).remaining == 15 - len(allowed)
    assert plain.exists(slot) == 0


def test_concurrent_asyncio_tasks_never_pass_a_limit_and_leave_exact_counts(cluster, plain, tag):
    first, second, third = ascending_slots(tag, ["first", "second", "third"])
    # The leases outlive the test however slow the machine: held until it releases them.
    rules = [(first, Fixed(50, "1h")), (second, Fixed(12, "1h")), (third, Lease(3, "1h"))]

    async def run():
        client = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster.port)
        from redis_native_ratelimit.asyncio import AsyncRateLimiter

        rl = AsyncRateLimiter(client)
        held = []

        async def one():
            result = await rl.all(rules)
            if result.allowed:
                held.append(result.lease_id)
            return result.allowed

        try:
            # Warm up: redis-py 8.1's asyncio Cluster client fails ('NoneType' object has no
            # attribute 'writelines') when many tasks open a node's first connection at once.
            assert (await rl.all(rules, cost=0)).allowed
            outcomes = await asyncio.gather(*(one() for _ in range(60)))
            in_flight = len(held)
            for lease_id in held:
                assert await rl.release(third, lease_id)
            return outcomes, in_flight
        finally:
            await client.aclose()

    outcomes, in_flight = asyncio.run(run())
    # The leases were held until the end: at most 3 calls at once, and the refused calls
    # gave back what the first two slots took.
    assert sum(outcomes) == in_flight and 1 <= in_flight <= 3
    assert plain.get(first) == str(in_flight).encode() and plain.get(second) == str(in_flight).encode()
    assert plain.exists(third) == 0


def test_the_middleware_settles_an_all_policy_across_slots(cluster, plain, tag):
    """An All policy's keys name their rules, so one identity's keys are in several
    slots: on a Cluster client the middleware's call is settled slot by slot."""
    app = Flask(__name__)
    app.add_url_rule("/", "index", lambda: jsonify(ok=True))
    policy = All([Fixed(5, "1h", name="ip"), Fixed(2, "1h", name="burst")], name="api")
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port, socket_timeout=30)
    prefix = tag.strip("{}") + ":"  # no hash tag: each key in the slot of its own name
    app.wsgi_app = RateLimitMiddleware(
        app.wsgi_app, client, policy, prefix=prefix, key=lambda environ: [environ["REMOTE_ADDR"]] * 2, timeout_ms=30_000
    )
    keys = [f"{prefix}api:fixed1:10.0.0.1", f"{prefix}api:fixed2:10.0.0.1"]
    assert key_slot(keys[0].encode()) != key_slot(keys[1].encode())
    test = app.test_client()
    assert [test.get("/", environ_base={"REMOTE_ADDR": "10.0.0.1"}).status_code for _ in range(3)] == [200, 200, 429]
    assert plain.get(keys[0]) == b"2" and plain.get(keys[1]) == b"2"
    client.close()
