"""Rate limiting for ASGI applications (FastAPI, Starlette, Quart...)::

    from redis_native_ratelimit import Gcra, Log
    from redis_native_ratelimit.asgi import RateLimitMiddleware

    app = FastAPI()
    app.add_middleware(
        RateLimitMiddleware,
        client=redis.asyncio.Redis.from_url(REDIS_URL),
        policy=Gcra(max_burst=19, count=10, period="1s"),
        routes={"POST /login": Log(5, "1m"), "/health": None},
    )

The same behaviour as :mod:`redis_native_ratelimit.wsgi`, on an asyncio client: ``key(scope)``
(default: the client address), a policy per route, 429 with the headers, the result in
``request.state.rate_limit`` (``scope["state"]["rate_limit"]``). The limiter's call is
bounded by ``timeout`` seconds (``asyncio.wait_for``); past it, or when the limiter
cannot be reached, the request is served unlimited (``fail_open=True``, the default) or
refused with 503, and the circuit breaker and the missing module are handled as there.
:class:`RouteLimiter` gives single FastAPI routes a policy of their own (a decorator).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Callable, List, Optional, Tuple, Union

from ._middleware import USE_TWINS, Guard, PolicyChoice, Settings, held_leases, release_failed, unavailable
from .asyncio import AsyncRateLimiter
from .policies import Policy
from .results import RateLimit


def default_key(scope: dict) -> Optional[str]:
    """The client's address (behind a proxy, run the server with its proxy-headers
    option so that it is the real client's)."""
    client = scope.get("client")
    return client[0] if client else "unknown"


class RouteLimiter:
    """The limiter of an ASGI app, with the middleware's settings (``key(scope)``,
    ``prefix``, ``timeout``, ``fail_open``, ``breaker``, ``limited_body``...): what
    :class:`RateLimitMiddleware` runs for every request, and :meth:`limit`, a
    decorator that gives one FastAPI route a policy of its own::

        limiter = RouteLimiter(client=r, prefix="rl:")

        @app.post("/login")
        @limiter.limit(Multi([("1m", 5)], names=["ip"]))
        async def login(): ...
    """

    def __init__(self, client: Any, policy: PolicyChoice = None, *, twins: Union[bool, str] = False, **settings: Any):
        self.settings = Settings(policy, **settings)
        self.guard = Guard(self.settings, twins)
        self.limiter = AsyncRateLimiter(client, twins=twins is True)
        self.twins_limiter = AsyncRateLimiter(client, twins=True) if twins == "auto" else None

    async def judge(self, policy: Policy, identity: Any, cost: int, where: str = "") -> Optional[RateLimit]:
        """One call of the limiter, bounded by the timeout and through the circuit
        breaker: the result, or None when the limiter is unavailable. Errors in the call
        itself (bad arguments) are raised."""
        return (await self.judge_holding(policy, identity, cost, where))[0]

    async def judge_holding(
        self, policy: Policy, identity: Any, cost: int, where: str = ""
    ) -> Tuple[Optional[RateLimit], List[Tuple[Any, Any]], AsyncRateLimiter]:
        """:meth:`judge`, the leases an allowed request then holds (a Lease policy, or
        Lease rules of an All policy: (key, lease id) pairs to release once the response
        is sent) and the limiter that granted them (the module's, or its twins' after a
        fallback), which releases them."""
        s, guard = self.settings, self.guard
        if not guard.allow():
            return None, [], self.limiter
        policy, keys = s.with_ban(policy, s.keys_for(policy, identity))
        twins = self.twins_limiter if guard.use_twins and self.twins_limiter is not None else None
        limiter = twins or self.limiter
        try:
            result = await asyncio.wait_for(limiter.check(policy, keys, cost=cost), s.timeout)
        except Exception as exc:
            if guard.failed(exc, where) != USE_TWINS or self.twins_limiter is None:
                return None, [], limiter
            limiter = self.twins_limiter
            try:
                result = await asyncio.wait_for(limiter.check(policy, keys, cost=cost), s.timeout)
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

    def limit(
        self,
        policy: Policy,
        *,
        key: Optional[Callable[[dict], Any]] = None,
        cost: Union[int, Callable[[dict], int], None] = None,
    ) -> Callable[[Callable], Callable]:
        """A decorator of a FastAPI endpoint (below ``@app.get(...)``): ``policy`` on that
        route. ``key`` and ``cost`` are functions of the ASGI scope (default: the
        limiter's). A refused request gets the 429 response; an allowed one runs the
        endpoint, and its response gets the headers; the result is in
        ``request.state.rate_limit``. The endpoint needs no ``Request`` parameter."""
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import Response

        s = self.settings

        def own(params: List[inspect.Parameter], cls: type) -> Optional[str]:
            """The endpoint's own parameter of that type (FastAPI passes one only)."""
            for p in params:
                a = p.annotation
                if (isinstance(a, type) and issubclass(a, cls)) or (isinstance(a, str) and a.rsplit(".", 1)[-1] == cls.__name__):
                    return p.name
            return None

        def decorate(endpoint: Callable) -> Callable:
            signature = inspect.signature(endpoint)
            params = list(signature.parameters.values())
            request_name = own(params, Request)
            response_name = own(params, Response)
            mine = []
            if request_name is None:
                mine.append(inspect.Parameter("ratelimit_request__", inspect.Parameter.KEYWORD_ONLY, annotation=Request))
            if response_name is None:
                mine.append(inspect.Parameter("ratelimit_response__", inspect.Parameter.KEYWORD_ONLY, annotation=Response))
            at = next((i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_KEYWORD), len(params))

            @functools.wraps(endpoint)
            async def limited(*args: Any, **kwargs: Any) -> Any:
                if request_name is None:
                    request: Request = kwargs.pop("ratelimit_request__")
                else:
                    request = kwargs[request_name]
                if response_name is None:
                    response: Response = kwargs.pop("ratelimit_response__")
                else:
                    response = kwargs[response_name]

                async def run() -> Any:
                    if not inspect.iscoroutinefunction(endpoint):  # as FastAPI runs it: in a thread
                        return await run_in_threadpool(endpoint, *args, **kwargs)
                    return await endpoint(*args, **kwargs)

                scope = request.scope
                identity = (key or s.key or default_key)(scope)
                if identity is None:
                    return await run()
                how_much = s.cost_for(scope) if cost is None else (cost(scope) if callable(cost) else cost)
                result, leases, granted_by = await self.judge_holding(policy, identity, how_much, scope.get("path", ""))
                if result is None:
                    if s.fail_open:
                        return await run()
                    status, headers, body = self.unavailable()
                    return _response(status, headers, body)
                request.state.rate_limit = result
                extra = s.headers(result)
                if not result.allowed:
                    status, headers, body = s.too_many(result, extra)
                    return _response(status, headers, body)
                try:
                    out = await run()
                finally:
                    for lease_key, lease_id in leases:
                        try:
                            await asyncio.wait_for(granted_by.release(lease_key, lease_id), s.timeout)
                        except Exception as exc:  # noqa: BLE001 - it frees itself at its ttl
                            release_failed(exc, lease_key)
                if s.headers_when_allowed:
                    target = out.headers if isinstance(out, Response) else response.headers
                    for name, value in extra.items():
                        if name not in target:
                            target[name] = value
                return out

            limited.__signature__ = signature.replace(parameters=params[:at] + mine + params[at:])  # type: ignore[attr-defined]
            return limited

        return decorate


def _response(status: int, headers: List[Tuple[str, str]], body: bytes) -> Any:
    from starlette.responses import Response

    out = Response(body, status_code=status)
    for name, value in headers:
        if name.lower() != "content-length":
            out.headers[name] = value
    return out


class RateLimitMiddleware:
    """ASGI middleware: ``RateLimitMiddleware(app, client=..., policy=..., **settings)``
    (the settings of :class:`redis_native_ratelimit.wsgi.RateLimitMiddleware`). ``limiter=``
    shares a :class:`RouteLimiter` (its client, settings and circuit breaker) with the
    routes it decorates, instead of ``client`` and the settings."""

    def __init__(
        self,
        app: Any,
        client: Any = None,
        policy: PolicyChoice = None,
        *,
        twins: Union[bool, str] = False,
        limiter: Optional[RouteLimiter] = None,
        **settings: Any,
    ):
        self.app = app
        if limiter is None:
            if client is None:
                raise TypeError("RateLimitMiddleware needs a client (or a RouteLimiter as limiter=)")
            limiter = RouteLimiter(client, policy, twins=twins, **settings)
        elif client is not None or settings or policy is not None:
            raise TypeError("give either limiter= or a client and settings, not both")
        self.route_limiter = limiter
        self.settings = limiter.settings

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        s = self.settings
        path = scope.get("path", "") or "/"
        policy = s.policy_for(scope, scope.get("method", "GET"), path)
        identity = None if policy is None else (s.key or default_key)(scope)
        if policy is None or identity is None:
            await self.app(scope, receive, send)
            return
        judged = await self.route_limiter.judge_holding(policy, identity, s.cost_for(scope), path)
        result, leases, granted_by = judged
        if result is None:
            if s.fail_open:
                await self.app(scope, receive, send)
            else:
                await self._respond(send, *self.route_limiter.unavailable())
            return
        scope["state"] = {**(scope.get("state") or {}), "rate_limit": result}
        headers = s.headers(result)
        if not result.allowed:
            await self._respond(send, *s.too_many(result, headers))
            return
        if leases:
            # A Lease policy: the request holds its slot until its response is sent
            # (also when the application raises).
            try:
                await self._serve(scope, receive, send, headers)
            finally:
                for key, lease_id in leases:
                    try:
                        await asyncio.wait_for(granted_by.release(key, lease_id), s.timeout)
                    except Exception as exc:  # noqa: BLE001 - it frees itself at its ttl
                        release_failed(exc, key)
            return
        await self._serve(scope, receive, send, headers)

    async def _serve(self, scope: dict, receive: Callable, send: Callable, headers: Any) -> None:
        s = self.settings
        if not s.headers_when_allowed:
            await self.app(scope, receive, send)
            return
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

        async def send_with_headers(message: dict) -> None:
            if message.get("type") == "http.response.start":
                taken = {name.lower() for name, _ in message.get("headers", [])}
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + [h for h in extra if h[0] not in taken]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    @staticmethod
    async def _respond(send: Callable, status: int, headers: List[Tuple[str, str]], body: bytes) -> None:
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})
