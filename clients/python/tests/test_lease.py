"""Leases against real servers: the typed calls (blocking and asyncio, the module and
its twins), the context manager (releases on exit and on error, raises a denial with
the HTTP headers, renews in the background), RL.ALL with a Lease rule, and the WSGI and
ASGI middleware holding a lease for a request's duration."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
import redis
import redis.asyncio
from fastapi import FastAPI
from fastapi.testclient import TestClient
from flask import Flask, jsonify

from redis_native_ratelimit import All, Gcra, Lease, LeaseDenied, RateLimiter
from redis_native_ratelimit.asgi import RateLimitMiddleware as AsgiRateLimit
from redis_native_ratelimit.asyncio import AsyncRateLimiter
from redis_native_ratelimit.wsgi import RateLimitMiddleware as WsgiRateLimit

T = 1_900_000_000_000  # an AT far ahead: nothing written expires while the tests run
# How long a test waits for something the background heartbeat must do (it is never a
# measure of speed: the test waits for the event, then checks the state).
PATIENT = 60.0


def wait_for(check, what):
    deadline = time.monotonic() + PATIENT
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


@pytest.fixture(params=["module", "twins"])
def limiter(request, server, bare_server):
    port = server.port if request.param == "module" else bare_server.port
    client = redis.Redis(port=port, decode_responses=True)
    yield RateLimiter(client, twins=request.param == "twins")
    client.close()


def test_typed_calls_lease_renew_deny_release(limiter, tag):
    key = f"{tag}:slots"
    a = limiter.lease(key, 2, "30s", id="a", at=T)
    assert (a.allowed, a.id, a.result.remaining, a.result.reset_after_ms) == (True, "a", 1, 30_000)
    b = limiter.lease(key, 2, "30s", at=T + 1_000)
    assert b.allowed and isinstance(b.id, str) and len(b.id) == 20
    c = limiter.lease(key, 2, "30s", id="c", at=T + 2_000)
    assert (c.allowed, c.id, c.result.retry_after_ms) == (False, None, 28_000)
    # A renewal (the same id) is always allowed; a peek never renews.
    assert limiter.lease(key, 2, "30s", id="a", at=T + 3_000).result.reset_after_ms == 30_000
    assert limiter.lease(key, 2, "30s", id="a", cost=0, at=T + 3_000).id is None
    assert limiter.release(key, "a", at=T + 3_000) is True
    assert limiter.release(key, "a", at=T + 3_000) is False
    assert limiter.lease(key, 2, "30s", id="c", at=T + 3_000).allowed
    with pytest.raises(redis.exceptions.ResponseError, match="a lease takes COST 1"):
        limiter.lease(key, 2, "30s", cost=2)


def test_the_context_manager_releases_on_exit_and_on_error(limiter, tag):
    key = f"{tag}:ctx"
    r = limiter.client
    with limiter.lease(key, 1, "1m") as lease:
        assert r.zscore(key, lease.id) is not None
        # The one slot is held: a second lease is refused with the headers of a 429.
        with pytest.raises(LeaseDenied) as denied:
            with limiter.lease(key, 1, "1m"):
                pytest.fail("a second slot")
        assert denied.value.retry_after is not None
        assert int(denied.value.headers["Retry-After"]) >= 1
        assert denied.value.result.limited
    assert r.exists(key) == 0
    with pytest.raises(ZeroDivisionError):
        with limiter.lease(key, 1, "1m") as lease:
            held = lease.id
            1 / 0
    assert r.zscore(key, held) is None and r.exists(key) == 0
    # Without `with`: check, then release.
    lease = limiter.lease(key, 1, "1m")
    assert lease.allowed and lease.release() and not lease.release()


def test_the_heartbeat_renews_while_the_body_runs(limiter, tag):
    key = f"{tag}:beat"
    r = limiter.client
    with limiter.lease(key, 1, "10s", renew_every=0.01) as lease:
        first = float(r.zscore(key, lease.id))
        # Wait for two renewals (each one moves the expiry to its own now + ttl).
        wait_for(lambda: lease.renewals >= 2, "two renewals")
        assert float(r.zscore(key, lease.id)) >= first
        assert not lease.lost
    assert r.exists(key) == 0
    assert lease.renewals >= 2


def test_a_lost_lease_is_reported(limiter, tag):
    key = f"{tag}:lost"
    # The lease is taken at AT T and has expired at the server's clock; another holder
    # takes the only slot: the heartbeat's renewal is then refused.
    lease = limiter.lease(key, 1, "1s", id="old", at=1_700_000_000_000)
    assert lease.allowed
    assert limiter.lease(key, 1, "1h", id="new").allowed
    assert lease.renew().allowed is False and lease.lost


def test_rl_all_with_a_lease_rule(limiter, tag):
    keys = [f"{{{tag}}}:slots", f"{{{tag}}}:rate"]
    rules = list(zip(keys, [Lease(2, "30s"), Gcra(9, 10, "1s")]))
    r = limiter.all(rules, id="req-1", at=T)
    assert (r.allowed, r.lease_id, r.rule) == (True, "req-1", 1)
    r = limiter.all(rules, at=T)
    assert r.allowed and len(r.lease_id) == 20
    r = limiter.all(rules, id="req-3", at=T)
    assert (r.allowed, r.lease_id, r.retry_after_ms) == (False, None, 30_000)
    assert limiter.release(keys[0], "req-1", at=T)


@pytest.mark.parametrize("twins", [False, True])
def test_asyncio_calls_and_async_with(server, bare_server, tag, twins):
    async def run():
        client = redis.asyncio.Redis(port=bare_server.port if twins else server.port)
        rl = AsyncRateLimiter(client, twins=twins)
        key = f"{tag}:async:{twins}"
        lease = await rl.lease(key, 1, "1m", id="x", at=T)
        assert (lease.allowed, lease.id) == (True, "x")
        assert (await rl.lease(key, 1, "1m", at=T)).allowed is False
        assert await lease.release() is True
        async with rl.lease(key, 1, "10s", renew_every=0.01) as held:
            assert await client.zscore(key, held.id) is not None
            with pytest.raises(LeaseDenied):
                async with rl.lease(key, 1, "10s"):
                    pytest.fail("a second slot")
            deadline = time.monotonic() + PATIENT
            while held.renewals < 2:
                assert time.monotonic() < deadline, "no renewals"
                await asyncio.sleep(0.01)
        assert await client.exists(key) == 0
        with pytest.raises(KeyError):
            async with rl.lease(key, 1, "1m"):
                raise KeyError("boom")
        assert await client.exists(key) == 0
        await client.aclose()

    asyncio.run(run())


def test_wsgi_middleware_holds_a_lease_for_the_request(server, tag):
    r = redis.Redis(port=server.port, decode_responses=True)
    app = Flask(__name__)
    key = f"{tag}:lease:127.0.0.1"
    seen = []

    @app.get("/report")
    def report():
        seen.append(r.zcard(key))
        # While this request runs, its slot is held: a second request is refused.
        inner = client.get("/report")
        seen.append((inner.status_code, inner.headers.get("Retry-After")))
        return jsonify(ok=True)

    @app.get("/fail")
    def fail():
        seen.append(r.zcard(key))
        raise RuntimeError("boom")

    app.wsgi_app = WsgiRateLimit(
        app.wsgi_app, redis.Redis(port=server.port), Lease(1, "1m"), prefix=f"{tag}:", timeout_ms=30_000
    )
    app.config["PROPAGATE_EXCEPTIONS"] = False
    client = app.test_client()
    resp = client.get("/report")
    assert resp.status_code == 200
    assert seen[0] == 1 and seen[1][0] == 429 and int(seen[1][1]) >= 1
    # Held until the server closes the response (after its last byte).
    assert r.exists(key) == 1
    resp.close()
    assert r.exists(key) == 0, "released after the response"
    resp = client.get("/fail")
    assert resp.status_code == 500
    resp.close()
    assert seen[2] == 1 and r.exists(key) == 0, "released after an error"


def test_asgi_middleware_holds_a_lease_for_the_request(server, tag):
    r = redis.Redis(port=server.port, decode_responses=True)
    key = f"{tag}:lease:testclient"
    seen = []
    app = FastAPI()

    @app.get("/report")
    async def report():
        seen.append(r.zcard(key))
        return {"ok": True}

    @app.get("/fail")
    async def fail():
        seen.append(r.zcard(key))
        raise RuntimeError("boom")

    app.add_middleware(
        AsgiRateLimit,
        client=redis.asyncio.Redis(port=server.port),
        policy=All([Lease(1, "1m"), Gcra(99, 100, "1s")]),
        key=lambda scope: [f"lease:{scope['client'][0]}", "rate"],
        prefix=f"{tag}:",
        timeout_ms=30_000,
    )
    # All's keys are the prefix, the policy's name, the rule's kind and place, and each
    # identity.
    key = f"{tag}:all:lease1:lease:testclient"
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get("/report").status_code == 200
        assert seen == [1] and r.exists(key) == 0
        assert client.get("/fail").status_code == 500
        assert seen == [1, 1] and r.exists(key) == 0


def test_the_route_decorators_hold_a_lease_for_the_view(server, tag):
    """Flask's and FastAPI's per-route decorators with a Lease policy: the slot is held
    while the view runs (a second request from inside it is refused) and released
    after it, also when the view raises."""
    r = redis.Redis(port=server.port, decode_responses=True)
    seen = []

    app = Flask(__name__)
    limiter = WsgiRateLimit(app.wsgi_app, redis.Redis(port=server.port), None, prefix=f"{tag}:w:", timeout_ms=30_000)
    app.wsgi_app = limiter
    wkey = f"{tag}:w:lease:127.0.0.1"

    @app.get("/report")
    @limiter.limit(Lease(1, "1m"))
    def report():
        seen.append(r.zcard(wkey))
        inner = client.get("/report")
        seen.append(inner.status_code)
        return jsonify(ok=True)

    @app.get("/fail")
    @limiter.limit(Lease(1, "1m"))
    def fail():
        seen.append(r.zcard(wkey))
        raise RuntimeError("boom")

    app.config["PROPAGATE_EXCEPTIONS"] = False
    client = app.test_client()
    assert client.get("/report").status_code == 200
    assert seen == [1, 429] and r.exists(wkey) == 0, "released after the view"
    assert client.get("/fail").status_code == 500
    assert seen == [1, 429, 1] and r.exists(wkey) == 0, "released after an error"

    from redis_native_ratelimit.asgi import RouteLimiter

    routes = RouteLimiter(redis.asyncio.Redis(port=server.port), prefix=f"{tag}:a:", timeout_ms=30_000)
    api = FastAPI()
    akey = f"{tag}:a:lease:testclient"

    @api.get("/report")
    @routes.limit(Lease(1, "1m"))
    async def areport():
        seen.append(r.zcard(akey))
        return {"ok": True}

    @api.get("/fail")
    @routes.limit(Lease(1, "1m"))
    async def afail():
        seen.append(r.zcard(akey))
        raise RuntimeError("boom")

    with TestClient(api, raise_server_exceptions=False) as test:
        assert test.get("/report").status_code == 200
        assert seen[3:] == [1] and r.exists(akey) == 0
        assert test.get("/fail").status_code == 500
        assert seen[3:] == [1, 1] and r.exists(akey) == 0


class GivesUp:
    """A client whose first `times` lease calls reach the server and take their slot,
    but whose replies the middleware never gets: a timeout, as when a reply comes after
    the middleware stopped waiting (the connection stays open, the call runs)."""

    def __init__(self, client, times):
        self.client = client
        self.times = times

    def get_encoder(self):
        return self.client.get_encoder()

    def _give_up(self, command):
        if str(command).upper() in ("RL.LEASE", "RL.ALL") and self.times > 0:
            self.times -= 1
            raise redis.exceptions.TimeoutError("gave up waiting for the reply")

    def execute_command(self, *args, **kwargs):
        reply = self.client.execute_command(*args, **kwargs)
        self._give_up(args[0])
        return reply


class AsyncGivesUp(GivesUp):
    async def execute_command(self, *args, **kwargs):
        reply = await self.client.execute_command(*args, **kwargs)
        self._give_up(args[0])
        return reply


def lease_app(kind, client, prefix, **settings):
    """An app whose /report holds a Lease(2, "30s") slot per client while it runs; no
    breaker (every request calls), so that each request below is judged."""
    settings = dict(prefix=prefix, breaker=None, **settings)
    if kind == "flask":
        app = Flask(__name__)
        app.add_url_rule("/report", "report", lambda: jsonify(ok=True))
        app.wsgi_app = WsgiRateLimit(app.wsgi_app, client, Lease(2, "30s"), **settings)
        test = app.test_client()
        return contextlib.nullcontext(lambda: test.get("/report", buffered=True))

    @contextlib.contextmanager
    def served():
        app = FastAPI()
        app.add_api_route("/report", lambda: {"ok": True})
        app.add_middleware(AsgiRateLimit, client=client, policy=Lease(2, "30s"), **settings)
        with TestClient(app) as test:
            yield lambda: test.get("/report")

    return served()


@pytest.mark.parametrize("kind", ["flask", "fastapi"])
def test_a_lease_the_middleware_gave_up_on_is_released_when_the_call_ran(kind, server, tag):
    """Two requests whose RL.LEASE took a slot but whose replies never came back in time
    pass (fail open); the middleware made their lease ids, so it releases them: the
    slots are free again, and the next requests are served with their own."""
    r = redis.Redis(port=server.port, decode_responses=True)
    key = f"{tag}:lease:" + ("127.0.0.1" if kind == "flask" else "testclient")
    client = GivesUp(redis.Redis(port=server.port), 2) if kind == "flask" else AsyncGivesUp(redis.asyncio.Redis(port=server.port), 2)
    with lease_app(kind, client, f"{tag}:", timeout_ms=30_000) as send:
        stalled = [send() for _ in range(2)]
        assert [s.status_code for s in stalled] == [200, 200]
        assert not any("RateLimit-Limit" in s.headers for s in stalled)  # served unlimited
        wait_for(lambda: r.zcard(key) == 0, "the two abandoned leases released")
        served = [send() for _ in range(3)]
        assert [s.status_code for s in served] == [200, 200, 200]
        assert all(s.headers["RateLimit-Limit"] == "2" for s in served)
        assert r.zcard(key) == 0


@pytest.mark.parametrize("kind", ["flask", "fastapi"])
def test_no_lease_slot_stays_held_after_a_short_stall(kind, server, tag):
    """The server stalls (CLIENT PAUSE ... WRITE: the RL.LEASE calls wait in its queue),
    the requests time out and pass (fail open); when it runs the queued calls (or drops
    them with their closed connections), no slot stays held. The requests after the
    stall go through another app on the same keys with a patient timeout: each is judged,
    however slow the machine."""
    r = redis.Redis(port=server.port, decode_responses=True)
    key = f"{tag}:lease:" + ("127.0.0.1" if kind == "flask" else "testclient")

    def client():
        return redis.Redis(port=server.port) if kind == "flask" else redis.asyncio.Redis(port=server.port)

    with lease_app(kind, client(), f"{tag}:", timeout_ms=200) as send:
        r.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
        try:
            stalled = [send() for _ in range(2)]  # each ends by its timeout: the pause outlasts it
        finally:
            r.execute_command("CLIENT", "UNPAUSE")  # the queued calls run now, if still there
        assert [s.status_code for s in stalled] == [200, 200]
        assert not any("RateLimit-Limit" in s.headers for s in stalled)  # served unlimited
        wait_for(lambda: r.zcard(key) == 0, "no slot held by the stalled requests")
    with lease_app(kind, client(), f"{tag}:", timeout_ms=30_000) as send:
        served = [send() for _ in range(3)]
        assert [s.status_code for s in served] == [200, 200, 200]
        assert all(s.headers["RateLimit-Limit"] == "2" for s in served)
        assert r.zcard(key) == 0
