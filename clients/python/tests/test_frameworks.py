"""Flask-Limiter and SlowAPI apps, written for the `limits` library's Redis storage,
switched to the native commands by their storage URI alone (and ``import
redis_native_ratelimit``). The same behaviour checks run against both URIs: the app's own
test passes before and after the switch."""

from __future__ import annotations

import pytest
from fastapi import FastAPI, Request, Response
from fastapi.testclient import TestClient
from flask import Flask
from flask_limiter import Limiter as FlaskLimiter
from flask_limiter.util import get_remote_address as flask_address
from slowapi import Limiter as SlowLimiter
from slowapi import _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address as slow_address

import redis_native_ratelimit  # noqa: F401 - the only change besides the URI
from redis_native_ratelimit.limits_storage import RateLimitStorage

STRATEGIES = ["fixed-window", "moving-window", "sliding-window-counter"]


def flask_limiter_app(storage_uri: str, strategy: str, prefix: str):
    """A Flask-Limiter app as its documentation writes one for Redis."""
    app = Flask(__name__)
    limiter = FlaskLimiter(
        flask_address,
        app=app,
        default_limits=["5 per minute"],
        storage_uri=storage_uri,
        strategy=strategy,
        headers_enabled=True,
        key_prefix=prefix,
    )

    @app.route("/slow")
    @limiter.limit("2 per minute")
    def slow():
        return "slow"

    @app.route("/fast")
    def fast():
        return "fast"

    @app.route("/ping")
    @limiter.exempt
    def ping():
        return "pong"

    return app, limiter


def check_flask_limiter_app(app):
    """The behaviour test of the app: limits per route, headers, exemption."""
    client = app.test_client()
    for n in (1, 2):
        ok = client.get("/slow")
        assert ok.status_code == 200
        assert ok.headers["X-RateLimit-Limit"] == "2"
        assert ok.headers["X-RateLimit-Remaining"] == str(2 - n)
    refused = client.get("/slow")
    assert refused.status_code == 429
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert 0 < int(refused.headers["Retry-After"]) <= 60
    assert int(refused.headers["X-RateLimit-Reset"]) > 0
    assert [client.get("/fast").status_code for _ in range(6)] == [200] * 5 + [429]
    assert all(client.get("/ping").status_code == 200 for _ in range(10))
    # Another client address has its own limits.
    assert client.get("/slow", environ_base={"REMOTE_ADDR": "10.9.9.9"}).status_code == 200


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_flask_limiter_app_passes_its_test_on_both_storages(server, strategy, tag):
    library = f"redis://127.0.0.1:{server.port}"
    native = f"redis+ratelimit://127.0.0.1:{server.port}"
    app, limiter = flask_limiter_app(library, strategy, "library" + tag)
    assert type(limiter.storage).__name__ == "RedisStorage"
    check_flask_limiter_app(app)
    app, limiter = flask_limiter_app(native, strategy, "native" + tag)
    assert isinstance(limiter.storage, RateLimitStorage)
    check_flask_limiter_app(app)


def slowapi_app(storage_uri: str, strategy: str, prefix: str):
    """A SlowAPI app as its documentation writes one."""
    limiter = SlowLimiter(
        key_func=slow_address, storage_uri=storage_uri, strategy=strategy, headers_enabled=True, key_prefix=prefix
    )
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)

    @app.get("/home")
    @limiter.limit("3/minute")
    async def home(request: Request, response: Response):
        return {"home": True}

    return app, limiter


def check_slowapi_app(app):
    with TestClient(app) as client:
        for n in (1, 2, 3):
            ok = client.get("/home")
            assert ok.status_code == 200
            assert ok.headers["X-RateLimit-Limit"] == "3"
            assert ok.headers["X-RateLimit-Remaining"] == str(3 - n)
        refused = client.get("/home")
        assert refused.status_code == 429
        assert 0 < int(refused.headers["Retry-After"]) <= 61
        assert refused.headers["X-RateLimit-Remaining"] == "0"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_slowapi_app_on_the_native_commands(server, strategy, tag):
    app, limiter = slowapi_app(f"redis://127.0.0.1:{server.port}", strategy, "library" + tag)
    check_slowapi_app(app)
    app, limiter = slowapi_app(f"redis+ratelimit://127.0.0.1:{server.port}", strategy, "native" + tag)
    assert isinstance(limiter._storage, RateLimitStorage)
    check_slowapi_app(app)
