"""Rate limiting for ASGI applications (FastAPI, Starlette, Quart...)::

    from redis_ratelimit import Gcra, Log
    from redis_ratelimit.asgi import RateLimitMiddleware

    app = FastAPI()
    app.add_middleware(
        RateLimitMiddleware,
        client=redis.asyncio.Redis.from_url(REDIS_URL),
        policy=Gcra(max_burst=19, count=10, period="1s"),
        routes={"POST /login": Log(5, "1m"), "/health": None},
    )

The same behaviour as :mod:`redis_ratelimit.wsgi`, on an asyncio client: ``key(scope)``
(default: the client address), a policy per route, 429 with the headers, the result in
``request.state.rate_limit`` (``scope["state"]["rate_limit"]``). The limiter's call is
bounded by ``timeout`` seconds (``asyncio.wait_for``); past it, or when the limiter
cannot be reached, the request is served unlimited (``fail_open=True``, the default) or
refused with 503.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Optional, Tuple

from ._middleware import PolicyChoice, Settings, held_leases, is_outage, release_failed, too_many, unavailable
from .asyncio import AsyncRateLimiter


def default_key(scope: dict) -> Optional[str]:
    """The client's address (behind a proxy, run the server with its proxy-headers
    option so that it is the real client's)."""
    client = scope.get("client")
    return client[0] if client else "unknown"


class RateLimitMiddleware:
    """ASGI middleware: ``RateLimitMiddleware(app, client=..., policy=..., **settings)``
    (the settings of :class:`redis_ratelimit.wsgi.RateLimitMiddleware`)."""

    def __init__(self, app: Any, client: Any, policy: PolicyChoice = None, *, twins: bool = False, **settings: Any):
        self.app = app
        self.settings = Settings(policy, **settings)
        self.limiter = AsyncRateLimiter(client, twins=twins)

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
        keys = s.keys_for(policy, identity)
        try:
            result = await asyncio.wait_for(self.limiter.check(policy, keys, cost=s.cost_for(scope)), s.timeout)
        except Exception as exc:
            if not is_outage(exc):
                raise
            s.outage(exc, path)
            if s.fail_open:
                await self.app(scope, receive, send)
            else:
                await self._respond(send, *unavailable())
            return
        scope["state"] = {**(scope.get("state") or {}), "rate_limit": result}
        headers = s.headers(result)
        if not result.allowed:
            await self._respond(send, *too_many(result, headers))
            return
        leases = held_leases(policy, keys, result)
        if leases:
            # A Lease policy: the request holds its slot until its response is sent
            # (also when the application raises).
            try:
                await self._serve(scope, receive, send, headers)
            finally:
                for key, lease_id in leases:
                    try:
                        await asyncio.wait_for(self.limiter.release(key, lease_id), s.timeout)
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
