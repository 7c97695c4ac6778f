"""The middleware when the limiter fails: a circuit breaker that stops waiting after a
failure and tries again after its cooldown (with a stopped server and a paused one),
and a server without the module, found out on the first call and said once. Each test
counts the calls that reach (or try to reach) the server, through the client's own
connection class, and reads the breaker's state; time is a clock the test moves, never
the wall clock."""

from __future__ import annotations

import logging
from typing import List

import pytest
import redis
import redis.asyncio
from test_middleware import Flavour, body, paused

from conftest import Clock, Server
from redis_native_ratelimit import CircuitBreaker, Gcra, ModuleMissing

# The timeout in ms of the calls that must fail: under CLIENT PAUSE (the pause outlasts
# it) or to a stopped server. Calls that must be answered go through an app with the
# default, patient timeout.
SHORT = 200
COOLDOWN = 5_000  # ms
POLICY = Gcra(max_burst=4, count=5, period="1h")


class Tries:
    """What reaches the server: commands sent on an open connection, and connections
    that could not be opened (each a call that tried)."""

    def __init__(self) -> None:
        self.sent: List[str] = []  # the limiter's commands (not the connection's set-up)
        self.refused = 0

    def record(self, command) -> None:
        name = (command.decode() if isinstance(command, bytes) else str(command)).upper()
        if name.startswith(("RL.", "CL.", "EVAL", "FCALL")):
            self.sent.append(name)

    @property
    def count(self) -> int:
        return len(self.sent) + self.refused


def counting_client(flavour: Flavour, port: int, tries: Tries):
    """flavour's client (blocking for Flask, asyncio for FastAPI), on a connection class
    that records each command it sends and each connection it fails to open."""
    if flavour.name == "flask":

        class Counted(redis.Connection):
            def connect(self, *a, **kw):
                try:
                    return super().connect(*a, **kw)
                except Exception:
                    tries.refused += 1
                    raise

            def send_command(self, *args, **kwargs):
                self.connect()
                tries.record(args[0])
                return super().send_command(*args, **kwargs)

        return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=Counted, port=port))

    class ACounted(redis.asyncio.Connection):
        async def connect(self, *a, **kw):
            try:
                return await super().connect(*a, **kw)
            except Exception:
                tries.refused += 1
                raise

        async def send_command(self, *args, **kwargs):
            await self.connect()
            tries.record(args[0])
            return await super().send_command(*args, **kwargs)

    return redis.asyncio.Redis(connection_pool=redis.asyncio.ConnectionPool(connection_class=ACounted, port=port))


@pytest.fixture(params=["flask", "fastapi"])
def kind(request):
    return request.param


def limited(response) -> bool:
    return "RateLimit-Limit" in response.headers


@pytest.mark.parametrize("fail_open", [True, False], ids=["fail-open", "fail-closed"])
def test_circuit_breaker_stops_waiting_for_a_stopped_server_and_tries_again_after_its_cooldown(kind, fail_open, tag):
    """The requests that fail go through an app with a short timeout (a stopped server
    refuses them, or the timeout ends them: either way they fail); those that must be
    answered go through an app with a patient timeout that shares the breaker and the
    keys, so that none depends on how fast the machine answers."""
    server = Server()
    try:
        flavour = Flavour(kind, server.port)
        tries, clock = Tries(), Clock()
        breaker = CircuitBreaker(cooldown_ms=COOLDOWN, now=clock)
        degraded = 200 if fail_open else 503
        short_app = flavour.app(counting_client(flavour, server.port, tries), tag, timeout_ms=SHORT, breaker=breaker, fail_open=fail_open)
        patient_app = flavour.app(counting_client(flavour, server.port, tries), tag, breaker=breaker, fail_open=fail_open)
        with short_app as send, patient_app as patient:
            assert limited(patient("GET", "/")) and tries.count == 1 and breaker.state == "closed"
            server.stop()
            # The first call after the stop fails: the breaker opens.
            first = send("GET", "/")
            assert first.status_code == degraded and not limited(first)
            assert breaker.state == "open" and breaker.opened == 1
            after_failure = tries.count
            assert after_failure > 1
            # While it is open no request tries, in either app: each is served at once.
            for _ in range(5):
                assert send("GET", "/").status_code == degraded
                assert patient("GET", "/").status_code == degraded
            assert tries.count == after_failure and breaker.skipped == 10
            # Within the cooldown, still none.
            clock.now += COOLDOWN - 1
            assert send("GET", "/").status_code == degraded and tries.count == after_failure
            # After it, one request tries; the server is still down: open again.
            clock.now += 1
            assert send("GET", "/").status_code == degraded
            after_trial = tries.count
            assert after_trial > after_failure and breaker.state == "open" and breaker.opened == 1
            for _ in range(5):
                assert send("GET", "/").status_code == degraded
            assert tries.count == after_trial
            # The server is back: the next trial closes the breaker, every request calls.
            server.start_again()
            assert patient("GET", "/").status_code == degraded and tries.count == after_trial
            clock.now += COOLDOWN
            back = patient("GET", "/")
            assert back.status_code == 200 and limited(back) and breaker.state == "closed"
            for n in range(3):
                assert limited(patient("GET", "/", address="10.0.0.2"))
            sent_rl = [c for c in tries.sent if c.startswith("RL.")]
            assert len(sent_rl) == 5  # the first, the closing trial and three more
            assert breaker.opened == 1
    finally:
        server.remove()


def test_circuit_breaker_stops_waiting_for_a_paused_server_and_tries_again_after_its_cooldown(kind, server, tag):
    """Under CLIENT PAUSE WRITE a call can only end by its timeout (the pause outlasts
    it): those go through an app with a short timeout. The requests that must be
    answered go through an app with a patient timeout that shares the breaker and the
    keys: the breaker's own state decides which requests call, however slow the
    machine."""
    flavour = Flavour(kind, server.port)
    plain = redis.Redis(port=server.port)
    tries, clock = Tries(), Clock()
    breaker = CircuitBreaker(cooldown_ms=COOLDOWN, now=clock)
    short_app = flavour.app(counting_client(flavour, server.port, tries), tag, timeout_ms=SHORT, breaker=breaker)
    patient_app = flavour.app(counting_client(flavour, server.port, tries), tag, breaker=breaker)
    try:
        with short_app as send, patient_app as patient:
            assert limited(patient("GET", "/")) and tries.sent == ["RL.GCRA"]
            with paused(plain):
                # The call waits for its timeout once, then the breaker opens.
                assert not limited(send("GET", "/"))
                assert tries.sent == ["RL.GCRA"] * 2 and breaker.state == "open"
                for _ in range(6):  # served at once, in either app
                    for app in (send, patient):
                        served = app("GET", "/")
                        assert served.status_code == 200 and body(served) == {"remaining": None}
                assert tries.sent == ["RL.GCRA"] * 2 and breaker.skipped == 12
                # After the cooldown one request waits again (still paused): open again.
                clock.now += COOLDOWN
                assert not limited(send("GET", "/"))
                assert tries.sent == ["RL.GCRA"] * 3 and breaker.state == "open"
                assert not limited(patient("GET", "/")) and tries.sent == ["RL.GCRA"] * 3
            clock.now += COOLDOWN
            assert limited(patient("GET", "/")) and breaker.state == "closed"
            assert limited(patient("GET", "/", address="10.0.0.3"))
            assert tries.sent == ["RL.GCRA"] * 5 and breaker.opened == 1
    finally:
        plain.close()


def test_without_a_breaker_every_request_calls(kind, tag):
    """breaker=None: the old behaviour, each request tries (and logs) on its own."""
    server = Server()
    try:
        flavour = Flavour(kind, server.port)
        tries = Tries()
        with flavour.app(counting_client(flavour, server.port, Tries()), tag, breaker=None) as patient:
            assert limited(patient("GET", "/"))  # answered, however slow the machine
        with flavour.app(counting_client(flavour, server.port, tries), tag, timeout_ms=SHORT, breaker=None) as send:
            server.stop()
            counts = []
            for _ in range(3):
                assert not limited(send("GET", "/"))
                counts.append(tries.count)
            assert 0 < counts[0] < counts[1] < counts[2]
    finally:
        server.remove()


def errors(caplog) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.name == "redis_native_ratelimit" and r.levelno >= logging.ERROR]


def warnings(caplog) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.name == "redis_native_ratelimit" and r.levelno == logging.WARNING]


def test_a_server_without_the_module_is_found_out_once_and_said_loudly(kind, bare_server, caplog, tag):
    caplog.set_level(logging.INFO, logger="redis_native_ratelimit")
    flavour = Flavour(kind, bare_server.port)
    tries, clock = Tries(), Clock()
    breaker = CircuitBreaker(cooldown_ms=COOLDOWN, now=clock)
    client = counting_client(flavour, bare_server.port, tries)
    with flavour.app(client, tag, breaker=breaker) as send:
        for _ in range(5):
            served = send("GET", "/")
            assert served.status_code == 200 and not limited(served)
        # Found out on the first call, said once as an error that names the fix; no
        # warning per request, no call per request.
        said = errors(caplog)
        assert len(said) == 1, said
        assert "no redis-ratelimit module" in said[0] and "loadmodule" in said[0] and 'twins="fallback"' in said[0]
        assert warnings(caplog) == []
        assert tries.sent == ["RL.GCRA"]
        # Checked again after the cooldown, quietly: the error was said.
        clock.now += COOLDOWN
        assert not limited(send("GET", "/"))
        assert tries.sent == ["RL.GCRA"] * 2 and len(errors(caplog)) == 1


def test_a_server_without_the_module_fails_closed_with_an_exception(kind, bare_server, tag):
    flavour = Flavour(kind, bare_server.port)
    with flavour.app(flavour.client(), tag, fail_open=False) as send:
        for _ in range(2):
            with pytest.raises(ModuleMissing, match="loadmodule"):
                send("GET", "/")


def test_a_server_without_the_module_uses_the_twins_when_allowed(kind, bare_server, caplog, tag):
    caplog.set_level(logging.INFO, logger="redis_native_ratelimit")
    flavour = Flavour(kind, bare_server.port)
    plain = redis.Redis(port=bare_server.port)
    tries = Tries()
    try:
        with flavour.app(counting_client(flavour, bare_server.port, tries), tag, twins="fallback") as send:
            seen = [send("GET", "/") for _ in range(6)]
            assert [r.status_code for r in seen] == [200] * 5 + [429]
            assert [r.headers["RateLimit-Remaining"] for r in seen] == ["4", "3", "2", "1", "0", "0"]
            said = errors(caplog)
            assert len(said) == 1 and "Lua twin" in said[0], said
            # The module's command once, then only the twin: its function (FCALL), and
            # without the library loaded its script (EVALSHA, EVAL the first time).
            assert tries.sent[0] == "RL.GCRA" and "RL.GCRA" not in tries.sent[1:]
            assert set(tries.sent[1:]) <= {"FCALL", "EVALSHA", "EVAL"} and "FCALL" in tries.sent
        assert plain.exists(tag + "gcra:10.0.0.1") == 1
    finally:
        plain.close()

