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
``key(environ)`` (default: the client address; return a list for Multi, Sliding and
All policies, ``None`` to let the request through). A refused request gets 429 with
``Retry-After`` and the rate limit headers; an allowed one goes on, with the headers
added to its response and the result in ``environ["redis_native_ratelimit.result"]``.

If the limiter does not answer within ``timeout`` seconds (or cannot be reached), the
request is served unlimited and a warning is logged (``fail_open=True``, the default),
or refused with 503 (``fail_open=False``); then a circuit breaker (``breaker``, a
:class:`~redis_native_ratelimit.CircuitBreaker`) serves the next requests the same way without
calling the limiter for its cooldown, and one request tries again. A server without the
module is logged once as an error (``twins="auto"``: the Lua twins take over; with
``fail_open=False`` each limited request raises :class:`~redis_native_ratelimit.ModuleMissing`).
The timeout is enforced on a copy of the
client's connection pool with that socket timeout and no retries, so a client made
without a timeout cannot stall requests; pass a Cluster client made with
``socket_timeout`` set.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ._middleware import USE_TWINS, Guard, PolicyChoice, Settings, held_leases, release_failed, unavailable
from .client import RateLimiter
from .policies import Policy
from .results import RateLimit

_STATUS = {429: "429 Too Many Requests", 503: "503 Service Unavailable"}


def bounded_client(client: Any, timeout: float) -> Any:
    """A client that gives up after ``timeout`` seconds without retrying: a URL makes
    one; a ``redis.Redis`` is copied onto a new pool with those settings (the caller's
    pool is left as it is); other clients are used as they are."""
    no_retry = Retry(NoBackoff(), 0)
    if isinstance(client, str):
        return redis.Redis.from_url(client, socket_timeout=timeout, socket_connect_timeout=timeout, retry=no_retry)
    if isinstance(client, redis.Redis):
        pool = client.connection_pool
        kwargs = dict(pool.connection_kwargs)
        for name in ("socket_timeout", "socket_connect_timeout"):
            current = kwargs.get(name)
            kwargs[name] = timeout if current is None else min(current, timeout)
        kwargs["retry"] = no_retry
        kwargs["retry_on_error"] = []
        kwargs.pop("retry_on_timeout", None)
        new_pool = type(pool)(connection_class=pool.connection_class, max_connections=pool.max_connections, **kwargs)
        return redis.Redis(connection_pool=new_pool)
    return client


def default_key(environ: dict) -> Optional[str]:
    """The client's address (behind a proxy, let the proxy middleware of your framework
    set REMOTE_ADDR)."""
    return environ.get("REMOTE_ADDR") or "unknown"


class RateLimitMiddleware:
    """WSGI middleware: ``RateLimitMiddleware(app, client, policy, **settings)``; see
    the module's description and :class:`redis_native_ratelimit._middleware.Settings` for
    the settings (``key``, ``routes``, ``prefix``, ``fail_open``, ``timeout``,
    ``cost``, ``legacy_headers``, ``draft_headers``, ``x_prefix``,
    ``headers_when_allowed``, ``breaker``, ``limited_body``, ``limited_content_type``).
    ``twins=True`` uses the Lua twins; ``twins="auto"`` uses them only if the server
    turns out to lack the module.

    :meth:`limit` is a decorator of Flask views: a policy of its own for one route."""

    def __init__(
        self,
        app: Callable,
        client: Any,
        policy: PolicyChoice = None,
        *,
        twins: Union[bool, str] = False,
        **settings: Any,
    ):
        self.app = app
        self.settings = Settings(policy, **settings)
        self.guard = Guard(self.settings, twins)
        bounded = bounded_client(client, self.settings.timeout)
        self.limiter = RateLimiter(bounded, twins=twins is True)
        self.twins_limiter = RateLimiter(bounded, twins=True) if twins == "auto" else None

    def judge(self, policy: Policy, identity: Any, cost: int, where: str = "") -> Optional[RateLimit]:
        """One call of the limiter for a request, through the circuit breaker: the
        result, or None when the limiter is unavailable (the request then fails open or
        closed). Errors in the call itself (bad arguments) are raised."""
        return self.judge_holding(policy, identity, cost, where)[0]

    def judge_holding(
        self, policy: Policy, identity: Any, cost: int, where: str = ""
    ) -> Tuple[Optional[RateLimit], List[Tuple[Any, Any]], RateLimiter]:
        """:meth:`judge`, the leases an allowed request then holds (a Lease policy, or
        Lease rules of an All policy: (key, lease id) pairs to release once the response
        is sent) and the limiter that granted them (the module's, or its twins' after a
        fallback), which releases them."""
        guard = self.guard
        if not guard.allow():
            return None, [], self.limiter
        policy, keys = self.settings.with_ban(policy, self.settings.keys_for(policy, identity))
        twins = self.twins_limiter if guard.use_twins and self.twins_limiter is not None else None
        limiter = twins or self.limiter
        try:
            result = limiter.check(policy, keys, cost=cost)
        except Exception as exc:
            if guard.failed(exc, where) != USE_TWINS or self.twins_limiter is None:
                return None, [], limiter
            limiter = self.twins_limiter
            try:
                result = limiter.check(policy, keys, cost=cost)
            except Exception as again:
                guard.failed(again, where)
                return None, [], limiter
        guard.succeeded()
        return result, held_leases(policy, keys, result), limiter

    def unavailable(self) -> Tuple[int, List[Tuple[str, str]], bytes]:
        """The response of a request that fails closed (raises ModuleMissing on a server
        without the module)."""
        if self.guard.module_missing:
            self.guard.refuse_missing()
        return unavailable()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        s = self.settings
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "") or "/"
        policy = s.policy_for(environ, method, path)
        identity = None if policy is None else (s.key or default_key)(environ)
        if policy is None or identity is None:
            return self.app(environ, start_response)
        result, leases, granted_by = self.judge_holding(policy, identity, s.cost_for(environ), path)
        if result is None:
            if s.fail_open:
                return self.app(environ, start_response)
            return self._respond(start_response, *self.unavailable())
        environ["redis_native_ratelimit.result"] = result
        headers = s.headers(result)
        if not result.allowed:
            return self._respond(start_response, *s.too_many(result, headers))
        if leases:
            respond = self._with(headers, start_response) if s.headers_when_allowed else start_response
            return self._holding(leases, granted_by, environ, respond)
        if not s.headers_when_allowed:
            return self.app(environ, start_response)
        return self.app(environ, self._with(headers, start_response))

    def _holding(
        self, leases: List[Tuple[Any, Any]], limiter: RateLimiter, environ: dict, start_response: Callable
    ) -> Iterable[bytes]:
        """The response of a request that holds leases (a Lease policy): released when
        the server closes the response, or when the application raises."""

        def release() -> None:
            for key, lease_id in leases:
                try:
                    limiter.release(key, lease_id)
                except Exception as exc:  # noqa: BLE001 - it frees itself at its ttl
                    release_failed(exc, key)

        try:
            body = self.app(environ, start_response)
        except BaseException:
            release()
            raise
        return _Releasing(body, release)

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
        429 response; an allowed one runs the view, and its response gets the headers.
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

        s = self.settings

        def decorate(view: Callable) -> Callable:
            @functools.wraps(view)
            def limited(*args: Any, **kwargs: Any) -> Any:
                environ = flask.request.environ
                identity = (key or s.key or default_key)(environ)
                if identity is None:
                    return view(*args, **kwargs)
                how_much = s.cost_for(environ) if cost is None else (cost(environ) if callable(cost) else cost)
                result, leases, granted_by = self.judge_holding(policy, identity, how_much, flask.request.path)
                if result is None:
                    if s.fail_open:
                        return view(*args, **kwargs)
                    status, headers, body = self.unavailable()
                    return flask.Response(body, status=status, headers=headers)
                environ["redis_native_ratelimit.result"] = result
                extra = s.headers(result)
                if not result.allowed:
                    status, headers, body = s.too_many(result, extra)
                    return flask.Response(body, status=status, headers=headers)
                try:
                    response = flask.make_response(view(*args, **kwargs))
                finally:
                    for lease_key, lease_id in leases:
                        try:
                            granted_by.release(lease_key, lease_id)
                        except Exception as exc:  # noqa: BLE001 - it frees itself at its ttl
                            release_failed(exc, lease_key)
                if s.headers_when_allowed:
                    for name, value in extra.items():
                        if name not in response.headers:
                            response.headers[name] = value
                return response

            return limited

        return decorate

    @staticmethod
    def _respond(start_response: Callable, status: int, headers: List[Tuple[str, str]], body: bytes) -> Iterable[bytes]:
        start_response(_STATUS[status], headers)
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
