"""The `limits` storage on the native commands: each strategy of the library, the
library's own Redis storage side by side on the same keys, the twins, a Cluster."""

from __future__ import annotations

import time

import limits
import limits.storage
import limits.strategies
import pytest
import redis

import redis_native_ratelimit  # noqa: F401 - registers the schemes
from redis_native_ratelimit.limits_storage import RateLimitStorage, _client_uri, limit_of

STRATEGIES = {
    "fixed-window": limits.strategies.FixedWindowRateLimiter,
    "moving-window": limits.strategies.MovingWindowRateLimiter,
    "sliding-window-counter": limits.strategies.SlidingWindowCounterRateLimiter,
}


def storage(uri: str, **options) -> RateLimitStorage:
    s = limits.storage.storage_from_string(uri, **options)
    assert isinstance(s, RateLimitStorage)
    return s


def test_schemes_are_registered_on_import(server):
    for scheme in ("redis+ratelimit", "rediss+ratelimit", "redis+ratelimit+cluster", "rediss+ratelimit+cluster"):
        assert limits.storage.base.StorageRegistry  # the library's registry
        assert scheme in limits._storage_scheme.SCHEMES
    assert storage(f"redis+ratelimit://127.0.0.1:{server.port}").check()


def test_check_is_false_on_a_server_without_the_module(server, bare_server):
    """A server without the module answers PING but fails every hit: not healthy."""
    assert storage(f"redis+ratelimit://127.0.0.1:{bare_server.port}").check() is False
    assert storage(f"redis+ratelimit://127.0.0.1:{bare_server.port}?twins=true").check() is True
    assert storage(f"redis+ratelimit://127.0.0.1:{server.port}").check() is True


def test_uris():
    assert _client_uri("redis+ratelimit://h:1/2") == ("redis://h:1/2", False, False)
    assert _client_uri("rediss+ratelimit://u:p@h:1?twins=true&ssl_cert_reqs=none") == (
        "rediss://u:p@h:1?ssl_cert_reqs=none",
        False,
        True,
    )
    assert _client_uri("redis+ratelimit+cluster://a:1,b:2")[1] is True


def test_the_limit_is_read_from_the_librarys_key():
    item = limits.parse("7/30 seconds")
    assert limit_of(item.key_for("user", "a/b")) == 7
    assert limit_of("something/else") is None


@pytest.fixture(params=["module", "twins", "cluster"])
def uri(request, tag):
    if request.param == "module":
        port = request.getfixturevalue("server").port
        return f"redis+ratelimit://127.0.0.1:{port}"
    if request.param == "twins":
        port = request.getfixturevalue("bare_server").port
        return f"redis+ratelimit://127.0.0.1:{port}?twins=true"
    nodes = request.getfixturevalue("cluster").nodes
    return "redis+ratelimit+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_n_allowed_then_refused_and_refusals_count_nowhere(uri, strategy, tag):
    s = storage(uri, key_prefix="LIMITS" + tag)
    limiter = STRATEGIES[strategy](s)
    item = limits.parse("3/minute")
    assert limiter.test(item, "user", "42")
    assert [limiter.hit(item, "user", "42") for _ in range(5)] == [True, True, True, False, False]
    assert not limiter.test(item, "user", "42")
    stats = limiter.get_window_stats(item, "user", "42")
    assert stats.remaining == 0
    assert time.time() < stats.reset_time <= time.time() + 61
    # Other identifiers have their own limit; a cost above the limit never fits.
    assert limiter.hit(item, "user", "43", cost=2)
    assert not limiter.test(item, "user", "43", cost=2)
    assert not limiter.hit(item, "user", "44", cost=4)
    assert limiter.get_window_stats(item, "user", "44").remaining == 3
    # Clearing one limit frees it; reset clears every key under the prefix.
    limiter.clear(item, "user", "42")
    assert limiter.hit(item, "user", "42")
    assert s.reset() >= 1
    assert limiter.get_window_stats(item, "user", "43").remaining == 3


def test_fixed_window_shares_the_librarys_counters(server, tag):
    """Processes on the library's Redis storage and on this one count into the same
    windows during a rolling deploy; only refusals differ."""
    prefix = "LIMITS" + tag
    library = limits.strategies.FixedWindowRateLimiter(
        limits.storage.storage_from_string(f"redis://127.0.0.1:{server.port}", key_prefix=prefix)
    )
    native = limits.strategies.FixedWindowRateLimiter(storage(f"redis+ratelimit://127.0.0.1:{server.port}", key_prefix=prefix))
    item = limits.parse("3/minute")
    assert library.hit(item, "k") and native.hit(item, "k") and library.hit(item, "k")
    raw = redis.Redis(port=server.port)
    key = f"{prefix}:{item.key_for('k')}"
    assert raw.get(key) == b"3"
    assert not native.hit(item, "k")
    assert raw.get(key) == b"3"  # a refusal here counts nowhere
    assert not library.hit(item, "k")
    assert raw.get(key) == b"4"  # the library counts its refusals
    assert not native.hit(item, "k")
    assert 0 < raw.pttl(key) <= 60_000


def test_moving_window_is_rl_log(server, tag):
    s = storage(f"redis+ratelimit://127.0.0.1:{server.port}", key_prefix="LIMITS" + tag)
    limiter = limits.strategies.MovingWindowRateLimiter(s)
    item = limits.parse("2/minute")
    before = time.time()
    assert limiter.hit(item, "ip") and limiter.hit(item, "ip", cost=1) and not limiter.hit(item, "ip")
    raw = redis.Redis(port=server.port)
    log_key = f"LIMITS{tag}:log:{item.key_for('ip')}"
    assert raw.type(log_key) == b"zset" and raw.zcard(log_key) == 2
    # The window frees a slot when the oldest hit leaves: 60 s after it.
    start, count = s.get_moving_window(item.key_for("ip"), 2, 60)
    assert count == 2 and before - 1 <= start <= time.time() + 1
    assert limiter.get_window_stats(item, "ip").reset_time == pytest.approx(start + 60)


def test_sliding_window_counter_is_rl_sliding(server, tag):
    s = storage(f"redis+ratelimit://127.0.0.1:{server.port}", key_prefix="LIMITS" + tag)
    limiter = limits.strategies.SlidingWindowCounterRateLimiter(s)
    item = limits.parse("2/minute")
    assert limiter.hit(item, "ip") and limiter.hit(item, "ip") and not limiter.hit(item, "ip")
    raw = redis.Redis(port=server.port)
    assert raw.exists(f"LIMITS{tag}:sliding:{item.key_for('ip')}") == 1
    assert s.get_sliding_window(item.key_for("ip"), 60)[:3] == (0, 0.0, 2)
    limiter.clear(item, "ip")
    assert limiter.hit(item, "ip")
