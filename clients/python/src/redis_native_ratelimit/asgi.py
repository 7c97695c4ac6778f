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

The same behaviour as :mod:`redis_native_ratelimit.wsgi`, on an asyncio client:
``key(scope)`` and ``skip(scope)`` (default key: the client address, an IPv6 one grouped
by its /56), a policy per route, 429 with the headers (or ``handler(scope, result)``'s
ASGI application: a Starlette ``Response`` is one), shadow mode, the result in
``request.state.rate_limit`` (``scope["state"]["rate_limit"]``). The limiter's call is
bounded by ``timeout_ms`` (``asyncio.wait_for``; default 250); past it, or when the
limiter cannot be reached, the request is served unlimited (``fail_open=True``, the
default) or refused with 503, and the circuit breaker and the missing module are handled
as there. :class:`RouteLimiter` gives single FastAPI routes a policy of their own (a
decorator).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Awaitable, Callable, Dict, List, Optional, Set, Tuple, Union

from ._middleware import Decision, Limiting, PolicyChoice, ip_key, unavailable, with_headers
from ._slots import adrive
from .asyncio import AsyncRateLimiter
from .policies import Policy


class RouteLimiter(Limiting):
    """The limiter of an ASGI app, with the middleware's settings (``key(scope)``,
    ``prefix``, ``timeout_ms``, ``fail_open``, ``breaker``, ``shadow``...): what
    :class:`RateLimitMiddleware` runs for every request, and :meth:`limit`, a
    decorator that gives one FastAPI route a policy of its own::

        limiter = RouteLimiter(client=r, prefix="rl:")

        @app.post("/login")
        @limiter.limit(Multi([("1m", 5)], names=["ip"]))
        async def login(): ...
    """

    def __init__(
        self, client: Any, policy: PolicyChoice = None, *, twins: Union[bool, str] = False, lua_dir: Any = None, **settings: Any
    ):
        super().__init__(policy, settings)
        self.limiter = AsyncRateLimiter(client, twins=twins, lua_dir=lua_dir, logger=self.settings.log)
        self._background: Set["asyncio.Future[None]"] = set()

    def default_key(self, scope: dict) -> Optional[str]:
        """The client's address (behind a proxy, run the server with its proxy-headers
        option so that it is the real client's), an IPv6 one grouped by ``ipv6_subnet``."""
        client = scope.get("client")
        return ip_key(client[0] if client else None, self.settings.ipv6_subnet)

    async def decide(self, scope: dict, policy: Policy, where: str, key: Any = None, cost: Any = None) -> Decision:
        """One request's decision: the call (bounded by the timeout, through the
        breaker)."""
        decision = await adrive(self.deciding(scope, policy, where, key, cost), self._ask)
        if decision.orphans:
            self._release_later(decision.orphans, decision.orphan_ttl_ms)
        return decision

    def _ask(self, ask: Any) -> Any:
        policy, keys, cost, lease_id = ask
        return asyncio.wait_for(self.limiter.check(policy, keys, cost=cost, id=lease_id, new_lease=True), self.settings.timeout)

    def _chore(self, chore: Any) -> Any:
        what, a, b = chore
        if what == "sleep":
            return asyncio.sleep(a)
        return asyncio.wait_for(self.limiter.release(a, b), self.settings.timeout)

    async def _serving(self, decision: Decision, serve: Awaitable[Any]) -> Any:
        """An allowed request served (``serve`` awaited); with a Lease policy, the
        request holds its slot until then (also when it raises), then it is released."""
        if not decision.leases:
            return await serve
        try:
            return await serve
        finally:
            await adrive(self.releasing(decision.leases), self._chore)

    def _release_later(self, leases: List[Tuple[Any, Any]], ttl_ms: int) -> None:
        """:meth:`releasing_later` in a task of its own."""
        task = asyncio.ensure_future(adrive(self.releasing_later(leases, ttl_ms), self._chore))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def refusal(self, decision: Decision, scope: dict) -> Any:
        """``handler(scope, result)``'s answer (awaited if it is awaitable), or None."""
        if self.settings.handler is None:
            return None
        answer = self.settings.handler(scope, decision.result)
        return await answer if inspect.isawaitable(answer) else answer

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
        self.check_route(policy, key)

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
                decision = await self.decide(scope, policy, scope.get("path", ""), key, cost)
                if decision.result is not None:
                    request.state.rate_limit = decision.result
                if decision.kind == "pass":
                    return await run()
                if decision.kind == "unavailable":
                    return _response(*unavailable())
                if decision.kind == "limited":
                    answer = await self.refusal(decision, scope)
                    if answer is not None:
                        return with_headers(answer, decision.headers)
                    return _response(*s.too_many(decision, scope))
                out = await self._serving(decision, run())
                with_headers(out if isinstance(out, Response) else response, decision.headers)
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
    (the settings of :class:`redis_native_ratelimit.wsgi.RateLimitMiddleware`).
    ``limiter=`` shares a :class:`RouteLimiter` (its client, settings, circuit breaker and
    shadow count) with the routes it decorates, instead of ``client`` and the settings."""

    def __init__(
        self,
        app: Any,
        client: Any = None,
        policy: PolicyChoice = None,
        *,
        twins: Union[bool, str] = False,
        lua_dir: Any = None,
        limiter: Optional[RouteLimiter] = None,
        **settings: Any,
    ):
        self.app = app
        if limiter is None:
            if client is None:
                raise TypeError("RateLimitMiddleware needs a client (or a RouteLimiter as limiter=)")
            limiter = RouteLimiter(client, policy, twins=twins, lua_dir=lua_dir, **settings)
        elif client is not None or settings or policy is not None:
            raise TypeError("give either limiter= or a client and settings, not both")
        self.route_limiter = limiter
        self.settings = limiter.settings

    @property
    def shadow_denials(self) -> int:
        return self.route_limiter.shadow_denials

    def stats(self) -> Dict[str, Any]:
        return self.route_limiter.stats()

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        s = self.settings
        path = scope.get("path", "") or "/"
        policy = s.policy_for(scope, scope.get("method", "GET"), path)
        if policy is None:
            await self.app(scope, receive, send)
            return
        decision = await self.route_limiter.decide(scope, policy, path)
        if decision.result is not None:
            scope["state"] = {**(scope.get("state") or {}), "rate_limit": decision.result}
        if decision.kind == "pass":
            await self.app(scope, receive, send)
        elif decision.kind == "unavailable":
            await self._respond(send, *unavailable())
        elif decision.kind == "limited":
            answer = await self.route_limiter.refusal(decision, scope)
            if answer is None:
                await self._respond(send, *s.too_many(decision, scope))
            else:
                await answer(scope, receive, self._with(decision.headers, send))
        else:
            await self.route_limiter._serving(decision, self.app(scope, receive, self._with(decision.headers, send)))

    @staticmethod
    def _with(headers: Dict[str, str], send: Callable) -> Callable:
        """``send`` that adds the headers the response does not set itself."""
        if not headers:
            return send
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

        async def send_with_headers(message: dict) -> None:
            if message.get("type") == "http.response.start":
                taken = {name.lower() for name, _ in message.get("headers", [])}
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + [h for h in extra if h[0] not in taken]
            await send(message)

        return send_with_headers

    @staticmethod
    async def _respond(send: Callable, status: int, headers: List[Tuple[str, str]], body: bytes) -> None:
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})
