"""One API policy checked in one call: 1 request per hour per user with a burst of 3
(RL.GCRA) AND 5 requests a day per account (RL.FIXED), all or nothing, with RL.ALL.

A request refused by one rule consumes nothing in the other: a user who hits their own
limit does not eat into the account's daily quota, and a request refused by the
account's quota does not use the user's burst. Called one after the other, the first
limiter would already have counted the request when the second refuses it.

A Flask handler answers 429 with the headers of the rule that decided (Retry-After,
RateLimit-*), and tells which rule it was.

    python examples/api_policy.py [--port N]   # serves http://127.0.0.1:$PORT/report
    python examples/api_policy.py --check      # the self-check `make test` runs

Requests name their user and account in headers (X-User, X-Account) to keep the
example short; a real app takes them from its authentication. $REDIS_URL defaults to
redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import sys
import uuid

import redis
from flask import Flask, jsonify, request

from redis_native_ratelimit import Fixed, Gcra, RateLimiter
from redis_native_ratelimit.headers import ratelimit_headers

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

PER_USER = Gcra(max_burst=2, count=1, period="1h", name="user")
PER_ACCOUNT = Fixed(limit=5, window="1d", name="account")


def check_request(limiter, account, user, prefix="rl:", at=None):
    """Both rules on their keys in one atomic call. The keys share the account's hash
    tag, so that they live in one slot of a Cluster."""
    tag = "{%s%s}" % (prefix, account)
    return limiter.all(
        [(tag + "user:" + user, PER_USER), (tag + "daily", PER_ACCOUNT)],
        at=at,
    )


def create_app(r, prefix="rl:", clock=None):
    """`clock`: a function giving the time to judge requests at in Unix ms (None: the
    server's clock)."""
    app = Flask(__name__)
    limiter = RateLimiter(r)

    @app.get("/report")
    def report():
        account, user = request.headers["X-Account"], request.headers["X-User"]
        result = check_request(limiter, account, user, prefix, clock() if clock else None)
        headers = ratelimit_headers(result)
        if not result.allowed:
            body = {"error": "rate limited", "rule": result.quota.name}
            return jsonify(body), 429, headers
        return jsonify(report="...", remaining=result.remaining), 200, headers

    return app


def self_check(r):
    prefix = "check:%s:" % uuid.uuid4().hex
    try:
        at = 1_900_000_000_000  # requests judged at one fixed instant: exact replies
        client = create_app(r, prefix, clock=lambda: at).test_client()

        def get(user, account="acme"):
            return client.get("/report", headers={"X-User": user, "X-Account": account})

        # Alice: a burst of 3, then her own limit. The account has 5 a day.
        for n in range(3):
            response = get("alice")
            assert response.status_code == 200, response.get_json()
        response = get("alice")
        assert response.status_code == 429, response.get_json()
        assert response.get_json()["rule"] == "user", response.get_json()
        assert response.headers["Retry-After"] == "3600", response.headers
        # Her refused request counted nowhere: the account has used 3 of its 5.
        assert r.get("{%sacme}daily" % prefix) == b"3"
        # Bob, same account: 2 more, then the account's quota refuses him.
        for n in range(2):
            response = get("bob")
            assert response.status_code == 200, response.get_json()
        response = get("bob")
        assert response.status_code == 429, response.get_json()
        assert response.get_json()["rule"] == "account", response.get_json()
        assert response.headers["Retry-After"] == "86400", response.headers
        assert response.headers["RateLimit-Limit"] == "5", response.headers
        # ...and it did not use his burst: one of his 3 is still there.
        limiter = RateLimiter(r)
        tag = "{%sacme}" % prefix
        peek = limiter.gcra(tag + "user:bob", 2, 1, "1h", cost=0, at=at)
        assert peek.remaining == 1, peek
        # Another account is not affected.
        assert get("carol", account="globex").status_code == 200
        print("self-check passed")
    finally:
        keys = list(r.scan_iter(match=prefix + "*")) + list(r.scan_iter(match="{" + prefix + "*"))
        if keys:
            r.delete(*keys)


if __name__ == "__main__":
    if "--check" in sys.argv:
        # No socket timeout: a slow answer on a loaded machine is waited for, never
        # turned into an error (or a retry that counts the request twice).
        self_check(redis.Redis.from_url(REDIS_URL))
    else:
        r = redis.Redis.from_url(REDIS_URL, socket_timeout=1)
        port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else int(os.environ.get("PORT", 5000))
        create_app(r).run(port=port)
