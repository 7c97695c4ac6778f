"""A login form with a penalty box: 2 attempts a minute per address, and an address
refused 3 times within 10 minutes is banned for an hour.

One RL.ALL call per attempt: a FIXED rule on the address's attempts and a BAN rule on
its penalty box. A refused attempt records a strike (the one write of a refused
call); the third strike starts the ban, during which every attempt is refused without
touching the attempts counter. DEL of the box lifts the ban (an administrator's
"unblock").

    python examples/login_ban.py            # a few attempts, printed
    python examples/login_ban.py --check    # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import sys
import uuid

import redis

from redis_native_ratelimit import Ban, Fixed, RateLimiter

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

ATTEMPTS = Fixed(limit=2, window="1m", name="attempts")
PENALTY = Ban(strikes=3, window="10m", duration="1h")


def attempt(rl, address, at=None, prefix="login:"):
    """Whether a login attempt from `address` may go on; the result says why not."""
    # In a Redis Cluster both keys must share a hash slot: the {address} tag does it.
    rules = [
        (f"{prefix}{{{address}}}:attempts", ATTEMPTS),
        (f"{prefix}{{{address}}}:box", PENALTY),
    ]
    return rl.all(rules, at=at)


def unblock(r, address, prefix="login:"):
    """Lift a ban."""
    return r.delete(f"{prefix}{{{address}}}:box")


def self_check(r, prefix):
    rl = RateLimiter(r)
    t = 1_900_000_000_000
    ip = "203.0.113.9"
    seen = [attempt(rl, ip, at=t + i * 1000, prefix=prefix) for i in range(5)]
    assert [s.allowed for s in seen] == [True, True, False, False, False], seen
    # The first two refusals are the attempts counter's; the third strike bans.
    assert [s.rule for s in seen[2:]] == [1, 1, 2], seen
    assert seen[4].retry_after_ms == 3_600_000, seen[4]
    assert r.get(f"{prefix}{{{ip}}}:box") == b"banned:%d" % (t + 4000 + 3_600_000)
    # Still banned once the minute of attempts has passed; the counter is not touched.
    counter = r.get(f"{prefix}{{{ip}}}:attempts")
    later = attempt(rl, ip, at=t + 120_000, prefix=prefix)
    assert later.limited and later.rule == 2 and later.retry_after_ms == 3_484_000, later
    assert r.get(f"{prefix}{{{ip}}}:attempts") == counter
    # Another address is not concerned; unblocking lifts the ban.
    assert attempt(rl, "198.51.100.1", at=t + 120_000, prefix=prefix).allowed
    assert unblock(r, ip, prefix=prefix) == 1
    assert attempt(rl, ip, at=t + 120_000, prefix=prefix).allowed


if __name__ == "__main__":
    client = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        prefix = "check:login-ban:%s:" % uuid.uuid4().hex
        try:
            self_check(client, prefix)
        finally:
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.delete(*keys)
        print("self-check passed against " + REDIS_URL)
    elif sys.argv[1:]:
        sys.exit("usage: python examples/login_ban.py [--check]")
    else:
        rl = RateLimiter(client)
        for i in range(6):
            r = attempt(rl, "demo")
            why = "ok" if r.allowed else f"refused by rule {r.rule}, retry in {r.retry_after_ms} ms"
            print(f"attempt {i + 1}:", why)
