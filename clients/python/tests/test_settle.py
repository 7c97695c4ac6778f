"""Settling after the fact (``refund=``, ``force=``, ``reserve``/``settle``) on every
typed call and in every variant of the ``limiter`` fixture, and the middleware's
``ban=`` penalty box in Flask and FastAPI, against real servers."""

from __future__ import annotations

import inspect

import pytest

from redis_native_ratelimit import All, Ban, Fixed, Gcra, Log, RateLimit, Reservation

from test_middleware import Flavour, body  # noqa: F401  (the flavour fixture's class)

T = 1_900_000_000_000  # ms since the Unix epoch


def done(limiter, value):
    """A value, or the awaited value of an asyncio limiter's awaitable."""
    return limiter.loop.run_until_complete(value) if inspect.isawaitable(value) else value


def test_refund_and_force_on_every_call(limiter, raw, tag):
    k = tag + "f"
    assert limiter.fixed(k, 10, "1m", cost=4, at=T) == RateLimit(True, 10, 6, -1, 60000)
    assert limiter.fixed(k, 10, "1m", cost=3, at=T + 1000, refund=True) == RateLimit(True, 10, 9, -1, 59000)
    assert raw.get(k) == b"1"
    assert limiter.fixed(k, 10, "1m", cost=12, at=T + 2000, force=True) == RateLimit(False, 10, 0, 58000, 58000)
    assert raw.get(k) == b"13"
    g = tag + "g"
    assert limiter.gcra(g, 4, 1, "1s", cost=8, at=T, force=True) == RateLimit(False, 5, 0, 4000, 8000)
    assert limiter.gcra(g, 4, 1, "1s", cost=99, at=T, refund=True) == RateLimit(True, 5, 5, -1, 0)
    assert raw.exists(g) == 0
    m = limiter.multi([tag + "m"], [("1s", 5), ("1m", 10)], cost=4, at=T)
    assert m.allowed and m.remaining == 1
    assert limiter.multi([tag + "m"], [("1s", 5), ("1m", 10)], cost=4, at=T, refund=True).remaining == 5
    assert raw.exists(tag + "m") == 0
    s = limiter.sliding([tag + "s"], [("10s", 10)], cost=12, at=T, force=True)
    assert not s.allowed and s.retry_after_ms == 11000
    log = tag + "l"
    limiter.log(log, 5, "1m", meta="a", cost=2, at=T)
    assert limiter.log(log, 5, "1m", cost=1, at=T, refund=True) == RateLimit(True, 5, 4, -1, 60000)
    assert raw.zrange(log, 0, -1) == [b"0000000000000001:1:a"]
    a = limiter.all([(tag + "a1", Fixed(10, "1m")), (tag + "a2", Gcra(4, 1, "1s"))], cost=3, at=T)
    assert a.allowed
    back = limiter.all([(tag + "a1", Fixed(10, "1m")), (tag + "a2", Gcra(4, 1, "1s"))], cost=3, at=T, refund=True)
    assert back.allowed and back.remaining == 5
    assert raw.exists(tag + "a1", tag + "a2") == 0
    with pytest.raises(ValueError):
        limiter.fixed(k, 10, "1m", refund=True, force=True)


def test_reserve_then_settle_the_actual_cost(limiter, raw, tag):
    key = tag + "tokens"
    budget = Fixed(10_000, "1m", name="tokens")
    r = done(limiter, limiter.reserve(budget, key, 2000, at=T))
    assert isinstance(r, Reservation) and r.allowed
    assert done(limiter, r.settle(1300)) == RateLimit(True, 10_000, 8700, -1, 60000)
    assert raw.get(key) == b"1300"
    with pytest.raises(ValueError):
        done(limiter, r.settle(1300))
    r = done(limiter, limiter.reserve(budget, key, 8000, at=T + 1000))
    assert r.allowed
    over = done(limiter, r.settle(9500))
    assert over.limited and over.remaining == 0 and over.retry_after_ms == 59000
    assert raw.get(key) == b"10800"
    refused = done(limiter, limiter.reserve(budget, key, 100, at=T + 2000))
    assert not refused.allowed
    assert done(limiter, refused.settle(50)) is None, "a refused reservation consumed nothing"
    same = done(limiter, limiter.reserve(Log(10, "1m"), tag + "l", 3, at=T))
    assert done(limiter, same.settle(3)) is None
    assert raw.get(key) == b"10800"


def test_a_ban_policy_in_rl_all(limiter, raw, tag):
    rules = [(tag + "u", Fixed(1, "1m")), (tag + "b", Ban(strikes=2, window="1m", duration="1h"))]
    assert limiter.all(rules, at=T).allowed
    assert limiter.all(rules, at=T + 1).rule == 1
    banned = limiter.all(rules, at=T + 2)
    assert banned.limited and banned.rule == 2 and banned.retry_after_ms == 3_600_000
    assert raw.get(tag + "b") == b"banned:%d" % (T + 2 + 3_600_000)
    raw.delete(tag + "b")
    assert limiter.all(rules, at=T + 60_000).allowed


@pytest.fixture(params=["flask", "fastapi"])
def flavour(request, server):
    return Flavour(request.param, server.port)


def test_the_middleware_bans_a_caller_refused_too_often(flavour, plain, tag):
    ban = Ban(strikes=2, window="10m", duration="1h")
    with flavour.app(flavour.client(), tag, ban=ban, routes={}) as send:
        # 5 an hour (the module's POLICY), then two refusals: the second starts the ban.
        for _ in range(5):
            assert send("GET", "/").status_code == 200
        assert send("GET", "/").status_code == 429
        state = plain.get(tag + "ban:10.0.0.1")
        assert state is not None and state.startswith(b"strikes:1:")
        banned = send("GET", "/")
        assert banned.status_code == 429
        assert plain.get(tag + "ban:10.0.0.1").startswith(b"banned:")
        # An hour's ban: longer than any wait of the rate limit itself (720 s).
        assert body(banned)["retry_after_ms"] > 3_500_000
        # Another address is not banned.
        assert send("GET", "/", address="10.0.0.2").status_code == 200
        # DEL lifts the ban (the rate limit still applies).
        plain.delete(tag + "ban:10.0.0.1")
        assert body(send("GET", "/"))["retry_after_ms"] <= 720_000


def test_the_ban_option_takes_a_ban_policy():
    from redis_native_ratelimit._middleware import Settings

    with pytest.raises(TypeError):
        Settings(Fixed(1, "1m"), ban=Fixed(1, "1m"))
    s = Settings(Fixed(1, "1m"), ban=Ban(3, "1m", "1h"), prefix="p:")
    policy, keys = s.with_ban(Fixed(1, "1m"), ["p:fixed:1.2.3.4"], "1.2.3.4")
    assert isinstance(policy, All) and keys == ["p:fixed:1.2.3.4", "p:ban:1.2.3.4"]
