"""The middleware's options as express-rate-limit 8 users know them, on a real Flask app
(WSGI) and a real FastAPI app (ASGI) against a server with the module: ``skip``,
``handler``, ``message`` and ``status_code``, the header drafts and the legacy
headers, IPv6 clients grouped by their /56, the breaker's defaults, the twins'
``"fallback"``, a lease's ``Retry-After``, and the keys of RL.ALL policies."""

from __future__ import annotations

import contextlib
import logging

import pytest
import redis
import redis.asyncio
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from fastapi.testclient import TestClient
from flask import Flask, Response, jsonify

from redis_native_ratelimit import All, CircuitBreaker, Fixed, Gcra, Lease, Multi, RateLimiter, ip_key
from redis_native_ratelimit.asgi import RateLimitMiddleware as AsgiRateLimit
from redis_native_ratelimit.asgi import RouteLimiter
from redis_native_ratelimit.wsgi import RateLimitMiddleware as WsgiRateLimit

PATIENT = 30_000  # ms: ample for any machine, the normal path never times out


def with_client_header(app):
    """An ASGI app whose client address is the request's X-Client header, as a proxy
    headers middleware sets it (the test client has one address of its own)."""

    async def wrapped(scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"x-client")
            if given:
                scope = dict(scope, client=(given.decode(), 50000))
        await app(scope, receive, send)

    return wrapped


def address_of(request) -> str:
    """The client address of a WSGI environ or an ASGI scope."""
    if "REMOTE_ADDR" in request:
        return request["REMOTE_ADDR"]
    return request["client"][0]


@contextlib.contextmanager
def served(kind, port, policy, **settings):
    """An app with the routes / and /other limited by the middleware made with these
    settings: yields (the middleware's limiter, send(address, path))."""
    settings.setdefault("timeout_ms", PATIENT)
    if kind == "flask":
        app = Flask(__name__)
        app.add_url_rule("/", "index", lambda: jsonify(ok=True))
        app.add_url_rule("/other", "other", lambda: jsonify(ok=True))
        middleware = WsgiRateLimit(app.wsgi_app, redis.Redis(port=port), policy, **settings)
        app.wsgi_app = middleware
        test = app.test_client()
        # buffered: the response is read and closed, as a server does once it is sent.
        yield middleware, lambda address="10.0.0.1", path="/": test.get(
            path, environ_base={"REMOTE_ADDR": address}, buffered=True
        )
        return
    app = FastAPI()
    app.add_api_route("/", lambda: {"ok": True})
    app.add_api_route("/other", lambda: {"ok": True})
    limiter = RouteLimiter(redis.asyncio.Redis(port=port), policy, **settings)
    app.add_middleware(AsgiRateLimit, limiter=limiter)
    with TestClient(with_client_header(app)) as test:
        yield limiter, lambda address="10.0.0.1", path="/": test.get(path, headers={"X-Client": address})


@pytest.fixture(params=["flask", "fastapi"])
def kind(request):
    return request.param


def codes(send, n, **kwargs):
    return [send(**kwargs).status_code for _ in range(n)]


def test_skip_lets_a_request_through_without_a_call(kind, server, plain, tag):
    office = "10.9.9.9"
    with served(kind, server.port, Fixed(1, "1h"), prefix=tag, skip=lambda request: address_of(request) == office) as (
        _,
        send,
    ):
        skipped = [send(address=office) for _ in range(3)]
        assert [r.status_code for r in skipped] == [200] * 3
        assert not any("RateLimit-Limit" in r.headers for r in skipped)
        assert plain.exists(tag + "fixed:" + office) == 0  # no call was made
        assert codes(send, 2) == [200, 429]


def test_a_handler_replaces_the_refusal(kind, server, tag):
    seen = []

    def flask_handler(environ, result):
        seen.append((address_of(environ), result.allowed))
        return Response(f"wait {result.retry_after_ms} ms", status=429, headers={"X-Why": "limited"})

    async def fastapi_handler(scope, result):  # the ASGI handler may be a coroutine
        seen.append((address_of(scope), result.allowed))
        return PlainTextResponse(f"wait {result.retry_after_ms} ms", status_code=429, headers={"X-Why": "limited"})

    handler = flask_handler if kind == "flask" else fastapi_handler
    with served(kind, server.port, Fixed(1, "1h"), prefix=tag, handler=handler) as (_, send):
        assert send().status_code == 200
        refused = send()
        assert refused.status_code == 429 and refused.headers["X-Why"] == "limited"
        body = refused.get_data(as_text=True) if hasattr(refused, "get_data") else refused.text
        assert body.startswith("wait ") and body.endswith(" ms")
        # The rate limit headers the handler did not set itself are added.
        assert refused.headers["Retry-After"] and refused.headers["RateLimit-Remaining"] == "0"
        assert seen == [("10.0.0.1", False)]


@pytest.mark.parametrize(
    "settings, present, absent",
    [
        ({}, {"RateLimit-Limit": "5", "RateLimit-Policy": '"gcra";q=5;w=3600'}, ["X-RateLimit-Limit"]),
        (
            {"standard_headers": "draft-6"},
            {"RateLimit-Limit": "5", "RateLimit-Remaining": "4", "RateLimit-Policy": "5;w=3600"},
            ["RateLimit", "X-RateLimit-Limit"],
        ),
        (
            {"standard_headers": "draft-7"},
            {"RateLimit-Policy": "5;w=3600", "RateLimit": "limit=5, remaining=4, reset=720"},
            ["RateLimit-Limit"],
        ),
        (
            {"standard_headers": "draft-8"},
            {"RateLimit-Policy": '"gcra";q=5;w=3600', "RateLimit": '"gcra";r=4;t=720'},
            ["RateLimit-Limit"],
        ),
        (
            {"standard_headers": False, "legacy_headers": True},
            {"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4", "X-RateLimit-Reset": "720"},
            ["RateLimit-Limit", "RateLimit-Policy", "RateLimit"],
        ),
    ],
    ids=["default", "draft-6", "draft-7", "draft-8", "legacy"],
)
def test_the_header_drafts_as_express_rate_limit_names_them(kind, server, tag, settings, present, absent):
    with served(kind, server.port, Gcra(4, 5, "1h"), prefix=tag, **settings) as (_, send):
        ok = send()
        assert ok.status_code == 200
        for name, value in present.items():
            assert ok.headers.get(name) == value, (name, dict(ok.headers))
        for name in absent:
            assert name not in ok.headers, (name, dict(ok.headers))


def test_ipv6_clients_are_grouped_by_their_56(kind, server, plain, tag):
    with served(kind, server.port, Fixed(2, "1h"), prefix=tag) as (_, send):
        # Two addresses of one /56 share a bucket: the third request of the two is refused.
        assert codes(send, 1, address="2001:db8:1:2300::1") == [200]
        assert codes(send, 2, address="2001:db8:1:23ff:ffff::2") == [200, 429]
        # The next /56 is another client.
        assert codes(send, 1, address="2001:db8:1:2400::1") == [200]
        assert plain.get(tag + "fixed:2001:db8:1:2300::/56") == b"2"
        # IPv4 addresses stay whole.
        assert codes(send, 2, address="10.0.0.7") == [200, 200]
    with served(kind, server.port, Fixed(1, "1h"), prefix=tag + "whole:", ipv6_subnet=False) as (_, send):
        assert codes(send, 1, address="2001:db8:1:2300::1") == [200]
        assert codes(send, 1, address="2001:db8:1:2300::2") == [200]


def test_ip_key_is_express_rate_limits_grouping():
    assert ip_key("2001:db8:1:2345:6789::1") == "2001:db8:1:2300::/56"
    assert ip_key("2001:db8:1:2345:6789::1", 64) == "2001:db8:1:2345::/64"
    assert ip_key("2001:db8:1:2345:6789::1", False) == "2001:db8:1:2345:6789::1"
    assert ip_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert ip_key("10.0.0.1") == "10.0.0.1"
    assert ip_key(None) == "unknown"
    with pytest.raises(ValueError, match="ipv6_subnet"):
        WsgiRateLimit(None, redis.Redis(), Fixed(1, "1m"), ipv6_subnet=200)


def test_the_breaker_and_timeout_defaults_are_the_node_packages():
    """Open after one failure for 1 s, then one probe; a call waits 250 ms."""
    breaker = CircuitBreaker()
    assert (breaker.failures, breaker.cooldown_ms) == (1, 1000)
    for middleware in (
        WsgiRateLimit(None, redis.Redis(), Fixed(1, "1m")),
        RouteLimiter(redis.asyncio.Redis(), Fixed(1, "1m")),
    ):
        assert middleware.settings.timeout_ms == 250
        assert (middleware.breaker.failures, middleware.breaker.cooldown_ms) == (1, 1000)
    assert WsgiRateLimit(None, redis.Redis(), None, breaker=None).breaker is None
    custom = RouteLimiter(redis.asyncio.Redis(), None, breaker={"failures": 2, "cooldown_ms": 10})
    assert (custom.breaker.failures, custom.breaker.cooldown_ms) == (2, 10)


def test_the_breaker_opens_after_failures_in_a_row_and_lets_one_probe_through():
    now = [0.0]
    breaker = CircuitBreaker(failures=2, cooldown_ms=1000, now=lambda: now[0])
    assert breaker.allow() and not breaker.failure() and breaker.state == "closed"
    assert breaker.allow() and breaker.success() is False  # a success resets the count
    assert breaker.allow() and not breaker.failure()
    assert breaker.allow() and breaker.failure() and breaker.state == "open"
    assert [breaker.allow() for _ in range(3)] == [False] * 3
    now[0] += 1000
    assert breaker.allow() and breaker.state == "half-open"
    assert not breaker.allow()  # one probe at a time
    assert not breaker.failure() and breaker.state == "open"  # reopened, not newly opened
    now[0] += 1000
    assert breaker.allow() and breaker.success() and breaker.state == "closed"
    assert (breaker.opened, breaker.skipped) == (1, 4)


def test_twins_takes_fallback_and_refuses_the_old_auto():
    for make in (
        lambda: RateLimiter(redis.Redis(), twins="auto"),
        lambda: WsgiRateLimit(None, redis.Redis(), None, twins="auto"),
        lambda: RouteLimiter(redis.asyncio.Redis(), None, twins="auto"),
    ):
        with pytest.raises(ValueError, match='"fallback"'):
            make()


def test_a_limiter_with_fallback_runs_the_twin_of_a_command_the_server_lacks(bare_server, tag, caplog):
    caplog.set_level(logging.INFO, logger="redis_native_ratelimit")
    rl = RateLimiter(redis.Redis(port=bare_server.port), twins="fallback")
    seen = [rl.gcra(tag + "g", 1, 1, "1h").allowed for _ in range(3)]
    assert seen == [True, True, False]
    assert rl.fixed(tag + "f", 1, "1h").allowed
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(said) == 2 and "RL.GCRA" in said[0] and "RL.FIXED" in said[1], said  # once per command
    assert rl.missing == {"RL.GCRA", "RL.FIXED"}


@pytest.mark.parametrize(
    "policy, retry_after, retry_after_ms",
    [
        (Lease(1, "2m"), "1", 1000),
        (Lease(1, "2m", retry_after="5s"), "5", 5000),
        (All([Gcra(9, 10, "1s"), Lease(1, "2m", retry_after="1500ms")]), "2", 1500),
    ],
    ids=["lease-default", "lease-5s", "all-with-a-lease-rule"],
)
def test_a_lease_refusal_says_retry_after_from_the_policy(kind, server, plain, tag, policy, retry_after, retry_after_ms):
    """Another request holds the one slot (its lease taken as the middleware takes one):
    the refusal says to come back after the policy's retry_after, not after the 2 min
    the oldest lease may still run."""
    key = (lambda r: [address_of(r)] * 2) if isinstance(policy, All) else None
    slot = tag + ("all:lease2:" if isinstance(policy, All) else "lease:") + "10.0.0.1"
    plain.execute_command("RL.LEASE", slot, 1, "2m", "ID", "another-request")
    with served(kind, server.port, policy, prefix=tag, key=key) as (_, send):
        refused = send()
        assert refused.status_code == 429
        assert refused.headers["Retry-After"] == retry_after
        body = refused.get_json() if hasattr(refused, "get_json") else refused.json()
        assert body["retry_after_ms"] == retry_after_ms
    plain.execute_command("RL.RELEASE", slot, "another-request")


def test_an_all_policy_takes_one_identity_per_rule_and_its_keys_name_the_rule(kind, server, plain, tag):
    """`key` giving the same address twice: a rate and a slot for one client."""
    policy = All([Gcra(1, 1, "1h", name="rate"), Lease(5, "1m", name="slot")], name="api")
    with served(kind, server.port, policy, prefix=tag, key=lambda r: [address_of(r), address_of(r)]) as (_, send):
        assert codes(send, 3) == [200, 200, 429]
        assert plain.exists(tag + "api:gcra1:10.0.0.1") == 1
        assert plain.exists(tag + "api:lease2:10.0.0.1") == 0  # each request's slot released


@pytest.mark.parametrize("returned", ["10.0.0.1", ["10.0.0.1"], ["a", "b", "c"]], ids=["bare-string", "too-few", "too-many"])
def test_an_identity_list_that_does_not_fit_an_all_policy_is_a_clear_error(kind, server, plain, tag, returned):
    policy = All([Gcra(1, 1, "1h"), Lease(5, "1m")], name="api")
    with served(kind, server.port, policy, prefix=tag, key=lambda r: returned) as (_, send):
        with pytest.raises(ValueError, match=r"has 2 rules.*return a list of 2 identities"):
            send()
    assert plain.keys(tag + "*") == []  # found before any call


def test_the_default_key_with_an_all_policy_of_several_rules_is_refused_at_start_up():
    policy = All([Gcra(1, 1, "1h"), Lease(5, "1m")])
    with pytest.raises(ValueError, match="default key is one identity"):
        WsgiRateLimit(None, redis.Redis(), policy)
    with pytest.raises(ValueError, match="default key is one identity"):
        RouteLimiter(redis.asyncio.Redis(), None, routes={"/api/": policy})
    with pytest.raises(ValueError, match="default key is one identity"):
        WsgiRateLimit(None, redis.Redis(), None).limit(policy)
    # One rule, or a key function, or a policy of several keys that is not an All: fine.
    WsgiRateLimit(None, redis.Redis(), All([Gcra(1, 1, "1h")]))
    WsgiRateLimit(None, redis.Redis(), policy, key=lambda environ: ["a", "b"])
    WsgiRateLimit(None, redis.Redis(), Multi([("1m", 5)]))


def test_a_probe_that_meets_a_bad_argument_closes_the_breaker(kind, server, tag):
    """The server answered the probe (with an error in the call, a bug that is raised):
    the breaker closes, and the next requests call the limiter again."""
    now = [0.0]
    breaker = CircuitBreaker(now=lambda: now[0])
    routes = {"/other": Fixed(5, "0s")}  # an invalid window: the server's error
    with served(kind, server.port, Fixed(5, "1h"), prefix=tag, routes=routes, breaker=breaker) as (_, send):
        breaker.failure()  # an outage opened it
        assert "RateLimit-Limit" not in send().headers  # skipped: served unlimited
        now[0] += breaker.cooldown_ms
        with pytest.raises(redis.exceptions.ResponseError, match="invalid window"):
            send(path="/other")  # the probe
        assert breaker.state == "closed"
        assert send().headers["RateLimit-Limit"] == "5"


def test_the_route_decorators_take_skip_and_handler_too(server, tag):
    def answer(request, result):
        return Response("no", status=429) if "REMOTE_ADDR" in request else PlainTextResponse("no", status_code=429)

    skip = lambda request: address_of(request) == "10.9.9.9"  # noqa: E731
    app = Flask(__name__)
    settings = dict(skip=skip, handler=answer, timeout_ms=PATIENT)
    flask_limiter = WsgiRateLimit(app.wsgi_app, redis.Redis(port=server.port), None, prefix=tag + "w:", **settings)
    app.add_url_rule("/", "index", flask_limiter.limit(Fixed(1, "1h"))(lambda: jsonify(ok=True)))
    test = app.test_client()
    seen = [test.get("/", environ_base={"REMOTE_ADDR": a}) for a in ("10.9.9.9", "10.9.9.9", "10.0.0.1", "10.0.0.1")]
    assert [s.status_code for s in seen] == [200, 200, 200, 429]
    assert seen[3].get_data() == b"no" and seen[3].headers["Retry-After"] and seen[3].headers["RateLimit-Limit"] == "1"

    api = FastAPI()
    routes = RouteLimiter(redis.asyncio.Redis(port=server.port), prefix=tag + "a:", **settings)

    async def index():
        return {"ok": True}

    api.add_api_route("/", routes.limit(Fixed(1, "1h"))(index))
    with TestClient(with_client_header(api)) as client:
        seen = [client.get("/", headers={"X-Client": a}) for a in ("10.9.9.9", "10.9.9.9", "10.0.0.1", "10.0.0.1")]
    assert [s.status_code for s in seen] == [200, 200, 200, 429]
    assert seen[3].text == "no" and seen[3].headers["Retry-After"] and seen[3].headers["RateLimit-Limit"] == "1"
