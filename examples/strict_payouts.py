"""Payouts limited to 10 an hour per account, strictly: a payout counts only once a
replica holds its grant, so that a failover of the primary never lets an account take
more than 10 in an hour (the operations guide, "Strict limits across failover", says
why a grant can otherwise be given twice).

    python examples/strict_payouts.py ACCOUNT    # asks for one payout
    python examples/strict_payouts.py --check    # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379: a primary with the module loaded and at
least one replica (with none, every payout is refused once the timeout has passed).
"""

import os
import sys
import uuid

import redis

from redis_native_ratelimit import RateLimiter, Strict

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")


def payout_limiter(r, fail_open=False):
    """Each allowed payout waits (at most 100 ms) for one replica to hold it; one no
    replica acknowledged is refused, unless `fail_open`."""
    return RateLimiter(r, strict=Strict(replicas=1, timeout_ms=100, fail_open=fail_open))


def may_pay(limiter, account, prefix="", at=None):
    result = limiter.fixed(prefix + "payouts:" + account, 10, "1h", at=at)
    if not result.allowed:          # over the limit, or no replica acknowledged in time
        return False
    return True


def self_check(r):
    prefix = "check:%s:" % uuid.uuid4().hex
    at = 1_900_000_000_000  # every call judged at one instant: exact replies
    try:
        replicas = r.info("replication").get("connected_slaves", 0)
        assert replicas == 0, "the self-check runs on a server without replicas"
        # No replica to acknowledge: the payout is refused, its grant counted anyway
        # (the limit errs on the side of fewer payouts).
        limiter = payout_limiter(r)
        assert may_pay(limiter, "acme", prefix, at) is False
        assert limiter.strict.last_acknowledged == 0
        assert r.get(prefix + "payouts:acme") == b"1"
        # Fail-open: the same grants are let through, up to the limit, then refused as
        # any limit refuses.
        lenient = payout_limiter(r, fail_open=True)
        granted = sum(may_pay(lenient, "acme", prefix, at) for _ in range(10))
        assert granted == 9, granted
        assert r.get(prefix + "payouts:acme") == b"10"
        print("self-check passed")
    finally:
        keys = list(r.scan_iter(match=prefix + "*"))
        if keys:
            r.delete(*keys)


if __name__ == "__main__":
    if "--check" in sys.argv:
        # No socket timeout: a slow answer on a loaded machine is waited for, never
        # turned into an error (or a retry that counts the grant twice).
        self_check(redis.Redis.from_url(REDIS_URL))
    elif len(sys.argv) == 2:
        r = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
        print("pay" if may_pay(payout_limiter(r), sys.argv[1]) else "refused")
    else:
        sys.exit(__doc__)
