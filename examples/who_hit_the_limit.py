"""Which users were behind the requests of an address that hit its limit: RL.LOG.

Each request is checked against its client address with RL.LOG, and the user it came
from is recorded with it (META). When an address is refused, its log holds exactly
the requests of the last window, with their users: one ZRANGE tells you whether it is
one scraper or many accounts behind a shared address.

    python examples/who_hit_the_limit.py          # a burst from one address, then the report
    python examples/who_hit_the_limit.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import sys
import uuid
from collections import Counter

import redis

from redis_native_ratelimit import RateLimiter

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

LIMIT, WINDOW = 20, "1m"  # requests per address in any minute
WINDOW_US = 60_000_000


def allow(r, address, user, prefix="rl:log:ip:"):
    """Check one request of `user` from `address`; (allowed, retry_after_ms)."""
    result = RateLimiter(r).log(prefix + address, LIMIT, WINDOW, meta=user)
    return result.allowed, result.retry_after_ms


def who(r, address, prefix="rl:log:ip:"):
    """The users behind the address's requests of the last window, most active first."""
    # The members scored in the window: a log may still hold older ones, which the
    # next writes remove (at most 64 each).
    seconds, micros = r.time()
    since = seconds * 1_000_000 + micros - WINDOW_US
    members = r.zrangebyscore(prefix + address, "(%d" % since, "+inf")
    # One member per request: seq:cost:user, the user as given in META.
    users = Counter(m.split(b":", 2)[2].decode(errors="replace") for m in members)
    return users.most_common()


def burst(r, address, prefix="rl:log:ip:"):
    """A burst from one address: a scraper with many accounts, and one real user."""
    refused = 0
    for i in range(30):
        user = "mallory-%d" % (i % 4) if i % 5 else "alice"
        ok, _retry = allow(r, address, user, prefix)
        refused += not ok
    return refused


def self_check(r, prefix):
    address = "203.0.113.7"
    refused = burst(r, address, prefix)
    assert refused == 10, refused
    report = dict(who(r, address, prefix))
    # The log holds the 20 allowed requests: 4 of alice, 16 of the four other accounts.
    assert report == {"alice": 4, "mallory-0": 4, "mallory-1": 4, "mallory-2": 4, "mallory-3": 4}, report
    ok, retry_ms = allow(r, address, "alice", prefix)
    assert not ok and 0 < retry_ms <= 60_000, retry_ms


if __name__ == "__main__":
    r = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        prefix = "check:who_hit_the_limit:%s:" % uuid.uuid4().hex
        try:
            self_check(r, prefix)
        finally:  # the self-check leaves nothing behind, even when it fails
            r.delete(prefix + "203.0.113.7")
        print("self-check passed")
    else:
        refused = burst(r, "198.51.100.7")
        print(f"{refused} requests refused; users behind 198.51.100.7 in the last minute:")
        for user, n in who(r, "198.51.100.7"):
            print(f"  {user}: {n}")
