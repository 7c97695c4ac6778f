"""A login form guarded by RL.MULTI: attempts are limited per address and per account,
in one atomic call.

Every attempt counts against both the client's address and the account it names, in
two windows (5 per minute, 20 per hour). Guessing many passwords for one account from
many addresses is stopped by the account's counter, trying one password on many
accounts from one address by the address's counter. A refused attempt consumes nothing,
so it does not push the lockout further away.

    python examples/login_guard.py          # serves POST http://127.0.0.1:5000/login
    python examples/login_guard.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import hmac
import os
import socket
import sys

import redis
from flask import Flask, jsonify, request

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

# LIMIT window limit, as many as needed: each applies to every key of the call.
LIMITS = [("1m", 5), ("1h", 20)]

# Stands in for a user table with password hashes.
USERS = {"alice": "correct horse battery staple"}


def ceil_seconds(ms):
    """Milliseconds to whole seconds, rounded up: a client never comes back too early."""
    return (ms + 999) // 1000


def password_ok(username, password):
    expected = USERS.get(username)
    return expected is not None and hmac.compare_digest(expected, password)


def create_app(r, limits=LIMITS, prefix="rl:login:"):
    app = Flask(__name__)
    limit_args = [arg for window, limit in limits for arg in ("LIMIT", window, limit)]

    @app.post("/login")
    def login():
        username = request.form.get("username", "").strip().lower()
        password = request.form.get("password", "")
        # In a Redis Cluster the keys of one call must share a hash slot: give them one
        # hash tag ("{login}:ip:...", "{login}:user:..."), or make one call per key.
        keys = [prefix + "ip:" + (request.remote_addr or "unknown"), prefix + "user:" + username]
        try:
            reply = r.execute_command("RL.MULTI", len(keys), *keys, *limit_args)
        except redis.exceptions.ConnectionError:
            return jsonify(error="try again later"), 503  # fail closed: no unlimited guessing
        limited, limit, remaining, retry_ms, reset_ms, key, window_ms = reply
        if limited:
            # The reply names the limit that refused: which key, which window.
            scope = "address" if key.decode() == keys[0] else "account"
            response = jsonify(error="too many login attempts", scope=scope, window_ms=window_ms)
            response.status_code = 429
            response.headers["Retry-After"] = str(ceil_seconds(retry_ms))
            response.headers["RateLimit-Limit"] = str(limit)
            response.headers["RateLimit-Remaining"] = str(remaining)
            response.headers["RateLimit-Reset"] = str(ceil_seconds(reset_ms))
            return response
        if not password_ok(username, password):
            return jsonify(error="wrong user name or password"), 401
        return jsonify(welcome=username)

    return app


def self_check(r, prefix):
    """Real logins through Flask's test client against the server at REDIS_URL."""
    app = create_app(r, limits=[("1m", 3), ("1h", 10)], prefix=prefix)
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
    unreachable = redis.Redis(host="127.0.0.1", port=closed_port, socket_connect_timeout=1)
    response = create_app(unreachable).test_client().post("/login", data={"username": "alice"})
    assert response.status_code == 503, response.status_code


if __name__ == "__main__":
    client = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        self_check(client, "check:login_guard:%d:" % os.getpid())
        print("self-check passed against " + REDIS_URL)
    elif sys.argv[1:]:
        sys.exit("usage: python examples/login_guard.py [--check]")
    else:
        create_app(client).run(host="127.0.0.1", port=5000)
