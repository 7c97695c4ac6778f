"""Rate limiting for WSGI applications (Flask, Django, Falcon...)::

    from redis_ratelimit import Gcra, Log
    from redis_ratelimit.wsgi import RateLimitMiddleware

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
added to its response and the result in ``environ["redis_ratelimit.result"]``.

If the limiter does not answer within ``timeout`` seconds (or cannot be reached), the
request is served unlimited and a warning is logged (``fail_open=True``, the default),
or refused with 503 (``fail_open=False``). The timeout is enforced on a copy of the
client's connection pool with that socket timeout and no retries, so a client made
without a timeout cannot stall requests; pass a Cluster client made with
``socket_timeout`` set.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Tuple

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ._middleware import PolicyChoice, Settings, held_leases, is_outage, release_failed, too_many, unavailable
from .client import RateLimiter

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
    the module's description and :class:`redis_ratelimit._middleware.Settings` for
    the settings (``key``, ``routes``, ``prefix``, ``fail_open``, ``timeout``,
    ``cost``, ``legacy_headers``, ``draft_headers``, ``x_prefix``,
    ``headers_when_allowed``). ``twins=True`` uses the Lua twins."""

    def __init__(self, app: Callable, client: Any, policy: PolicyChoice = None, *, twins: bool = False, **settings: Any):
        self.app = app
        self.settings = Settings(policy, **settings)
        self.limiter = RateLimiter(bounded_client(client, self.settings.timeout), twins=twins)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        s = self.settings
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "") or "/"
        policy = s.policy_for(environ, method, path)
        identity = None if policy is None else (s.key or default_key)(environ)
        if policy is None or identity is None:
            return self.app(environ, start_response)
        keys = s.keys_for(policy, identity)
        try:
            result = self.limiter.check(policy, keys, cost=s.cost_for(environ))
        except Exception as exc:
            if not is_outage(exc):
                raise
            s.outage(exc, path)
            if s.fail_open:
                return self.app(environ, start_response)
            return self._respond(start_response, *unavailable())
        environ["redis_ratelimit.result"] = result
        headers = s.headers(result)
        if not result.allowed:
            return self._respond(start_response, *too_many(result, headers))
        leases = held_leases(policy, keys, result)
        if leases:
            respond = self._with(headers, start_response) if s.headers_when_allowed else start_response
            return self._holding(leases, environ, respond)
        if not s.headers_when_allowed:
            return self.app(environ, start_response)
        return self.app(environ, self._with(headers, start_response))

    def _holding(self, leases: List[Tuple[Any, Any]], environ: dict, start_response: Callable) -> Iterable[bytes]:
        """The response of a request that holds leases (a Lease policy): released when
        the server closes the response, or when the application raises."""

        def release() -> None:
            for key, lease_id in leases:
                try:
                    self.limiter.release(key, lease_id)
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
