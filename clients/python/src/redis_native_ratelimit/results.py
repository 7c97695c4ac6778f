"""What the commands reply, as small frozen dataclasses.

Times are kept as the server sends them, integer milliseconds (``*_ms`` fields, with the
server's conventions: ``retry_after_ms`` is -1 when allowed), and offered as
:class:`datetime.timedelta` properties (``retry_after``, ``reset_after``, ``delay``) that
are ``None`` where the field has no value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Optional, Tuple


@dataclass(frozen=True)
class Quota:
    """One limit a call checked, as the HTTP ``RateLimit-Policy`` field describes it:
    ``limit`` per ``window_ms`` (``None`` when the window could not be read from the
    arguments), under a policy name."""

    name: str
    limit: int
    window_ms: Optional[int]


@dataclass(frozen=True)
class RateLimit:
    """The reply of a limiter command (RL.FIXED, RL.GCRA, RL.MULTI, RL.SLIDING, RL.LOG,
    RL.ALL).

    - ``allowed``: the request was allowed and counted; a refused one counted nowhere.
    - ``limit``: the capacity (requests in a full window; ``max_burst + 1`` for GCRA).
    - ``remaining``: how much more would be allowed right now, after this request.
    - ``retry_after_ms``: when refused, the wait until the same request fits (at least
      1); -1 when allowed.
    - ``reset_after_ms``: until the state is back to full capacity; 0 if it already is.
    - ``key``: the binding key (RL.MULTI, RL.SLIDING, RL.ALL), as the caller gave it;
      ``None`` for single-key commands.
    - ``window_ms``: the binding window (RL.MULTI, RL.SLIDING).
    - ``rule``: the binding rule's 1-based place among the rules (RL.ALL).
    - ``delay_ms``: with RL.GCRA ... DELAY, how long to wait before acting (0: now; -1:
      refused, nothing booked); ``None`` without DELAY.
    - ``lease_id``: RL.LEASE's lease id (and RL.ALL's, with a LEASE rule) when allowed;
      ``None`` when refused, peeking, or for the other commands.
    - ``granted``: with ``upto=True`` (``COST n UPTO``), the units the call took, at most
      ``n`` (0 when refused); ``None`` otherwise.
    - ``unavailable``: the limiter did not answer (or its circuit breaker was open) and a
      local budget failed open (allowed, nothing counted) or closed (refused, retry in
      1 s); its other numbers mean nothing then, and its headers are none (a refusal's:
      ``Retry-After`` only).

    ``quotas`` and ``binding`` describe the limits of the call for the HTTP headers
    (:func:`redis_native_ratelimit.headers.ratelimit_headers`); they are left out of ``==``.
    """

    allowed: bool
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    key: Any = None
    window_ms: Optional[int] = None
    rule: Optional[int] = None
    delay_ms: Optional[int] = None
    lease_id: Any = None
    granted: Optional[int] = None
    unavailable: bool = False
    quotas: Tuple[Quota, ...] = field(default=(), compare=False, repr=False)
    binding: Optional[int] = field(default=None, compare=False, repr=False)

    @property
    def limited(self) -> bool:
        """The command's own first field: True when refused."""
        return not self.allowed

    @property
    def retry_after(self) -> Optional[timedelta]:
        """When refused, the wait until the same request fits; ``None`` when allowed."""
        return None if self.retry_after_ms < 0 else timedelta(milliseconds=self.retry_after_ms)

    @property
    def reset_after(self) -> timedelta:
        """Until the state is back to full capacity."""
        return timedelta(milliseconds=self.reset_after_ms)

    @property
    def window(self) -> Optional[timedelta]:
        """The binding window (RL.MULTI, RL.SLIDING); ``None`` otherwise."""
        return None if self.window_ms is None else timedelta(milliseconds=self.window_ms)

    @property
    def delay(self) -> Optional[timedelta]:
        """With DELAY: the wait before acting (zero: act now); ``None`` when refused or
        without DELAY."""
        if self.delay_ms is None or self.delay_ms < 0:
            return None
        return timedelta(milliseconds=self.delay_ms)

    @property
    def quota(self) -> Optional[Quota]:
        """The quota that decided (the binding one), when known."""
        if self.binding is None or not 0 <= self.binding < len(self.quotas):
            return None
        return self.quotas[self.binding]


@dataclass(frozen=True)
class Throttle:
    """CL.THROTTLE's reply, as redis-cell gives it: times in whole **seconds**, rounded
    up; ``retry_after_s`` is -1 when allowed."""

    allowed: bool
    limit: int
    remaining: int
    retry_after_s: int
    reset_after_s: int

    @property
    def limited(self) -> bool:
        return not self.allowed

    @property
    def retry_after(self) -> Optional[timedelta]:
        return None if self.retry_after_s < 0 else timedelta(seconds=self.retry_after_s)

    @property
    def reset_after(self) -> timedelta:
        return timedelta(seconds=self.reset_after_s)


@dataclass(frozen=True)
class Sweep:
    """RL.SWEEP's reply: the cursor of the next call (0: the sweep is complete), how
    many keys this call scanned, and how many got a TTL."""

    cursor: int
    scanned: int
    expired: int
