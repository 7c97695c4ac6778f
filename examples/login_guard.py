"""A login form guarded by RL.MULTI: attempts are limited per address and per account,
in one atomic call.

Every attempt counts against both the client's address and the account it names, in
two windows (5 per minute, 20 per hour). Guessing many passwords for one account from
many addresses is stopped by the account's counter, trying one password on many
accounts from one address by the address's counter. A refused attempt consumes nothing,
so it does not push the lockout further away.

    python examples/login_guard.py [--port N]  # serves POST http://127.0.0.1:$PORT/login (default 5000)
    python examples/login_guard.py --check     # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import hmac
import os
import socket
import sys
import uuid

import redis
from flask import Flask, jsonify, request

from redis_native_ratelimit import RateLimiter, ratelimit_headers
from redis_native_ratelimit.wsgi import bounded_client

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

# (window, limit), as many as needed: each applies to every key of the call.
LIMITS = [("1m", 5), ("1h", 20)]

# Stands in for a user table with password hashes.
USERS = {"alice": "correct horse battery staple"}


def password_ok(username, password):
    expected = USERS.get(username)
    return expected is not None and hmac.compare_digest(expected, password)


def create_app(r, limits=LIMITS, prefix="rl:login:", timeout=0.5):
    app = Flask(__name__)
    # A client that gives up after `timeout` seconds, without retries.
    rl = RateLimiter(bounded_client(r, timeout))

    @app.post("/login")
    def login():
        username = request.form.get("username", "").strip().lower()
        password = request.form.get("password", "")
        # In a Redis Cluster the keys of one call must share a hash slot: give them one
        # hash tag ("{login}:ip:...", "{login}:user:..."), or make one call per key.
        keys = [prefix + "ip:" + (request.remote_addr or "unknown"), prefix + "user:" + username]
        try:
            result = rl.multi(keys, limits, names=["address", "account"])
        except (redis.ConnectionError, redis.TimeoutError):
            return jsonify(error="try again later"), 503  # fail closed: no unlimited guessing
        if not result.allowed:
            # The result names the limit that refused: which key, which window.
            scope = "address" if result.key == keys[0] else "account"
            response = jsonify(error="too many login attempts", scope=scope, window_ms=result.window_ms)
            response.status_code = 429
            response.headers.update(ratelimit_headers(result))  # Retry-After included
            return response
        if not password_ok(username, password):
            return jsonify(error="wrong user name or password"), 401
        return jsonify(welcome=username)

    return app


def self_check(r, prefix):
    """Real logins through Flask's test client against the server at REDIS_URL."""
    app = create_app(r, limits=[("1m", 3), ("1h", 10)], prefix=prefix, timeout=30)
    client = app.test_client()

    def attempt(address, username, password="guess"):
        data = {"username": username, "password": password}
        return client.post("/login", data=data, environ_base={"REMOTE_ADDR": address})

    assert attempt("10.0.0.1", "alice", "correct horse battery staple").status_code == 200
    assert attempt("10.0.0.1", "alice").status_code == 401
    assert attempt("10.0.0.1", "alice").status_code == 401
    # The address and the account have used their 3 attempts of this minute.
    denied = attempt("10.0.0.1", "alice")
    assert denied.status_code == 429, denied.status_code
    assert denied.get_json() == {
        "error": "too many login attempts",
        "scope": "address",
        "window_ms": 60000,
    }, denied.get_json()
    assert denied.headers["RateLimit-Limit"] == "3", denied.headers
    assert denied.headers["RateLimit-Remaining"] == "0", denied.headers
    assert 1 <= int(denied.headers["Retry-After"]) <= 60, denied.headers
    assert denied.headers["RateLimit-Reset"] == denied.headers["Retry-After"], denied.headers
    assert denied.headers["RateLimit"].startswith('"address-1m";r=0;'), denied.headers

    # Even the right password waits: the account is locked for this minute...
    from_elsewhere = attempt("10.0.0.2", "alice", "correct horse battery staple")
    assert from_elsewhere.status_code == 429, from_elsewhere.status_code
    assert from_elsewhere.get_json()["scope"] == "account", from_elsewhere.get_json()
    # ...and so is the address, for every account.
    other_account = attempt("10.0.0.1", "bob")
    assert other_account.status_code == 429, other_account.status_code
    assert other_account.get_json()["scope"] == "address", other_account.get_json()

    # Refused attempts consumed nothing, on any key: 10.0.0.2 and bob have no counter.
    assert r.exists(prefix + "ip:10.0.0.2", prefix + "user:bob") == 0
    counters = r.get(prefix + "user:alice").decode()
    assert [entry.split(":")[:2] for entry in counters.split(",")] == [
        ["60000", "3"],
        ["3600000", "3"],
    ], counters

    # Other addresses and accounts are not affected.
    assert attempt("10.0.0.3", "carol").status_code == 401

    # Without the limiter, logins are refused rather than unlimited.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    unreachable = redis.Redis(host="127.0.0.1", port=closed_port)
    response = create_app(unreachable, prefix=prefix).test_client().post("/login", data={"username": "alice"})
    assert response.status_code == 503, response.status_code


def port_from(argv):
    """--port N, else $PORT, else 5000."""
    if len(argv) == 2 and argv[0] == "--port":
        return int(argv[1])
    if argv:
        sys.exit("usage: python examples/login_guard.py [--port N | --check]")
    return int(os.environ.get("PORT", "5000"))


if __name__ == "__main__":
    client = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        prefix = "check:login_guard:%s:" % uuid.uuid4().hex
        try:
            self_check(client, prefix)
        finally:  # the self-check leaves nothing behind, even when it fails
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.delete(*keys)
        print("self-check passed against " + REDIS_URL)
    else:
        create_app(client).run(host="127.0.0.1", port=port_from(sys.argv[1:]))
