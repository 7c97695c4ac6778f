"""A Flask app that rate limits every request with RL.GCRA, through the package's WSGI
middleware.

Each client (here: its address) gets 10 requests per second in the long run and bursts
of up to 20. Every response carries the rate limit headers (RateLimit-Limit,
-Remaining, -Reset, and the IETF draft's RateLimit-Policy and RateLimit); a refused
request gets 429 Too Many Requests with Retry-After. If Redis does not answer within
a quarter of a second, the request is served unlimited (fail open).

    python examples/flask_gcra.py [--port N]   # serves http://127.0.0.1:$PORT/ (default 5000)
    python examples/flask_gcra.py --check      # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import socket
import sys
import uuid

import redis
from flask import Flask, jsonify, request

from redis_native_ratelimit import Gcra
from redis_native_ratelimit.wsgi import RateLimitMiddleware

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

# RL.GCRA key max_burst count period: `count` per `period`, capacity max_burst + 1.
POLICY = Gcra(max_burst=19, count=10, period="1s", name="api")


def create_app(r, policy=POLICY, prefix="rl:", timeout_ms=250):
    app = Flask(__name__)

    @app.get("/")
    def hello():
        result = request.environ.get("redis_native_ratelimit.result")  # None when unlimited
        return jsonify(hello="world", remaining=None if result is None else result.remaining)

    @app.get("/health")
    def health():
        return jsonify(ok=True)

    app.wsgi_app = RateLimitMiddleware(
        app.wsgi_app,
        r,  # any redis-py client; the middleware bounds its calls by `timeout_ms`
        policy,  # the policy of every route...
        routes={"/health": None},  # ...but these (None: not limited)
        # The key of a request: its address (behind a proxy, let werkzeug's ProxyFix set
        # it). A signed-in user's id makes a better key.
        key=lambda environ: environ.get("REMOTE_ADDR") or "unknown",
        prefix=prefix,  # keys are <prefix><policy name>:<key>
        timeout_ms=timeout_ms,  # then fail open (fail_open=False refuses with 503)
    )
    return app


def self_check(r, prefix):
    """Real requests through Flask's test client against the server at REDIS_URL."""
    # 5 per hour, no burst beyond them: T = 720 s, capacity 5. A generous timeout: the
    # self-check must never take the outage path on a busy machine.
    app = create_app(r, policy=Gcra(4, 5, "1h", name="api"), prefix=prefix, timeout_ms=30_000)
    client = app.test_client()

    def get(address, path="/"):
        return client.get(path, environ_base={"REMOTE_ADDR": address})

    for n in range(1, 6):
        response = get("10.0.0.1")
        assert response.status_code == 200, (n, response.status_code)
        assert response.get_json()["remaining"] == 5 - n, response.get_json()
        assert response.headers["RateLimit-Limit"] == "5", response.headers
        assert response.headers["RateLimit-Remaining"] == str(5 - n), response.headers
        assert response.headers["RateLimit-Policy"] == '"api";q=5;w=3600', response.headers
        assert response.headers["RateLimit"].startswith('"api";r=%d;t=' % (5 - n)), response.headers
        # The bucket is full again n * 720 s after the first request, at most.
        assert 0 < int(response.headers["RateLimit-Reset"]) <= n * 720, response.headers
        assert "Retry-After" not in response.headers, response.headers
    tat = r.get(prefix + "api:10.0.0.1")

    denied = get("10.0.0.1")
    assert denied.status_code == 429, denied.status_code
    assert denied.get_json()["error"] == "too many requests", denied.get_json()
    assert denied.headers["RateLimit-Remaining"] == "0", denied.headers
    # Retry-After is the wait in whole seconds, rounded up: never shorter than the wait
    # the limiter asked for, and the next request fits within 720 s of the first.
    retry_after = int(denied.headers["Retry-After"])
    wait_ms = denied.get_json()["retry_after_ms"]
    assert (retry_after - 1) * 1000 < wait_ms <= retry_after * 1000 <= 720_000, (retry_after, wait_ms)
    assert get("10.0.0.1").status_code == 429
    assert r.get(prefix + "api:10.0.0.1") == tat, "a denied request changed the state"

    # Another client has its own bucket; /health is not limited.
    other = get("10.0.0.2")
    assert other.status_code == 200, other.status_code
    assert other.headers["RateLimit-Remaining"] == "4", other.headers
    health = get("10.0.0.1", "/health")
    assert health.status_code == 200 and "RateLimit-Limit" not in health.headers, health.headers

    # Without the limiter the API still answers (fail open), without RateLimit headers.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    unreachable = redis.Redis(host="127.0.0.1", port=closed_port)
    response = create_app(unreachable, prefix=prefix).test_client().get("/")
    assert response.status_code == 200, response.status_code
    assert "RateLimit-Limit" not in response.headers, response.headers


def port_from(argv):
    """--port N, else $PORT, else 5000."""
    if len(argv) == 2 and argv[0] == "--port":
        return int(argv[1])
    if argv:
        sys.exit("usage: python examples/flask_gcra.py [--port N | --check]")
    return int(os.environ.get("PORT", "5000"))


if __name__ == "__main__":
    client = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        prefix = "check:flask_gcra:%s:" % uuid.uuid4().hex
        try:
            self_check(client, prefix)
        finally:  # the self-check leaves nothing behind, even when it fails
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.delete(*keys)
        print("self-check passed against " + REDIS_URL)
    else:
        create_app(client).run(host="127.0.0.1", port=port_from(sys.argv[1:]))
