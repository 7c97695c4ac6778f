"""Every call, with ``AT`` pinning the time, in every variant of the ``limiter``
fixture: standalone and Cluster, blocking and asyncio, decode_responses off and on,
RESP2 and RESP3. The replies are those of the pages in docs/ (replayed there with
redis-cli)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import redis

from redis_native_ratelimit import All, Fixed, Gcra, Log, Multi, Quota, RateLimit, Sliding, Sweep, Throttle

T = 1_900_000_000_000  # ms since the Unix epoch (2030-03-17)


def test_gcra(limiter, raw, tag):
    key = tag + "user:42"
    seen = [limiter.gcra(key, 2, 1, "10s", at=T) for _ in range(4)]
    assert seen == [
        RateLimit(True, 3, 2, -1, 10000),
        RateLimit(True, 3, 1, -1, 20000),
        RateLimit(True, 3, 0, -1, 30000),
        RateLimit(False, 3, 0, 10000, 30000),
    ]
    denied = seen[3]
    assert denied.limited and not denied.allowed
    assert denied.retry_after == timedelta(seconds=10)
    assert denied.reset_after == timedelta(seconds=30)
    assert seen[0].retry_after is None and seen[0].delay is None
    assert denied.quota == Quota("gcra", 3, 30000)
    # A denial wrote nothing: the TAT is the third request's.
    assert raw.get(key) == b"1900000030000000"
    # AT as an aware datetime; a peek (COST 0) 2.5 s later.
    at = datetime.fromtimestamp(T / 1000 + 2.5, tz=timezone.utc)
    assert limiter.gcra(key, 2, 1, timedelta(seconds=10), cost=0, at=at) == RateLimit(True, 3, 0, -1, 27500)


def test_gcra_delay_books_slots_spaced_by_the_interval(limiter, tag):
    key = tag + "quota"
    # 10 per second, no burst: one slot every 100 ms, a queue of up to 1 s.
    delays = [limiter.gcra(key, 0, 10, "1s", delay="1s", at=T).delay_ms for _ in range(12)]
    assert delays == [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, -1]
    refused = limiter.gcra(key, 0, 10, "1s", delay="1s", at=T)
    assert not refused.allowed and refused.delay is None and refused.retry_after_ms > 0
    booked = limiter.gcra(key, 0, 10, "1s", delay="2s", at=T)
    assert booked.allowed and booked.delay == timedelta(milliseconds=1100)


def test_fixed(limiter, raw, tag):
    key = tag + "user:42"
    assert limiter.fixed(key, 3, "10s", at=T) == RateLimit(True, 3, 2, -1, 10000)
    assert limiter.fixed(key, 3, timedelta(seconds=10), cost=2, at=T + 1000) == RateLimit(True, 3, 0, -1, 9000)
    assert limiter.fixed(key, 3, 10, at=T + 1600) == RateLimit(False, 3, 0, 8400, 8400)
    assert raw.get(key) == b"3"
    assert limiter.fixed(key, 3, "10s", at=T + 10000) == RateLimit(True, 3, 2, -1, 10000)
    aligned = limiter.fixed(tag + "user:7", 100, "1m", align=True, at=T)
    assert aligned == RateLimit(True, 100, 99, -1, 20000)


def test_multi_names_the_binding_key_as_given(limiter, raw, tag):
    keys = [tag + "ip:10.0.0.1", tag + "user:42"]
    limits = [("1s", 2), ("1m", 3)]
    first = limiter.multi(keys, limits, at=T, names=["ip", "user"])
    assert first == RateLimit(True, 2, 1, -1, 1000, key=keys[0], window_ms=1000)
    assert first.key is keys[0]  # the caller's own object, whatever decode_responses
    assert first.window == timedelta(seconds=1)
    assert first.quota == Quota("ip-1s", 2, 1000)
    assert [q.name for q in first.quotas] == ["ip-1s", "ip-1m", "user-1s", "user-1m"]
    limiter.multi(keys, limits, at=T)
    third = limiter.multi(keys, limits, at=T + 500)
    assert third == RateLimit(False, 2, 0, 500, 500, key=keys[0], window_ms=1000)
    # The denial consumed nothing: a second later the minute still has one left.
    fourth = limiter.multi(keys, limits, at=T + 1000)
    assert fourth == RateLimit(True, 3, 0, -1, 59000, key=keys[0], window_ms=60000)
    # Keys as bytes come back as bytes.
    other = [(tag + "a").encode(), (tag + "b").encode()]
    assert limiter.multi(other, [("1m", 1)], at=T).key == other[0]
    assert limiter.multi(other[::-1], [("1m", 1)], at=T).key in other


def test_sliding(limiter, tag):
    key = tag + "ip:1.2.3.4"
    assert limiter.sliding([key], [("1s", 3)], at=T + 900) == RateLimit(True, 3, 2, -1, 1100, key=key, window_ms=1000)
    assert limiter.sliding([key], [("1s", 3)], cost=2, at=T + 900) == RateLimit(True, 3, 0, -1, 1100, key=key, window_ms=1000)
    assert limiter.sliding([key], [("1s", 3)], at=T + 1000) == RateLimit(False, 3, 0, 1000, 1000, key=key, window_ms=1000)
    assert limiter.sliding([key], [("1s", 3)], at=T + 2000) == RateLimit(True, 3, 2, -1, 1100, key=key, window_ms=1000)
    fine = limiter.sliding([tag + "x"], [("1s", 3)], buckets=100, at=T + 900)
    assert fine == RateLimit(True, 3, 2, -1, 1010, key=tag + "x", window_ms=1000)


def test_log_keeps_who(limiter, raw, tag):
    key = tag + "ip:198.51.100.7"
    assert limiter.log(key, 3, "1m", meta="user:alice", at=T) == RateLimit(True, 3, 2, -1, 60000)
    assert limiter.log(key, 3, "1m", meta="user:bob", at=T + 10000) == RateLimit(True, 3, 1, -1, 60000)
    assert limiter.log(key, 3, "1m", meta=b"user:bob", at=T + 20000) == RateLimit(True, 3, 0, -1, 60000)
    assert limiter.log(key, 3, "1m", meta="user:eve", at=T + 30000) == RateLimit(False, 3, 0, 30000, 50000)
    assert raw.zrange(key, 0, -1) == [
        b"0000000000000001:1:user:alice",
        b"0000000000000002:1:user:bob",
        b"0000000000000003:1:user:bob",
    ]


def test_check_applies_a_policy(limiter, tag):
    assert limiter.check(Fixed(2, "1m", name="daily"), tag + "a", at=T).quota == Quota("daily", 2, 60000)
    both = limiter.check(Multi([("1m", 5)]), [tag + "a2", tag + "b2"], at=T)
    assert both.allowed and both.key == tag + "a2"
    assert limiter.check(Log(1, "1m"), tag + "l", at=T).remaining == 0
    assert limiter.check(Gcra(0, 1, "1s"), tag + "g", at=T).limit == 1
    assert limiter.check(Sliding([("1s", 4)]), [tag + "s"], at=T).remaining == 3


def test_bulkexpire_names_the_keys_as_given(limiter, raw, tag):
    keys = [tag + "a", tag + "b", tag + "missing"]
    raw.set(keys[0], 1)
    raw.set(keys[1], 1, ex=100)
    assert limiter.bulkexpire(60, keys) == [keys[0]]
    assert 0 < raw.ttl(keys[0]) <= 60
    raw.set(keys[1].encode(), 1)
    assert limiter.bulkexpire("1m", [k.encode() for k in keys]) == [keys[1].encode()]


def test_sweep(limiter, raw, variant, tag):
    if variant[0] == "cluster":
        pytest.skip("RL.SWEEP is node-local: see test_sweep_on_a_cluster_node")
    raw.set(tag + "sweep:a", 1)
    cursor, scanned, expired = 0, 0, 0
    for _ in range(10_000):
        step = limiter.sweep(cursor, "1h", match=tag.replace("{", "\\{").replace("}", "\\}") + "sweep:*", count=100)
        assert isinstance(step, Sweep)
        cursor, scanned, expired = step.cursor, scanned + step.scanned, expired + step.expired
        if cursor == 0:
            break
    assert expired == 1 and cursor == 0
    assert 0 < raw.ttl(tag + "sweep:a") <= 3600


def test_sweep_on_a_cluster_node(cluster, tag):
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port)
    try:
        from redis_native_ratelimit import RateLimiter

        rl = RateLimiter(client)
        client.set(tag + "k", 1)
        node = client.get_node_from_key(tag + "k")
        cursor, expired = 0, 0
        for _ in range(10_000):
            step = rl.sweep(cursor, 60, count=1000, node=node)
            cursor, expired = step.cursor, expired + step.expired
            if cursor == 0:
                break
        assert expired >= 1 and client.ttl(tag + "k") > 0
    finally:
        client.close()


def test_errors_are_raised_with_the_servers_message(limiter, tag):
    with pytest.raises(redis.exceptions.ResponseError, match="invalid window '0s'"):
        limiter.fixed(tag + "k", 3, "0s")
    with pytest.raises(redis.exceptions.ResponseError, match="AT"):
        limiter.gcra(tag + "k", 1, 1, "1s", at=5_000_000_000_000)
    with pytest.raises(ValueError):
        limiter.gcra(tag + "k", 1, 1, timedelta(microseconds=10))


# -- RL.ALL and CL.THROTTLE ---------------------------------------------------------------


def test_has_command(limiter):
    assert limiter.has_command("RL.GCRA")
    assert not limiter.has_command("RL.NO-SUCH-COMMAND")


def test_all(limiter, raw, tag):
    user, account, address = tag + "user:42", tag + "acct:7", tag + "ip:1.2.3.4"
    rules = [
        (user, Gcra(1, 1, "10s", name="burst")),
        (account, Fixed(3, "1d", name="daily")),
        (address, Sliding([("1m", 100)], name="addr")),
    ]
    first = limiter.all(rules, at=T)
    # The least remaining: the GCRA rule (2 - 1 = 1 left), the first rule.
    assert first == RateLimit(True, 2, 1, -1, 10000, key=user, rule=1)
    assert first.quota.name == "burst"
    limiter.all(rules, at=T)
    denied = limiter.all(rules, at=T)
    assert not denied.allowed and denied.rule == 1 and denied.key is user
    assert denied.retry_after_ms > 0
    # A denial writes nothing anywhere: the fixed counter holds the two allowed calls.
    assert raw.get(account) == b"2"
    # Each rule wrote what its own command writes: RL.FIXED's state is read by RL.FIXED.
    assert limiter.fixed(account, 3, "1d", cost=0, at=T).remaining == 1
    with pytest.raises(redis.exceptions.ResponseError):
        limiter.all([(tag + "x", Fixed(1, "0s"))], at=T)


def test_throttle(limiter, tag):
    # CL.THROTTLE takes no AT: one request an hour, so that no unit comes back while
    # the test runs, however slow the machine.
    key = tag + "cell"
    seen = [limiter.throttle(key, 2, 1, 3600) for _ in range(4)]
    assert [s.allowed for s in seen] == [True, True, True, False]
    assert all(isinstance(s, Throttle) and s.limit == 3 for s in seen)
    assert seen[0].retry_after_s == -1 and seen[0].retry_after is None
    assert 1 <= seen[3].retry_after_s <= 3600
    # The same state as RL.GCRA key 2 1 1h.
    assert limiter.gcra(key, 2, 1, "1h", cost=0).remaining == 0
    assert limiter.throttle(key, 2, 1, timedelta(hours=1), quantity=0).allowed


def check_a_string_where_keys_belong_is_one_key(limiter, raw, tag):
    """A str or bytes where a sequence of keys belongs is that one key (never the
    sequence of its characters, each a key shared by every caller); a value that is no
    key and no list of keys is a TypeError."""
    key = tag + "user:42"
    sliding = limiter.sliding(key, [("1m", 5)], at=T)
    assert (sliding.allowed, sliding.limit, sliding.remaining) == (True, 5, 4)
    assert sliding.key == key and sliding.window_ms == 60000
    other = tag + "acct:7"
    multi = limiter.multi(other.encode(), [("1m", 5)], at=T)
    assert (multi.allowed, multi.remaining, multi.key) == (True, 4, other.encode())
    assert [raw.exists(k) for k in (key, other)] == [1, 1]  # one key each
    for char in set(key + other):  # the characters were never keys
        assert raw.exists(char) == 0, char
    # The same through the policies, as the middleware and RL.ALL use them.
    assert Multi([("1m", 5)]).call(key).keys == (key,)
    assert Sliding([("1m", 5)]).call(key.encode()).keys == (key.encode(),)
    assert Fixed(5, "1m").call(key).keys == (key,)
    assert All([Fixed(5, "1m")]).call(key).keys == (key,)
    assert limiter.check(All([Fixed(5, "1h")]), tag + "all").key == tag + "all"
    # RL.BULKEXPIRE: one key, as given.
    raw.set(tag + "plain", 1)
    assert limiter.bulkexpire(60, tag + "plain") == [tag + "plain"]
    assert raw.ttl(tag + "plain") > 0
    # RL.ALL takes (key, policy) pairs: a string is none.
    for wrong in (key, key.encode(), [key], [(key, "fixed")]):
        with pytest.raises(TypeError, match="RL.ALL"):
            limiter.all(wrong)
    for wrong in (42, {key: 1}, {key}):
        with pytest.raises(TypeError, match="RL.MULTI"):
            limiter.multi(wrong, [("1m", 5)])
        with pytest.raises(TypeError, match="RL.SLIDING"):
            limiter.sliding(wrong, [("1m", 5)])
        with pytest.raises(TypeError, match="RL.BULKEXPIRE"):
            limiter.bulkexpire(60, wrong)


def test_a_string_where_keys_belong_is_one_key_not_its_characters(limiter, raw, tag):
    check_a_string_where_keys_belong_is_one_key(limiter, raw, tag)
