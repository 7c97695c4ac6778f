"""A Flask app that rate limits every request with RL.GCRA.

Each client (here: its address) gets 10 requests per second in the long run and bursts
of up to 20. Every response carries RateLimit-Limit, RateLimit-Remaining and
RateLimit-Reset; a denied request gets 429 Too Many Requests with Retry-After.

    python examples/flask_gcra.py          # serves http://127.0.0.1:5000/
    python examples/flask_gcra.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import socket
import sys
import time

import redis
from flask import Flask, g, jsonify, request

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

# RL.GCRA key max_burst count period: `count` per `period`, capacity max_burst + 1.
MAX_BURST, COUNT, PERIOD = 19, 10, "1s"


def ceil_seconds(ms):
    """Milliseconds to whole seconds, rounded up: a client never comes back too early."""
    return (ms + 999) // 1000


def create_app(r, max_burst=MAX_BURST, count=COUNT, period=PERIOD, prefix="rl:api:"):
    app = Flask(__name__)

    @app.before_request
    def rate_limit():
        # Behind a proxy, let werkzeug's ProxyFix set remote_addr; for signed-in users,
        # a user id makes a better key than an address.
        key = prefix + "ip:" + (request.remote_addr or "unknown")
        try:
            limited, limit, remaining, retry_ms, reset_ms = r.execute_command(
                "RL.GCRA", key, max_burst, count, period
            )
        except redis.exceptions.ConnectionError:
            app.logger.warning("rate limiter unreachable: request served unlimited")
            return None  # fail open: an outage of the limiter is not an outage of the API
        g.rate_limit_headers = {
            "RateLimit-Limit": str(limit),
            "RateLimit-Remaining": str(remaining),
            "RateLimit-Reset": str(ceil_seconds(reset_ms)),
        }
        if limited:
            response = jsonify(error="too many requests", retry_after_ms=retry_ms)
            response.status_code = 429
            response.headers["Retry-After"] = str(ceil_seconds(retry_ms))
            return response  # Flask skips the view; after_request still runs
        return None

    @app.after_request
    def add_rate_limit_headers(response):
        response.headers.update(g.get("rate_limit_headers", {}))
        return response

    @app.get("/")
    def hello():
        return jsonify(hello="world")

    return app


def self_check(r, prefix):
    """Real requests through Flask's test client against the server at REDIS_URL."""
    # 5 per hour, no burst beyond them: T = 720 s, capacity 5.
    app = create_app(r, max_burst=4, count=5, period="1h", prefix=prefix)
    client = app.test_client()

    def get(address):
        return client.get("/", environ_base={"REMOTE_ADDR": address})

    start = time.monotonic()
    for n in range(1, 6):
        response = get("10.0.0.1")
        assert response.status_code == 200, (n, response.status_code)
        assert response.headers["RateLimit-Limit"] == "5", response.headers
        assert response.headers["RateLimit-Remaining"] == str(5 - n), response.headers
        # The bucket is full again n * 720 s after the first request.
        reset = int(response.headers["RateLimit-Reset"])
        assert n * 720 - (time.monotonic() - start) - 1 <= reset <= n * 720, (n, reset)
        assert "Retry-After" not in response.headers, response.headers
    tat = r.get(prefix + "ip:10.0.0.1")

    denied = get("10.0.0.1")
    elapsed = time.monotonic() - start
    assert denied.status_code == 429, denied.status_code
    assert denied.get_json()["error"] == "too many requests", denied.get_json()
    assert denied.headers["RateLimit-Limit"] == "5", denied.headers
    assert denied.headers["RateLimit-Remaining"] == "0", denied.headers
    # The next request fits 720 s after the first one; Retry-After is in whole seconds.
    retry_after = int(denied.headers["Retry-After"])
    assert 720 - elapsed - 1 <= retry_after <= 720, (retry_after, elapsed)
    # Whole seconds rounded up: never shorter than the wait the limiter asked for.
    wait_ms = denied.get_json()["retry_after_ms"]
    assert (retry_after - 1) * 1000 < wait_ms <= retry_after * 1000, (retry_after, wait_ms)
    reset = int(denied.headers["RateLimit-Reset"])
    assert 3600 - elapsed - 1 <= reset <= 3600, (reset, elapsed)
    assert get("10.0.0.1").status_code == 429
    assert r.get(prefix + "ip:10.0.0.1") == tat, "a denied request changed the state"

    # Another client has its own bucket.
    other = get("10.0.0.2")
    assert other.status_code == 200, other.status_code
    assert other.headers["RateLimit-Remaining"] == "4", other.headers

    # Without the limiter the API still answers (fail open), without RateLimit headers.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    unreachable = redis.Redis(host="127.0.0.1", port=closed_port, socket_connect_timeout=1)
    response = create_app(unreachable).test_client().get("/")
    assert response.status_code == 200, response.status_code
    assert "RateLimit-Limit" not in response.headers, response.headers


if __name__ == "__main__":
    client = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        self_check(client, "check:flask_gcra:%d:" % os.getpid())
        print("self-check passed against " + REDIS_URL)
    elif sys.argv[1:]:
        sys.exit("usage: python examples/flask_gcra.py [--check]")
    else:
        create_app(client).run(host="127.0.0.1", port=5000)
