"""Leases: how many requests are in flight at once (RL.LEASE, RL.RELEASE).

``limiter.lease(key, limit, ttl)`` takes one of ``limit`` slots and returns a
:class:`HeldLease` (or, on an asyncio limiter, an object to ``await`` or to use with
``async with``). Used as a context manager it releases the slot on exit, also when the
body raises, and renews it in the background while the body runs (every third of the
``ttl`` by default), so work of any length keeps its slot and a process that dies frees
it within ``ttl``::

    try:
        with limiter.lease("exports:acct:3", 20, "30s") as lease:
            build_the_report()
    except LeaseDenied as denied:
        return 429, denied.headers          # Retry-After and the RateLimit headers

Without ``with``, check ``lease.allowed``, then ``lease.release()`` when done.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ._args import Duration, Instant, duration_arg, duration_ms, options
from .headers import ratelimit_headers
from .policies import Call, Policy, _five
from .results import Quota, RateLimit


def _text(value: Any) -> Any:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Lease(Policy):
    """RL.LEASE: at most ``limit`` leases held at once on a key, each until released or
    ``ttl`` after it was last renewed. As a rule of :class:`~redis_native_ratelimit.All`, the
    call's ``id`` names the lease (the result's ``lease_id``).

    ``retry_after`` (a duration, default 1 s) is the ``Retry-After`` of a refusal: a slot
    frees when a request ends, usually long before the oldest lease's ``ttl`` (the wait
    the server replies), so a refused client is told to come back soon."""

    limit: int
    ttl: Duration
    name: str = "lease"
    retry_after: Duration = "1s"

    def quotas(self, nkeys: int = 1) -> Tuple[Quota, ...]:
        return (Quota(self.name, self.limit, None),)

    def _tail(self) -> List[Any]:
        return [self.limit, duration_arg(self.ttl)]

    def call(self, keys, cost=1, at=None, id: Optional[Any] = None) -> Call:
        key = self._one_key(keys)
        args = self._tail()
        if id is not None:
            args += ["ID", id]
        args = tuple(args + options(cost, at))
        quotas = self.quotas()

        def parse(reply, encode):
            return RateLimit(*_five(reply), lease_id=_text(reply[5]), quotas=quotas, binding=0)

        return Call(("RL.LEASE", key) + args, (key,), args, "lease", parse)

    def rule_args(self, position: int) -> List[Any]:
        return ["LEASE", position] + self._tail()

    @property
    def ttl_ms(self) -> Optional[int]:
        return duration_ms(self.ttl)

    @property
    def retry_after_ms(self) -> int:
        """``retry_after`` in milliseconds (at least 1)."""
        ms = duration_ms(self.retry_after)
        if ms is None:
            raise ValueError(f"retry_after: a positive duration, not {self.retry_after!r}")
        return ms


def release_call(key: Any, id: Any, at: Optional[Instant] = None) -> Call:
    """RL.RELEASE key id [AT ms]: True when a live lease was released."""
    args = (id,) + tuple(options(1, at))

    def parse(reply, encode):
        return int(reply) == 1

    return Call(("RL.RELEASE", key) + args, (key,), args, "release", parse)


class LeaseDenied(Exception):
    """A lease refused: every slot is held. ``result`` is the reply; ``retry_after``
    (a timedelta) when a slot frees up at the latest (a release may free one sooner);
    ``headers`` the HTTP headers (``Retry-After`` and the RateLimit fields) for a 429,
    or a 503 when the limit protects a backend."""

    def __init__(self, key: Any, result: RateLimit, retry_after_ms: int = 1000):
        super().__init__(f"no free slot on {key!r}: {result.limit} held; retry in {result.retry_after_ms} ms")
        self.key = key
        self.result = result
        self._header_retry_ms = retry_after_ms

    @property
    def retry_after(self):
        return self.result.retry_after

    @property
    def headers(self) -> Dict[str, str]:
        """The headers of a 429: ``Retry-After`` is the policy's ``retry_after`` (1 s
        unless the lease was taken with another)."""
        return ratelimit_headers(self.result, retry_after_ms=self._header_retry_ms)


class _Held:
    """What the blocking and the asyncio leases share."""

    def __init__(self, limiter: Any, key: Any, policy: Lease, result: RateLimit, renew_every: Optional[float]):
        self.limiter = limiter
        self.key = key
        self.policy = policy
        self.result = result
        ttl_ms = policy.ttl_ms
        if renew_every is None and ttl_ms is not None:
            renew_every = ttl_ms / 3000
        self.renew_every = renew_every
        #: How many renewals the background heartbeat made.
        self.renewals = 0
        #: True when a renewal found the lease gone (its ttl passed without a renewal
        #: and its slot was taken): the work runs without a slot.
        self.lost = False
        self.released = False

    @property
    def allowed(self) -> bool:
        return self.result.allowed

    @property
    def id(self) -> Any:
        """The lease id (given, or made by the server); None when refused."""
        return self.result.lease_id

    @property
    def retry_after(self):
        return self.result.retry_after

    def _renew_call(self) -> Call:
        return self.policy.call([self.key], id=self.id)


class HeldLease(_Held):
    """A lease on a blocking limiter: ``allowed``, ``id``, ``result``; ``renew()``,
    ``release()``; as a context manager, raises :class:`LeaseDenied` when refused,
    renews in the background and releases on exit."""

    _thread: Optional[threading.Thread] = None

    def renew(self) -> RateLimit:
        """RL.LEASE again with the lease's id: its expiry moves to now + ttl."""
        result = self.limiter._run(self._renew_call())
        if not result.allowed:
            self.lost = True
        return result

    def release(self) -> bool:
        """RL.RELEASE: True when the lease was still held."""
        self._stop_heartbeat()
        if not self.allowed or self.released:
            return False
        self.released = True
        return bool(self.limiter._run(release_call(self.key, self.id)))

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(self.renew_every):
            try:
                if not self.renew().allowed:
                    return
                self.renewals += 1
            except Exception:  # noqa: BLE001 - an outage: try again at the next beat
                continue

    def _stop_heartbeat(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> "HeldLease":
        if not self.allowed:
            raise LeaseDenied(self.key, self.result, self.policy.retry_after_ms)
        if self.renew_every:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._heartbeat, args=(self._stop,), daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.release()
        except Exception:
            if exc_type is None:
                raise


class AsyncHeldLease(_Held):
    """A lease on an asyncio limiter (see :class:`HeldLease`); ``renew`` and
    ``release`` are coroutines."""

    _task: Optional["asyncio.Task[None]"] = None

    async def renew(self) -> RateLimit:
        result = await self.limiter._run(self._renew_call())
        if not result.allowed:
            self.lost = True
        return result

    async def release(self) -> bool:
        await self._stop_heartbeat()
        if not self.allowed or self.released:
            return False
        self.released = True
        return bool(await self.limiter._run(release_call(self.key, self.id)))

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.renew_every or 0)
            try:
                if not (await self.renew()).allowed:
                    return
                self.renewals += 1
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - an outage: try again at the next beat
                continue

    async def _stop_heartbeat(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    def start(self) -> "AsyncHeldLease":
        if not self.allowed:
            raise LeaseDenied(self.key, self.result, self.policy.retry_after_ms)
        if self.renew_every:
            self._task = asyncio.ensure_future(self._heartbeat())
        return self


class AsyncLeaseCall:
    """What an asyncio limiter's ``lease()`` returns: ``await`` it for an
    :class:`AsyncHeldLease`, or use ``async with`` (raises :class:`LeaseDenied` when
    refused, renews in the background, releases on exit)."""

    def __init__(self, limiter: Any, key: Any, policy: Lease, call: Call, renew_every: Optional[float]):
        self._args = (limiter, key, policy, call, renew_every)
        self._held: Optional[AsyncHeldLease] = None

    async def _take(self) -> AsyncHeldLease:
        limiter, key, policy, call, renew_every = self._args
        result = await limiter._run(call)
        return AsyncHeldLease(limiter, key, policy, result, renew_every)

    def __await__(self):
        return self._take().__await__()

    async def __aenter__(self) -> AsyncHeldLease:
        self._held = (await self._take()).start()
        return self._held

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._held is None:
            return
        try:
            await self._held.release()
        except Exception:
            if exc_type is None:
                raise
