"""Moving from the Python `limits` library's Redis storage to the native commands.

The easy way: install the package and change the storage URI (no import needed: the
package's .pth file registers the storage with the library). A Flask-Limiter (or
SlowAPI) app written for `limits`' Redis storage then decides with RL.FIXED, RL.LOG or
RL.SLIDING (its fixed window, moving window or sliding window counter), nothing else
changed:

    Limiter(get_remote_address, app=app, storage_uri="redis+ratelimit://127.0.0.1:6379")

Its fixed window even keeps the library's keys and state: for a limit such as
"10/minute" and the identifiers ("user", "42"), an integer counter under
LIMITS:LIMITER/user/42/10/1/minute that expires one window after its first hit. So
RL.FIXED can also take over those keys by hand, from code that calls the library
directly, while the old code still runs: both count into the same windows.

    python examples/from_limits.py          # a Flask-Limiter app against $REDIS_URL
    python examples/from_limits.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import sys
import uuid

import limits
import limits.storage
import limits.strategies
import redis
from flask import Flask
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")


def create_app(storage_uri, strategy="fixed-window", key_prefix=""):
    """A Flask-Limiter app as its documentation writes one for Redis."""
    app = Flask(__name__)
    limiter = Limiter(
        get_remote_address,
        app=app,
        default_limits=["200 per day", "50 per hour"],
        storage_uri=storage_uri,  # "redis://..." before, "redis+ratelimit://..." now
        strategy=strategy,
        headers_enabled=True,
        key_prefix=key_prefix,
    )

    @app.route("/slow")
    @limiter.limit("2 per minute")
    def slow():
        return "slow"

    @app.route("/ping")
    @limiter.exempt
    def ping():
        return "pong"

    return app


def native_uri(redis_url):
    """redis://host:port/db -> redis+ratelimit://host:port/db (rediss:// likewise)."""
    scheme, rest = redis_url.split("://", 1)
    return f"{scheme}+ratelimit://{rest}"


def check_app(app):
    """The app's own behaviour test: 2 per minute on /slow, /ping exempt."""
    client = app.test_client()
    for remaining in ("1", "0"):
        ok = client.get("/slow")
        assert ok.status_code == 200, ok.status_code
        assert ok.headers["X-RateLimit-Remaining"] == remaining, ok.headers
    refused = client.get("/slow")
    assert refused.status_code == 429, refused.status_code
    assert 0 < int(refused.headers["Retry-After"]) <= 60, refused.headers
    assert all(client.get("/ping").status_code == 200 for _ in range(5))


def limits_key(item, *identifiers, prefix="LIMITS"):
    """The key the library's Redis storage uses (its default key prefix is LIMITS)."""
    return prefix + ":" + item.key_for(*identifiers)


def hit(r, item, *identifiers, cost=1):
    """FixedWindowRateLimiter.hit with RL.FIXED: True when allowed. Unlike the
    library, a refused hit consumes nothing."""
    key = limits_key(item, *identifiers)
    window = item.get_expiry()  # seconds, a bare number for RL.FIXED
    limited = r.execute_command("RL.FIXED", key, item.amount, window, "COST", cost)[0]
    return limited == 0


def test(r, item, *identifiers, cost=1):
    """FixedWindowRateLimiter.test: would `cost` fit now? COST 0 writes nothing."""
    key = limits_key(item, *identifiers)
    reply = r.execute_command("RL.FIXED", key, item.amount, item.get_expiry(), "COST", 0)
    return reply[0] == 0 and reply[2] >= cost


def self_check(r, tag):
    # The same app and the same test, before and after the switch of storage URI, with
    # each strategy.
    for strategy in ("fixed-window", "moving-window", "sliding-window-counter"):
        check_app(create_app(REDIS_URL, strategy, key_prefix=f"{tag}-{strategy}-library"))
        check_app(create_app(native_uri(REDIS_URL), strategy, key_prefix=f"{tag}-{strategy}-native"))
    native = limits.storage.storage_from_string(native_uri(REDIS_URL))
    assert type(native).__name__ == "RateLimitStorage", type(native)

    # The library and RL.FIXED, interleaved on one key, agree on every decision.
    library = limits.strategies.FixedWindowRateLimiter(limits.storage.RedisStorage(REDIS_URL))
    item = limits.parse("3/minute")
    ids = ("check", tag)
    key = limits_key(item, *ids)
    assert library.hit(item, *ids)  # the library starts the window: count 1, TTL 60 s
    assert hit(r, item, *ids)  # RL.FIXED counts into the same window: 2
    assert r.get(key) == b"2", r.get(key)
    assert 0 < r.pttl(key) <= 60000, r.pttl(key)
    assert test(r, item, *ids) and library.test(item, *ids)
    assert library.hit(item, *ids)  # 3: the window is full
    assert not test(r, item, *ids) and not library.test(item, *ids)
    assert not hit(r, item, *ids)  # refused, and nothing consumed
    assert r.get(key) == b"3", r.get(key)
    assert library.get_window_stats(item, *ids).remaining == 0
    assert not library.hit(item, *ids)  # the library counts its refusal: 4
    assert not hit(r, item, *ids)  # a counter past the limit is still refused
    # Other identifiers have their own counter.
    assert hit(r, item, "check", tag + "-other")


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        r = redis.Redis.from_url(REDIS_URL)
        tag = "from_limits-%s" % uuid.uuid4().hex
        try:
            self_check(r, tag)
        finally:  # the self-check leaves nothing behind, even when it fails
            keys = list(r.scan_iter(match="*" + tag + "*"))
            if keys:
                r.delete(*keys)
        print("self-check passed against " + REDIS_URL)
    elif sys.argv[1:]:
        sys.exit("usage: python examples/from_limits.py [--check]")
    else:
        client = create_app(native_uri(REDIS_URL)).test_client()
        for _ in range(3):
            response = client.get("/slow")
            print(response.status_code, dict(response.headers))
