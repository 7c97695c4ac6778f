"""Moving from the Python `limits` library's fixed windows to RL.FIXED, on the same keys.

For a limit such as "10/minute" and the identifiers ("user", "42"), the library's
FixedWindowRateLimiter with its Redis storage keeps an integer counter under
LIMITS:LIMITER/user/42/10/1/minute that expires one window after its first hit. That is
the state RL.FIXED reads and writes, so RL.FIXED can take over the library's keys while
the old code still runs: both count into the same windows.

    python examples/from_limits.py          # a few calls against $REDIS_URL
    python examples/from_limits.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import sys

import limits
import limits.storage
import limits.strategies
import redis

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")


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


def main():
    r = redis.Redis.from_url(REDIS_URL)
    item = limits.parse("3/minute")
    for _ in range(4):
        print("hit", hit(r, item, "user", "42"), "test", test(r, item, "user", "42"))


def self_check(r, tag):
    """The library and RL.FIXED, interleaved on one key, agree on every decision."""
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
        self_check(redis.Redis.from_url(REDIS_URL), "from_limits-%d" % os.getpid())
        print("self-check passed against " + REDIS_URL)
    elif sys.argv[1:]:
        sys.exit("usage: python examples/from_limits.py [--check]")
    else:
        main()
