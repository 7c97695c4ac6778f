"""Strict mode: a grant counts only once a replica holds it.

A primary answers before its replicas have the write. If it dies in that instant and a
replica is promoted, the grants the replica never received are given again (see the
operations guide, "Strict limits across failover"). With ``strict=Strict(...)`` the
limiter sends ``WAIT replicas timeout`` right after each call, on the same connection
(one round trip: the call and the ``WAIT`` are pipelined), and an allowed request whose
write is not acknowledged in time is:

- refused (``fail_open=False``, the default): the caller does not do the work; the grant
  stays counted on the primary, so the limit errs on the side of fewer requests;
- let through (``fail_open=True``): the result is returned as the server gave it, and the
  caller may read :attr:`Strict.last_acknowledged` if it wants to log it.

A denial or a peek wrote nothing of its own, so its result is never changed; its ``WAIT``
returns at once unless an earlier grant on the same connection is still waiting for the
replicas.

Strict mode needs a client of one primary (``redis.Redis``, ``redis.asyncio.Redis``, or
Sentinel's ``master_for``): ``WAIT`` counts the writes of its own connection, and a
Cluster client does not keep a call and the next command on one connection.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import redis

from .results import RateLimit, Throttle


@dataclass
class Strict:
    """How strict a limiter is: ``replicas`` that must acknowledge each allowed write
    (``WAIT``'s first argument, at least 1), within ``timeout_ms`` (at least 1: ``WAIT``
    with 0 would block for ever), and what an unacknowledged grant becomes."""

    replicas: int = 1
    timeout_ms: int = 100
    fail_open: bool = False
    #: The replicas that acknowledged the last allowed write (``None`` before any).
    last_acknowledged: Optional[int] = None

    def __post_init__(self) -> None:
        if not isinstance(self.replicas, int) or self.replicas < 1:
            raise ValueError(f"Strict(replicas={self.replicas!r}): must be an integer of at least 1")
        if not isinstance(self.timeout_ms, int) or self.timeout_ms < 1:
            raise ValueError(
                f"Strict(timeout_ms={self.timeout_ms!r}): must be an integer of at least 1 (WAIT 0 blocks for ever)"
            )

    def wait_command(self) -> tuple:
        return ("WAIT", self.replicas, self.timeout_ms)

    def settle(self, result: Any, acknowledged: Any, wrote: bool) -> Any:
        """The result the caller gets, once ``WAIT`` answered ``acknowledged``."""
        if not wrote or not isinstance(result, (RateLimit, Throttle)) or not result.allowed:
            return result
        acked = int(acknowledged)
        self.last_acknowledged = acked
        if acked >= self.replicas or self.fail_open:
            return result
        # Refused: nothing may be done for this request; retry once the replicas answer.
        if isinstance(result, Throttle):
            return replace(result, allowed=False, remaining=0, retry_after_s=-(-self.timeout_ms // 1000))
        return replace(result, allowed=False, remaining=0, retry_after_ms=self.timeout_ms)


def check_client(client: Any) -> None:
    """Refuse a Cluster client (see the module's text)."""
    if hasattr(client, "nodes_manager"):
        raise ValueError(
            "strict mode needs a client of one primary (redis.Redis, or Sentinel's master_for): "
            "WAIT counts the writes of its own connection, which a Cluster client does not keep"
        )


def wrote(call: Any) -> bool:
    """Whether an allowed call of this shape writes (a cost above 0)."""
    args = [a.decode() if isinstance(a, bytes) else str(a) for a in call.argv]
    upper = [a.upper() for a in args]
    if "COST" in upper:
        i = upper.index("COST")
        if i + 1 < len(args) and args[i + 1].strip() == "0":
            return False
    if upper and upper[0] == "CL.THROTTLE" and len(args) >= 6 and args[5].strip() == "0":
        return False
    return True


def run(client: Any, argv: tuple, fallback: Optional[tuple], strict: Strict) -> tuple:
    """The call and its ``WAIT`` in one pipeline: (reply, acknowledged). ``fallback``:
    the EVAL of a twin, sent when the EVALSHA finds no script."""
    with client.pipeline(transaction=False) as p:
        p.execute_command(*argv)
        p.execute_command(*strict.wait_command())
        reply, acked = p.execute(raise_on_error=False)
    if isinstance(reply, redis.exceptions.NoScriptError) and fallback is not None:
        return run(client, fallback, None, strict)
    if isinstance(reply, Exception):
        raise reply
    if isinstance(acked, Exception):
        raise acked
    return reply, acked


async def arun(client: Any, argv: tuple, fallback: Optional[tuple], strict: Strict) -> tuple:
    """:func:`run` on an asyncio client."""
    async with client.pipeline(transaction=False) as p:
        p.execute_command(*argv)
        p.execute_command(*strict.wait_command())
        reply, acked = await p.execute(raise_on_error=False)
    if isinstance(reply, redis.exceptions.NoScriptError) and fallback is not None:
        return await arun(client, fallback, None, strict)
    if isinstance(reply, Exception):
        raise reply
    if isinstance(acked, Exception):
        raise acked
    return reply, acked
