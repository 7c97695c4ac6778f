"""The typed calls on redis-py's asyncio clients (``redis.asyncio.Redis``,
``redis.asyncio.cluster.RedisCluster``): the same methods as
:class:`redis_native_ratelimit.RateLimiter`, to be awaited::

    rl = AsyncRateLimiter(redis.asyncio.Redis.from_url("redis://127.0.0.1:6379"))
    result = await rl.gcra("user:42", max_burst=2, count=1, period="2s")
"""

from __future__ import annotations

from typing import Any

from . import strict as _strict
from ._slots import adrive
from .budget import AsyncLocalBudget
from .client import Reservation, _any_node, _Calls, _known
from .lease import AsyncLeaseCall, Lease
from .policies import Call


class AsyncReservation(Reservation):
    """A :class:`redis_native_ratelimit.client.Reservation` whose ``settle`` is awaited."""

    async def settle(self, actual: int, *, at: Any = None) -> Any:  # type: ignore[override]
        pending = Reservation.settle(self, actual, at=at)
        return None if pending is None else await pending


class AsyncRateLimiter(_Calls):
    """Every method of :class:`redis_native_ratelimit.RateLimiter`, returning an awaitable
    (but ``local_budget``, which returns an :class:`~redis_native_ratelimit.budget.AsyncLocalBudget`
    whose ``take`` is awaited)."""

    _budget_class = AsyncLocalBudget

    def _reservation(self, result: Any, policy: Any, keys: Any, estimate: int, at: Any) -> Any:
        async def reserved() -> AsyncReservation:
            return AsyncReservation(self, policy, keys, estimate, at, await result)

        return reserved()

    def _run(self, call: Call, **kwargs: Any) -> Any:
        return self._arun(call, **kwargs)

    async def _arun(self, call: Call, **kwargs: Any) -> Any:
        if self.strict is not None and call.keys:
            # Twins: the call's script (EVALSHA, then EVAL when the server lacks it).
            argv, fallback = (call.argv, None) if not self._twin_for(call) else self._twin_argv(call)[1:]
            reply, acked = await _strict.arun(self.client, argv, fallback, self.strict)
            return self.strict.settle(call.parse(reply, self._encode), acked, _strict.wrote(call))
        return await adrive(self._sending(call, kwargs), self._send)

    def _send(self, sent: Any) -> Any:
        argv, kwargs = sent
        return self.client.execute_command(*argv, **kwargs)

    def _drive(self, plan: Any) -> Any:
        return adrive(plan, self._run)

    def _hold(self, key: Any, policy: Lease, call: Call, renew_every: Any) -> AsyncLeaseCall:
        return AsyncLeaseCall(self, key, policy, call, renew_every)

    async def has_command(self, name: str) -> bool:
        """Whether the server knows a command (COMMAND INFO)."""
        if hasattr(self.client, "nodes_manager") and hasattr(self.client, "initialize"):
            await self.client.initialize()  # a Cluster client knows its nodes once started
        return _known(await self.client.execute_command("COMMAND INFO", name, **_any_node(self.client)), name)
