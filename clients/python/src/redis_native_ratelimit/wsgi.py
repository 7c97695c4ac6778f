"""Rate limiting for WSGI applications (Flask, Django, Falcon...)::

    from redis_native_ratelimit import Gcra, Log
    from redis_native_ratelimit.wsgi import RateLimitMiddleware

    app.wsgi_app = RateLimitMiddleware(
        app.wsgi_app,
        redis.Redis.from_url(REDIS_URL),
        Gcra(max_burst=19, count=10, period="1s"),      # every route
        routes={"POST /login": Log(5, "1m"), "/health": None},
    )

Every request whose route has a policy is checked with one call, keyed by
``key(environ)`` (default: the client address, an IPv6 one grouped by its /56; return
a list for Multi, Sliding and All policies, ``None`` to let the request through;
``skip(environ)`` true lets it through too). A refused request gets 429 with
``Retry-After`` and the rate limit headers (or what ``handler(environ, result)``
returns); an allowed one goes on, with the headers added to its response and the result
in ``environ["redis_native_ratelimit.result"]``. With ``shadow=True`` a refused request
goes on too, counted in :attr:`RateLimitMiddleware.shadow_denials` and logged once per
key and window.

If the limiter does not answer within ``timeout_ms`` (default 250), or cannot be
reached, the request is served unlimited and a warning is logged (``fail_open=True``,
the default), or refused with 503 (``fail_open=False``); then a circuit breaker
(``breaker``, a :class:`~redis_native_ratelimit.CircuitBreaker`) serves the next requests
the same way without calling the limiter for its cooldown (1 s), and one request tries
again. A server without the module is logged once as an error (``twins="fallback"``:
the Lua twins take over; with ``fail_open=False`` each limited request raises
:class:`~redis_native_ratelimit.ModuleMissing`). The timeout is enforced on a copy of
the client's connection pool with that socket timeout and no retries, so a client made
without a timeout cannot stall requests; pass a Cluster client made with
``socket_timeout`` set.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

from ._middleware import Decision, Limiting, PolicyChoice, bounded_client, ip_key, status_line, unavailable, with_headers
from ._slots import drive
from .client import RateLimiter
from .policies import Policy

#: Where the result of a request is put in its WSGI environ.
RESULT = "redis_native_ratelimit.result"


class RateLimitMiddleware(Limiting):
    """WSGI middleware: ``RateLimitMiddleware(app, client, policy, **settings)``; see the
    module's description and :class:`redis_native_ratelimit._middleware.Settings` for the
    settings (``key``, ``routes``, ``prefix``, ``fail_open``, ``timeout_ms``, ``cost``,
    ``standard_headers``, ``legacy_headers``, ``headers_when_allowed``, ``breaker``,
    ``message``, ``status_code``, ``handler``, ``skip``, ``ipv6_subnet``, ``shadow``,
    ``ban``, ``logger``). ``twins=True`` uses the Lua twins; ``twins="fallback"`` uses
    them for the commands the server turns out to lack; ``lua_dir`` points at another
    copy of them.

    :meth:`limit` is a decorator of Flask views: a policy of its own for one route."""

    def __init__(
        self,
        app: Callable,
        client: Any,
        policy: PolicyChoice = None,
        *,
        twins: Union[bool, str] = False,
        lua_dir: Any = None,
        **settings: Any,
    ):
        self.app = app
        super().__init__(policy, settings)
        bounded = bounded_client(client, self.settings.timeout)
        self.limiter = RateLimiter(bounded, twins=twins, lua_dir=lua_dir, logger=self.settings.log)

    def default_key(self, environ: dict) -> Optional[str]:
        """The client's address (behind a proxy, let the proxy middleware of your framework
        set REMOTE_ADDR), an IPv6 one grouped by ``ipv6_subnet``."""
        return ip_key(environ.get("REMOTE_ADDR"), self.settings.ipv6_subnet)

    def decide(self, environ: dict, policy: Policy, where: str, key: Any = None, cost: Any = None) -> Decision:
        """One request's decision: the call (bounded by the timeout, through the
        breaker), and its result in the environ."""
        decision = drive(self.deciding(environ, policy, where, key, cost), self._ask)
        if decision.orphans:
            self._release_later(decision.orphans, decision.orphan_ttl_ms)
        if decision.result is not None:
            environ[RESULT] = decision.result
        return decision

    def _ask(self, ask: Any) -> Any:
        policy, keys, cost, lease_id = ask
        return self.limiter.check(policy, keys, cost=cost, id=lease_id, new_lease=True)

    def _chore(self, chore: Any) -> Any:
        what, a, b = chore
        if what == "sleep":
            return time.sleep(a)
        return self.limiter.release(a, b)

    def _release(self, leases: List[Tuple[Any, Any]]) -> None:
        drive(self.releasing(leases), self._chore)

    def _release_later(self, leases: List[Tuple[Any, Any]], ttl_ms: int) -> None:
        """:meth:`releasing_later` in a thread of its own."""
        plan = self.releasing_later(leases, ttl_ms)
        threading.Thread(target=drive, args=(plan, self._chore), name="redis_native_ratelimit release", daemon=True).start()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "") or "/"
        policy = self.settings.policy_for(environ, method, path)
        if policy is None:
            return self.app(environ, start_response)
        decision = self.decide(environ, policy, path)
        if decision.kind == "pass":
            return self.app(environ, start_response)
        if decision.kind == "unavailable":
            return self._respond(start_response, *unavailable())
        if decision.kind == "limited":
            return self._refuse(decision, environ, start_response)
        respond = self._with(decision.headers, start_response) if decision.headers else start_response
        if not decision.leases:
            return self.app(environ, respond)
        try:
            body = self.app(environ, respond)
        except BaseException:
            self._release(decision.leases)
            raise
        return _Releasing(body, lambda: self._release(decision.leases))

    def _refuse(self, decision: Decision, environ: dict, start_response: Callable) -> Iterable[bytes]:
        """The refusal: ``handler(environ, result)``'s WSGI application (a Flask or
        werkzeug Response is one), with the rate limit headers it does not set, or the
        settings' own response."""
        if self.settings.handler is not None:
            answer = self.settings.handler(environ, decision.result)
            return answer(environ, self._with(decision.headers, start_response))
        return self._respond(start_response, *self.settings.too_many(decision, environ))

    @staticmethod
    def _with(headers: Any, start_response: Callable) -> Callable:
        def start_with_headers(status: str, response_headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
            taken = {name.lower() for name, _ in response_headers}
            extra = [(k, v) for k, v in headers.items() if k.lower() not in taken]
            if exc_info is not None:
                return start_response(status, list(response_headers) + extra, exc_info)
            return start_response(status, list(response_headers) + extra)

        return start_with_headers

    def limit(
        self,
        policy: Policy,
        *,
        key: Optional[Callable[[dict], Any]] = None,
        cost: Union[int, Callable[[dict], int], None] = None,
    ) -> Callable[[Callable], Callable]:
        """A decorator of a Flask view: ``policy`` on that view, with this middleware's
        client, breaker and settings (``key`` and ``cost``, functions of the WSGI
        environ, default to the middleware's). A refused request gets the middleware's
        refusal; an allowed one runs the view, and its response gets the headers.
        The middleware's own policy applies too where it covers the route: give the
        route ``None`` in ``routes`` (or the middleware no policy) to limit it only
        here::

            limiter = RateLimitMiddleware(app.wsgi_app, r, None)
            app.wsgi_app = limiter

            @app.post("/login")
            @limiter.limit(Multi([("1m", 5)], names=["ip"]))
            def login(): ...
        """
        import flask  # the decorator is Flask's; the middleware needs no framework

        self.check_route(policy, key)

        def decorate(view: Callable) -> Callable:
            @functools.wraps(view)
            def limited(*args: Any, **kwargs: Any) -> Any:
                environ = flask.request.environ
                decision = self.decide(environ, policy, flask.request.path, key, cost)
                if decision.kind == "pass":
                    return view(*args, **kwargs)
                if decision.kind == "unavailable":
                    status, headers, body = unavailable()
                    return flask.Response(body, status=status, headers=headers)
                if decision.kind == "limited":
                    if self.settings.handler is not None:
                        return with_headers(flask.make_response(self.settings.handler(environ, decision.result)), decision.headers)
                    status, headers, body = self.settings.too_many(decision, environ)
                    return flask.Response(body, status=status, headers=headers)
                try:
                    response = flask.make_response(view(*args, **kwargs))
                finally:
                    self._release(decision.leases)
                return with_headers(response, decision.headers)

            return limited

        return decorate

    @staticmethod
    def _respond(start_response: Callable, status: int, headers: List[Tuple[str, str]], body: bytes) -> Iterable[bytes]:
        start_response(status_line(status), headers)
        return [body]


class _Releasing:
    """A response body that runs ``release`` once, when the server closes it (after
    the last byte is sent, or on an error)."""

    def __init__(self, body: Iterable[bytes], release: Callable[[], None]):
        self.body = body
        self._release: Optional[Callable[[], None]] = release

    def __iter__(self):
        return iter(self.body)

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()
