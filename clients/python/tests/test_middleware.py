"""The WSGI middleware in a real Flask app and the ASGI middleware in a real FastAPI app,
through their test clients, against real servers: N allowed then 429 with the headers,
a policy and a key per route, fail open (and closed) when the limiter does not answer,
under CLIENT PAUSE or with no server at all."""

from __future__ import annotations

import contextlib
import socket

import pytest
import redis
import redis.asyncio
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from flask import Flask, jsonify, request

from redis_native_ratelimit import Fixed, Gcra, Log, Multi
from redis_native_ratelimit.asgi import RateLimitMiddleware as AsgiRateLimit
from redis_native_ratelimit.wsgi import RateLimitMiddleware as WsgiRateLimit

# Ample for any machine: the normal path must never take the outage path.
PATIENT = 30_000
# Under CLIENT PAUSE the call can only end by this timeout, in ms (the pause outlasts it).
SHORT = 200

# 5 per hour, no burst beyond them: every test request is judged by the counts alone.
POLICY = Gcra(max_burst=4, count=5, period="1h")


def flask_app(client, prefix, **settings):
    app = Flask(__name__)

    @app.get("/")
    def index():
        result = request.environ.get("redis_native_ratelimit.result")
        return jsonify(remaining=None if result is None else result.remaining)

    @app.post("/login")
    def login():
        return jsonify(ok=True)

    @app.get("/health")
    def health():
        return jsonify(ok=True)

    settings.setdefault("timeout_ms", PATIENT)
    settings.setdefault("routes", {"POST /login": Multi([("1m", 2)], names=("ip", "user")), "/health": None})
    settings.setdefault("key", wsgi_key)
    app.wsgi_app = WsgiRateLimit(app.wsgi_app, client, POLICY, prefix=prefix, **settings)
    return app


def wsgi_key(environ):
    ip = environ.get("REMOTE_ADDR", "unknown")
    if environ["PATH_INFO"] == "/login":
        return [ip, environ.get("HTTP_X_USER", "nobody")]
    return ip


def fastapi_app(client, prefix, **settings):
    app = FastAPI()

    @app.get("/")
    async def index(req: Request):
        result = getattr(req.state, "rate_limit", None)
        return {"remaining": None if result is None else result.remaining}

    @app.post("/login")
    async def login():
        return {"ok": True}

    @app.get("/health")
    async def health():
        return {"ok": True}

    settings.setdefault("timeout_ms", PATIENT)
    settings.setdefault("routes", {"POST /login": Multi([("1m", 2)], names=("ip", "user")), "/health": None})
    settings.setdefault("key", asgi_key)
    app.add_middleware(AsgiRateLimit, client=client, policy=POLICY, prefix=prefix, **settings)
    return app


def asgi_key(scope):
    headers = dict(scope["headers"])
    ip = headers.get(b"x-forwarded-for", b"testclient").decode()
    if scope["path"] == "/login":
        return [ip, headers.get(b"x-user", b"nobody").decode()]
    return ip


class Flavour:
    """One framework: how to build the app and send requests from an address."""

    def __init__(self, name, server_port):
        self.name = name
        self.port = server_port

    def client(self, port=None, **kwargs):
        port = self.port if port is None else port
        if self.name == "flask":
            return redis.Redis(port=port, **kwargs)
        return redis.asyncio.Redis(port=port, **kwargs)

    @contextlib.contextmanager
    def app(self, client, prefix, **settings):
        if self.name == "flask":
            app = flask_app(client, prefix, **settings)
            test = app.test_client()

            def send(method, path, address="10.0.0.1", user=None):
                headers = {"X-User": user} if user else {}
                return test.open(path, method=method, headers=headers, environ_base={"REMOTE_ADDR": address})

            yield send
        else:
            app = fastapi_app(client, prefix, **settings)
            with TestClient(app, raise_server_exceptions=True) as test:

                def send(method, path, address="10.0.0.1", user=None):
                    headers = {"X-Forwarded-For": address}
                    if user:
                        headers["X-User"] = user
                    return test.request(method, path, headers=headers)

                yield send


def body(response):
    """The JSON body, from Flask's and from httpx's responses."""
    return response.get_json() if hasattr(response, "get_json") else response.json()


@pytest.fixture(params=["flask", "fastapi"])
def flavour(request, server):
    return Flavour(request.param, server.port)


def test_n_allowed_then_429_with_headers(flavour, plain, tag):
    with flavour.app(flavour.client(), tag) as send:
        for n in range(1, 6):
            ok = send("GET", "/")
            assert ok.status_code == 200, ok.status_code
            assert body(ok) == {"remaining": 5 - n}
            assert ok.headers["RateLimit-Limit"] == "5"
            assert ok.headers["RateLimit-Remaining"] == str(5 - n)
            assert ok.headers["RateLimit-Policy"] == '"gcra";q=5;w=3600'
            assert ok.headers["RateLimit"].startswith('"gcra";r=%d;t=' % (5 - n))
            assert "Retry-After" not in ok.headers
        state = plain.get(tag + "gcra:10.0.0.1")
        denied = send("GET", "/")
        assert denied.status_code == 429
        assert body(denied)["error"] == "too many requests"
        retry_ms = body(denied)["retry_after_ms"]
        # One request per 720 s: the next fits 720 s after the first.
        assert 0 < retry_ms <= 720_000
        assert denied.headers["Retry-After"] == str(-(-retry_ms // 1000))
        assert denied.headers["RateLimit-Remaining"] == "0"
        assert denied.headers["RateLimit"].startswith('"gcra";r=0;t=')
        # A refused request changed nothing.
        assert plain.get(tag + "gcra:10.0.0.1") == state
        # Another address has its own bucket.
        assert send("GET", "/", address="10.0.0.2").headers["RateLimit-Remaining"] == "4"


def test_a_policy_and_a_key_per_route(flavour, plain, tag):
    with flavour.app(flavour.client(), tag) as send:
        # /login: RL.MULTI on the address and the account, 2 per minute.
        assert send("POST", "/login", user="alice").status_code == 200
        assert send("POST", "/login", user="alice").status_code == 200
        refused = send("POST", "/login", address="10.0.0.9", user="alice")
        assert refused.status_code == 429
        assert refused.headers["RateLimit"].startswith('"user-1m";r=0')
        assert refused.headers["RateLimit-Policy"] == '"ip-1m";q=2;w=60, "user-1m";q=2;w=60'
        assert plain.exists(tag + "multi:10.0.0.9") == 0  # refused: counted nowhere
        # /health is exempt: no call, no headers.
        for _ in range(10):
            health = send("GET", "/health")
            assert health.status_code == 200 and "RateLimit-Limit" not in health.headers
        # The GCRA bucket of / was never touched by the other routes.
        assert plain.exists(tag + "gcra:10.0.0.1") == 0


def test_legacy_x_headers_on_request(flavour, tag):
    with flavour.app(flavour.client(), tag, legacy_headers=True, standard_headers=False) as send:
        ok = send("GET", "/")
        assert ok.headers["X-RateLimit-Limit"] == "5"
        assert "RateLimit-Limit" not in ok.headers and "RateLimit-Policy" not in ok.headers


@contextlib.contextmanager
def paused(plain):
    """Writes paused for a minute (the limiter's commands are writes), unpaused at the
    end whatever happens."""
    plain.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
    try:
        yield
    finally:
        plain.execute_command("CLIENT", "UNPAUSE")


def test_fails_open_under_client_pause(flavour, plain, tag):
    """The limiter stalls (CLIENT PAUSE WRITE): the request's call can only end by the
    middleware's timeout (the pause outlasts it), and the request is served unlimited,
    without headers. The requests before and after the stall, which must be judged, go
    through an app with a patient timeout on the same keys, however slow the machine."""
    with flavour.app(flavour.client(), tag) as patient:
        assert patient("GET", "/").headers["RateLimit-Remaining"] == "4"  # counted
    # A client made without any timeout, as most are: the middleware bounds the call.
    # No circuit breaker: every request calls (the breaker has its own tests).
    with flavour.app(flavour.client(), tag, timeout_ms=SHORT, breaker=None) as send:
        with paused(plain):
            for _ in range(2):
                served = send("GET", "/")
                assert served.status_code == 200
                assert body(served) == {"remaining": None}
                assert "RateLimit-Limit" not in served.headers
    with flavour.app(flavour.client(), tag) as patient:
        after = patient("GET", "/").headers["RateLimit-Remaining"]
    # Judged again after the pause. The calls the middleware gave up on may have been
    # counted when the pause ended (the server still had them), or not.
    assert after in ("3", "2", "1")


def test_fails_closed_on_request(flavour, plain, tag):
    with flavour.app(flavour.client(), tag, timeout_ms=SHORT, fail_open=False) as send:
        with paused(plain):
            refused = send("GET", "/")
            assert refused.status_code == 503
            assert refused.headers["Retry-After"] == "1"


def test_fails_open_without_a_server(flavour, tag):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with flavour.app(flavour.client(port=closed), tag) as send:
        served = send("GET", "/")
        assert served.status_code == 200 and "RateLimit-Limit" not in served.headers


def test_bad_arguments_are_bugs_not_outages(flavour, tag):
    client = flavour.client()
    with flavour.app(client, tag, routes={"/": Fixed(5, "0s")}) as send:
        with pytest.raises(redis.exceptions.ResponseError, match="invalid window"):
            send("GET", "/")


def test_log_policy_keeps_the_requests(flavour, plain, tag):
    with flavour.app(flavour.client(), tag, routes={"/": Log(2, "1m")}) as send:
        assert [send("GET", "/").status_code for _ in range(3)] == [200, 200, 429]
        assert plain.zcard(tag + "log:10.0.0.1") == 2


def test_fails_open_when_the_server_is_out_of_memory(flavour, plain, tag):
    """OOM refuses the write: requests go through while memory is full."""
    policy = plain.config_get("maxmemory-policy")["maxmemory-policy"]
    with flavour.app(flavour.client(), tag, breaker=None) as send:
        plain.config_set("maxmemory-policy", "noeviction")
        plain.config_set("maxmemory", 1)
        try:
            served = send("GET", "/")
        finally:
            plain.config_set("maxmemory", 0)
            plain.config_set("maxmemory-policy", policy)
        assert served.status_code == 200 and "RateLimit-Limit" not in served.headers
        assert send("GET", "/").headers["RateLimit-Remaining"] == "4"


@pytest.mark.parametrize(
    "message, status, want_type, want_body",
    [
        (lambda r, request: {"error": "slow down", "retry_in_ms": r.retry_after_ms}, 429, "application/json", None),
        ("slow down\n", 503, "text/plain; charset=utf-8", b"slow down\n"),
        (b"\x00slow down", 429, "application/octet-stream", b"\x00slow down"),
    ],
    ids=["json-function", "text", "bytes"],
)
def test_the_refusals_body_and_status_can_be_changed(flavour, tag, message, status, want_type, want_body):
    with flavour.app(flavour.client(), tag, routes={"/": Fixed(1, "1h")}, message=message, status_code=status) as send:
        assert send("GET", "/").status_code == 200
        refused = send("GET", "/")
        assert refused.status_code == status
        assert refused.headers["Content-Type"] == want_type
        assert refused.headers["Retry-After"] and refused.headers["RateLimit-Remaining"] == "0"
        raw = refused.data if hasattr(refused, "data") else refused.content
        if want_body is None:
            assert body(refused)["error"] == "slow down" and body(refused)["retry_in_ms"] > 0
        else:
            assert raw == want_body
        assert refused.headers["Content-Length"] == str(len(raw))


def test_a_per_route_decorator_for_flask(plain, tag):
    from redis_native_ratelimit import Log

    app = Flask(__name__)
    # The middleware limits every route with POLICY, but /export, which has its own.
    limiter = WsgiRateLimit(
        app.wsgi_app, plain, POLICY, routes={"/export": None}, prefix=tag, key=wsgi_key, timeout_ms=PATIENT
    )
    app.wsgi_app = limiter

    @app.get("/export")
    @limiter.limit(Log(2, "1h", name="export"))
    def export():
        result = request.environ["redis_native_ratelimit.result"]
        return jsonify(remaining=result.remaining)

    @app.get("/")
    def index():
        return jsonify(ok=True)

    test = app.test_client()
    seen = [test.get("/export", environ_base={"REMOTE_ADDR": "10.0.0.5"}) for _ in range(3)]
    assert [r.status_code for r in seen] == [200, 200, 429]
    assert [r.get_json().get("remaining") for r in seen[:2]] == [1, 0]
    assert seen[0].headers["RateLimit-Policy"] == '"export";q=2;w=3600'
    assert seen[2].headers["Retry-After"] and seen[2].get_json()["error"] == "too many requests"
    assert plain.zcard(tag + "export:10.0.0.5") == 2
    assert plain.exists(tag + "gcra:10.0.0.5") == 0  # the middleware's policy left it alone
    # Other routes keep the middleware's policy.
    assert test.get("/", environ_base={"REMOTE_ADDR": "10.0.0.5"}).headers["RateLimit-Policy"] == '"gcra";q=5;w=3600'


def test_a_per_route_decorator_for_fastapi(server, plain, tag):
    from fastapi.responses import PlainTextResponse

    from redis_native_ratelimit.asgi import RouteLimiter

    routes = RouteLimiter(redis.asyncio.Redis(port=server.port), prefix=tag, key=asgi_key, timeout_ms=PATIENT)
    app = FastAPI()
    app.add_middleware(AsgiRateLimit, limiter=routes)  # shares the client and the breaker

    @app.get("/items/{item}")
    @routes.limit(Fixed(2, "1h", name="items"))
    async def item(item: int, q: str = ""):  # no Request parameter needed
        return {"item": item, "q": q}

    @app.get("/text")
    @routes.limit(Fixed(1, "1h", name="text"), key=lambda scope: "everyone")
    def text(request: Request):  # a plain function, returning a Response
        return PlainTextResponse(f"left {request.state.rate_limit.remaining}")

    with TestClient(app) as test:
        seen = [test.get("/items/7", params={"q": "x"}, headers={"X-Forwarded-For": "10.0.0.6"}) for _ in range(3)]
        assert [r.status_code for r in seen] == [200, 200, 429]
        assert seen[0].json() == {"item": 7, "q": "x"}
        assert [r.headers["RateLimit-Remaining"] for r in seen] == ["1", "0", "0"]
        assert seen[2].headers["Retry-After"] and seen[2].json()["error"] == "too many requests"
        first = test.get("/text")
        assert first.text == "left 0" and first.headers["RateLimit-Policy"] == '"text";q=1;w=3600'
        assert test.get("/text").status_code == 429
    assert plain.get(tag + "items:10.0.0.6") == b"2" and plain.get(tag + "text:everyone") == b"1"
