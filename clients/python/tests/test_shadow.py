"""Shadow mode in every middleware (the WSGI middleware and Flask's route decorator, the
ASGI middleware and FastAPI's): a policy is judged and counted as usual, a request it
would refuse passes, the would-be refusal is counted and logged once per key and window
(a clock the test moves, never the wall clock)."""

from __future__ import annotations

import contextlib
import logging

import pytest
import redis
import redis.asyncio
from fastapi import FastAPI
from fastapi.testclient import TestClient
from flask import Flask, jsonify

from conftest import Clock
from redis_native_ratelimit import Fixed
from redis_native_ratelimit.asgi import RateLimitMiddleware as AsgiRateLimit
from redis_native_ratelimit.asgi import RouteLimiter
from redis_native_ratelimit.wsgi import RateLimitMiddleware as WsgiRateLimit

POLICY = Fixed(2, "1h", name="api")
HOUR_MS = 3_600_000


def address_key(request):
    return request["REMOTE_ADDR"] if "REMOTE_ADDR" in request else dict(request["headers"])[b"x-client"].decode()


@contextlib.contextmanager
def shadowed(where, port, prefix):
    """An app whose / is limited by POLICY in shadow mode, the way `where` says: yields
    (what counts the shadow denials, send(address))."""
    settings = dict(prefix=prefix, shadow=True, key=address_key, timeout_ms=30_000)
    if where.startswith(("wsgi", "flask")):
        app = Flask(__name__)
        route = where == "flask-route"
        limiter = WsgiRateLimit(app.wsgi_app, redis.Redis(port=port), None if route else POLICY, **settings)
        app.wsgi_app = limiter
        view = lambda: jsonify(ok=True)  # noqa: E731
        app.add_url_rule("/", "index", limiter.limit(POLICY)(view) if route else view)
        test = app.test_client()
        yield limiter, lambda address: test.get("/", environ_base={"REMOTE_ADDR": address}, buffered=True)
        return
    app = FastAPI()
    route = where == "fastapi-route"
    limiter = RouteLimiter(redis.asyncio.Redis(port=port), None if route else POLICY, **settings)

    async def index():
        return {"ok": True}

    app.add_api_route("/", limiter.limit(POLICY)(index) if route else index)
    app.add_middleware(AsgiRateLimit, limiter=limiter)
    with TestClient(app) as test:
        yield limiter, lambda address: test.get("/", headers={"X-Client": address})


def shadow_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "shadow mode" in r.getMessage()]


@pytest.mark.parametrize("where", ["wsgi", "flask-route", "asgi", "fastapi-route"])
def test_shadow_mode_judges_counts_logs_once_per_key_and_window_and_lets_requests_pass(where, server, tag, caplog):
    caplog.set_level(logging.INFO, logger="redis_native_ratelimit")
    plain = redis.Redis(port=server.port)
    clock = Clock()
    try:
        with shadowed(where, server.port, tag) as (limiter, send):
            limiter.shadow.now = clock
            seen = [send("10.0.0.1") for _ in range(5)]
            # Every request passes; the headers are as computed (0 remaining), without a
            # Retry-After, which would mean something else on a 200.
            assert [r.status_code for r in seen] == [200] * 5
            assert [r.headers["RateLimit-Remaining"] for r in seen] == ["1", "0", "0", "0", "0"]
            assert not any("Retry-After" in r.headers for r in seen)
            # Judged and counted as usual: the would-be refusals counted nowhere.
            assert plain.get(tag + "api:10.0.0.1") == b"2"
            assert limiter.shadow_denials == 3
            assert {k: limiter.stats()[k] for k in ("allowed", "limited", "shadow_denials")} == {
                "allowed": 5,
                "limited": 0,
                "shadow_denials": 3,
            }
            said = shadow_warnings(caplog)
            assert len(said) == 1, said
            assert said[0].startswith('shadow mode: policy "api" would refuse ' + tag + "api:10.0.0.1 (retry in ")
            # Another key: its own first refusal is logged.
            assert [send("10.0.0.2").status_code for _ in range(3)] == [200] * 3
            assert limiter.shadow_denials == 4 and len(shadow_warnings(caplog)) == 2
            # Within the window, no more lines; once it has passed, the next one is said.
            clock.now += HOUR_MS - 60_000
            send("10.0.0.1")
            assert limiter.shadow_denials == 5 and len(shadow_warnings(caplog)) == 2
            clock.now += 60_000
            send("10.0.0.1")
            assert limiter.shadow_denials == 6 and len(shadow_warnings(caplog)) == 3
    finally:
        plain.close()


@pytest.mark.parametrize("where", ["wsgi", "asgi"])
def test_without_shadow_mode_the_same_requests_are_refused(where, server, tag):
    with shadowed(where, server.port, tag) as (limiter, send):
        limiter.settings.shadow = False
        assert [send("10.0.0.1").status_code for _ in range(3)] == [200, 200, 429]
        assert limiter.shadow_denials == 0
        assert (limiter.stats()["allowed"], limiter.stats()["limited"]) == (2, 1)
