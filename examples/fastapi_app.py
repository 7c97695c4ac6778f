"""A FastAPI app rate limited by the package's ASGI middleware, on redis-py's asyncio
client.

Every route gets 10 requests per second per client with bursts of 20 (RL.GCRA); the
search route, which is expensive, also gets at most 100 per minute in any minute per
client (RL.SLIDING); /health is not limited. Each response carries the rate limit
headers; a refused request gets 429 with Retry-After. If Redis does not answer within
a quarter of a second, the request is served unlimited (fail open).

    python examples/fastapi_app.py [--port N]  # serves http://127.0.0.1:$PORT/ (default 8000)
    python examples/fastapi_app.py --check     # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import sys
import uuid

import redis
import redis.asyncio
from fastapi import FastAPI, Request

from redis_native_ratelimit import Gcra, Sliding
from redis_native_ratelimit.asgi import RateLimitMiddleware

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")


def client_address(scope):
    """The key of a request: the client's address (run uvicorn with --proxy-headers
    behind a proxy). Return a list for policies with several keys."""
    client = scope.get("client")
    return client[0] if client else "unknown"


# The expensive route's own limit: sliding windows on a second key, all or nothing, one
# call (RL.SLIDING).
SEARCH = Sliding([("1s", 10), ("1m", 100)], names=["search"], name="search")


def create_app(r, prefix="rl:", per_second=Gcra(19, 10, "1s", name="api"), search_policy=SEARCH, timeout_ms=250):
    app = FastAPI()

    @app.get("/")
    async def index(request: Request):
        result = getattr(request.state, "rate_limit", None)  # None when served unlimited
        return {"hello": "world", "remaining": None if result is None else result.remaining}

    @app.get("/search")
    async def search(q: str = ""):
        return {"results": [], "q": q}

    @app.get("/health")
    async def health():
        return {"ok": True}

    app.add_middleware(
        RateLimitMiddleware,
        client=r,  # redis.asyncio.Redis (or RedisCluster)
        policy=per_second,
        routes={
            "/health": None,
            "GET /search": search_policy,
        },
        key=client_address,
        prefix=prefix,
        timeout_ms=timeout_ms,
    )
    return app


def self_check(prefix):
    """Real requests through Starlette's test client against the server at REDIS_URL."""
    import warnings

    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

    r = redis.asyncio.Redis.from_url(REDIS_URL)
    # 5 per hour (no burst beyond), /search 10 per hour and 100 a day (its eleventh
    # request is refused however long the first ten took), and a generous timeout: the
    # self-check must never take the outage path on a busy machine.
    hourly = Sliding([("1h", 10), ("1d", 100)], names=["search"], name="search")
    app = create_app(r, prefix=prefix, per_second=Gcra(4, 5, "1h", name="api"), search_policy=hourly, timeout_ms=30_000)
    with TestClient(app) as client:
        for n in range(1, 6):
            ok = client.get("/")
            assert ok.status_code == 200, ok.status_code
            assert ok.json()["remaining"] == 5 - n, ok.json()
            assert ok.headers["RateLimit-Remaining"] == str(5 - n), ok.headers
            assert ok.headers["RateLimit-Policy"] == '"api";q=5;w=3600', ok.headers
        denied = client.get("/")
        assert denied.status_code == 429, denied.status_code
        assert 1 <= int(denied.headers["Retry-After"]) <= 720, denied.headers
        assert denied.headers["RateLimit"].startswith('"api";r=0;t='), denied.headers
        # /search has its own policy and key: 10 in any hour.
        codes = [client.get("/search", params={"q": "x"}).status_code for _ in range(11)]
        assert codes == [200] * 10 + [429], codes
        assert client.get("/search").headers["RateLimit-Policy"] == '"search-1h";q=10;w=3600, "search-1d";q=100;w=86400'
        # /health is not limited.
        assert all(client.get("/health").status_code == 200 for _ in range(10))

    # Without the limiter the API still answers (fail open).
    unreachable = redis.asyncio.Redis(host="127.0.0.1", port=free_port())
    with TestClient(create_app(unreachable, prefix=prefix)) as client:
        served = client.get("/")
        assert served.status_code == 200 and "RateLimit-Limit" not in served.headers, served.headers


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


app = create_app(redis.asyncio.Redis.from_url(REDIS_URL))  # uvicorn examples.fastapi_app:app

if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        prefix = "check:fastapi_app:%s:" % uuid.uuid4().hex
        plain = redis.Redis.from_url(REDIS_URL)
        try:
            self_check(prefix)
        finally:  # the self-check leaves nothing behind, even when it fails
            keys = list(plain.scan_iter(match=prefix + "*"))
            if keys:
                plain.delete(*keys)
        print("self-check passed against " + REDIS_URL)
    else:
        argv = sys.argv[1:]
        if argv and not (len(argv) == 2 and argv[0] == "--port"):
            sys.exit("usage: python examples/fastapi_app.py [--port N | --check]")
        import uvicorn

        uvicorn.run(app, host="127.0.0.1", port=int(argv[1]) if argv else int(os.environ.get("PORT", "8000")))
