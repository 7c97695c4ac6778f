"""Limits without their keys: what a middleware applies to every request of a route,
and the rules of one RL.ALL call.

Each policy knows its command's arguments and how to read its reply::

    Gcra(max_burst=19, count=10, period="1s")          # RL.GCRA
    Fixed(limit=1000, window="1d")                      # RL.FIXED
    Multi([("1m", 5), ("1h", 20)], names=("ip", "user"))  # RL.MULTI, one key per name
    Sliding([("1s", 10), ("1m", 100)])                  # RL.SLIDING
    Log(limit=20, window="1m")                          # RL.LOG
    All([Gcra(9, 10, "1s", name="burst"), Fixed(10_000, "1d", name="daily")])  # RL.ALL
    All([Fixed(5, "1m"), Ban(strikes=3, window="10m", duration="1h")])  # RL.ALL, a penalty box

``name`` is the policy's name in the HTTP ``RateLimit-Policy`` and ``RateLimit``
fields, and in the middleware's key prefix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ._args import Duration, Instant, duration_arg, duration_label, duration_ms, find_key, key_list, options
from .results import Quota, RateLimit

Encode = Callable[[Any], bytes]


@dataclass(frozen=True)
class Call:
    """One command call: its native argument vector, and the same call as its Lua twin
    (``twin`` names the file in ``lua/``; keys and the other arguments apart)."""

    argv: Tuple[Any, ...]
    keys: Tuple[Any, ...]
    args: Tuple[Any, ...]
    twin: Optional[str]
    parse: Callable[[Any, Encode], Any]


def _five(reply: Sequence[Any]) -> Tuple[bool, int, int, int, int]:
    if not isinstance(reply, (list, tuple)) or len(reply) < 5:
        raise ValueError(f"not a limiter reply: {reply!r}")
    return (int(reply[0]) == 0, int(reply[1]), int(reply[2]), int(reply[3]), int(reply[4]))


def _windows(limits: Sequence[Tuple[Duration, int]]) -> List[Tuple[Duration, int]]:
    out = []
    for pair in limits:
        window, limit = pair
        out.append((window, limit))
    if not out:
        raise ValueError("at least one (window, limit) pair is needed")
    return out


class Policy:
    """Base of the policies: ``keys`` is how many keys a call takes (None: any)."""

    name: str
    keys: Optional[int] = 1

    def quotas(self, nkeys: int) -> Tuple[Quota, ...]:  # pragma: no cover - abstract
        raise NotImplementedError

    def call(self, keys: Sequence[Any], cost: int = 1, at: Optional[Instant] = None) -> Call:  # pragma: no cover
        raise NotImplementedError

    def rule_args(self, position: int) -> List[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _one_key(self, keys: Sequence[Any]) -> Any:
        keys = key_list(keys)
        if len(keys) != 1:
            raise ValueError(f"{type(self).__name__} takes one key, not {len(keys)}")
        return keys[0]


@dataclass(frozen=True)
class Fixed(Policy):
    """RL.FIXED: at most ``limit`` per ``window``, windows starting at the first request
    (``align``: on the epoch's boundaries)."""

    limit: int
    window: Duration
    align: bool = False
    name: str = "fixed"

    def quotas(self, nkeys: int = 1) -> Tuple[Quota, ...]:
        return (Quota(self.name, self.limit, duration_ms(self.window)),)

    def _tail(self) -> List[Any]:
        return [self.limit, duration_arg(self.window)] + (["ALIGN"] if self.align else [])

    def call(self, keys, cost=1, at=None) -> Call:
        key = self._one_key(keys)
        args = tuple(self._tail() + options(cost, at))
        quotas = self.quotas()

        def parse(reply, encode):
            return RateLimit(*_five(reply), quotas=quotas, binding=0)

        return Call(("RL.FIXED", key) + args, (key,), args, "fixed", parse)

    def rule_args(self, position: int) -> List[Any]:
        return ["FIXED", position] + self._tail()


@dataclass(frozen=True)
class Gcra(Policy):
    """RL.GCRA: ``count`` per ``period``, evenly spaced, plus ``max_burst`` at once
    (capacity ``max_burst + 1``). ``delay`` (a duration) books a slot up to that far
    ahead instead of refusing (RL.GCRA ... DELAY; not inside RL.ALL)."""

    max_burst: int
    count: int
    period: Duration
    delay: Optional[Duration] = None
    name: str = "gcra"

    def quotas(self, nkeys: int = 1) -> Tuple[Quota, ...]:
        # The capacity, and the time it takes to come back in full: the burst window.
        period_ms = duration_ms(self.period)
        window = None
        if period_ms is not None and self.count > 0 and self.max_burst >= 0:
            interval_us = -(-period_ms * 1000 // self.count)
            window = -(-interval_us * (self.max_burst + 1) // 1000)
        return (Quota(self.name, self.max_burst + 1, window),)

    def _tail(self) -> List[Any]:
        return [self.max_burst, self.count, duration_arg(self.period)]

    def call(self, keys, cost=1, at=None) -> Call:
        key = self._one_key(keys)
        tail = self._tail() + options(cost, at)
        if self.delay is not None:
            tail += ["DELAY", duration_arg(self.delay)]
        args = tuple(tail)
        quotas = self.quotas()
        with_delay = self.delay is not None

        def parse(reply, encode):
            delay = int(reply[5]) if with_delay and len(reply) > 5 else None
            return RateLimit(*_five(reply), delay_ms=delay, quotas=quotas, binding=0)

        return Call(("RL.GCRA", key) + args, (key,), args, "gcra", parse)

    def rule_args(self, position: int) -> List[Any]:
        if self.delay is not None:
            raise ValueError("RL.ALL does not take DELAY in a GCRA rule")
        return ["GCRA", position] + self._tail()


@dataclass(frozen=True)
class Log(Policy):
    """RL.LOG: exactly at most ``limit`` in any ``window``, each allowed request kept
    with its ``meta`` (who made it), readable with ZRANGE."""

    limit: int
    window: Duration
    meta: Optional[Any] = None
    name: str = "log"

    def quotas(self, nkeys: int = 1) -> Tuple[Quota, ...]:
        return (Quota(self.name, self.limit, duration_ms(self.window)),)

    def _tail(self, meta: Optional[Any]) -> List[Any]:
        tail = [self.limit, duration_arg(self.window)]
        meta = self.meta if meta is None else meta
        if meta is not None:
            tail += ["META", meta]
        return tail

    def call(self, keys, cost=1, at=None, meta=None) -> Call:
        key = self._one_key(keys)
        args = tuple(self._tail(meta) + options(cost, at))
        quotas = self.quotas()

        def parse(reply, encode):
            return RateLimit(*_five(reply), quotas=quotas, binding=0)

        return Call(("RL.LOG", key) + args, (key,), args, "log", parse)

    def rule_args(self, position: int) -> List[Any]:
        return ["LOG", position] + self._tail(None)


@dataclass(frozen=True)
class _Windows(Policy):
    """RL.MULTI and RL.SLIDING: several keys against several (window, limit) pairs."""

    limits: Sequence[Tuple[Duration, int]]
    names: Optional[Sequence[str]] = None

    keys = None
    command = ""
    twin_name = ""

    def key_label(self, i: int, nkeys: int) -> str:
        if self.names is not None and i < len(self.names):
            return self.names[i]
        return self.name if nkeys == 1 else f"{self.name}{i + 1}"

    def quotas(self, nkeys: int = 1) -> Tuple[Quota, ...]:
        pairs = _windows(self.limits)
        return tuple(
            Quota(f"{self.key_label(i, nkeys)}-{duration_label(w)}", limit, duration_ms(w))
            for i in range(nkeys)
            for w, limit in pairs
        )

    def _limit_args(self) -> List[Any]:
        return [a for w, limit in _windows(self.limits) for a in ("LIMIT", duration_arg(w), limit)]

    def _extra(self) -> List[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def call(self, keys, cost=1, at=None) -> Call:
        keys = key_list(keys, self.command)
        if not keys:
            raise ValueError(f"{self.command} needs at least one key")
        args = tuple(self._limit_args() + self._extra() + options(cost, at))
        quotas = self.quotas(len(keys))
        windows = [duration_ms(w) for w, _ in _windows(self.limits)]

        def parse(reply, encode):
            key = find_key(reply[5], keys, encode)
            window_ms = int(reply[6])
            binding = None
            if key in keys and window_ms in windows:
                binding = keys.index(key) * len(windows) + windows.index(window_ms)
            return RateLimit(*_five(reply), key=key, window_ms=window_ms, quotas=quotas, binding=binding)

        return Call((self.command, len(keys)) + keys + args, keys, args, self.twin_name, parse)

    def rule_args(self, position: int) -> List[Any]:
        return [self.command.split(".")[1], position] + self._limit_args() + self._extra()


@dataclass(frozen=True)
class Multi(_Windows):
    """RL.MULTI: every key against every (window, limit) pair of fixed windows, all or
    nothing. ``names`` name the keys in the HTTP policies (``ip``, ``user``...)."""

    align: bool = False
    name: str = "multi"

    command = "RL.MULTI"
    twin_name = "multi"

    def _extra(self) -> List[Any]:
        return ["ALIGN"] if self.align else []


@dataclass(frozen=True)
class Sliding(_Windows):
    """RL.SLIDING: the same with sliding windows of ``buckets`` buckets (default 10)."""

    buckets: Optional[int] = None
    name: str = "sliding"

    command = "RL.SLIDING"
    twin_name = "sliding"

    def _extra(self) -> List[Any]:
        return [] if self.buckets is None else ["BUCKETS", self.buckets]


@dataclass(frozen=True)
class All(Policy):
    """RL.ALL: one key per rule, each judged by its own algorithm, all or nothing. A
    Multi or Sliding rule takes one key."""

    rules: Sequence[Policy]
    name: str = "all"

    keys = None

    def quotas(self, nkeys: int = 0) -> Tuple[Quota, ...]:
        return tuple(q for rule in self.rules for q in rule.quotas(1))

    def call(self, keys, cost=1, at=None, id: Optional[Any] = None) -> Call:
        keys = key_list(keys, "RL.ALL")
        rules = list(self.rules)
        if len(keys) != len(rules):
            raise ValueError(f"RL.ALL takes one key per rule: {len(rules)} rules, {len(keys)} keys")
        args: List[Any] = []
        for i, rule in enumerate(rules, start=1):
            args += rule.rule_args(i)
        args += options(cost, at)
        if id is not None:
            args += ["ID", id]

        def parse(reply, encode):
            place = int(reply[5])
            key = None if 1 <= place <= len(keys) else find_key(reply[6], keys, encode)
            lease_id = reply[7] if len(reply) > 7 else None
            if isinstance(lease_id, bytes):
                lease_id = lease_id.decode("utf-8", "surrogateescape")
            return self.result(keys, place, _five(reply), lease_id=lease_id, key=key)

        return Call(("RL.ALL", len(keys)) + keys + tuple(args), keys, tuple(args), "all", parse)

    def rule_args(self, position: int) -> List[Any]:
        raise ValueError("RL.ALL rules cannot nest")

    def result(
        self, keys: Sequence[Any], place: int, five: Tuple[bool, int, int, int, int], lease_id: Any = None, key: Any = None
    ) -> RateLimit:
        """The result of a call of these rules on ``keys`` whose binding rule is the
        ``place``-th (1-based), with the reply's five fields."""
        rules = list(self.rules)
        if key is None and 1 <= place <= len(keys):
            key = keys[place - 1]
        binding = None
        if 1 <= place <= len(rules):
            start = sum(len(rule.quotas(1)) for rule in rules[: place - 1])
            own = rules[place - 1].quotas(1)
            binding = start + next((j for j, q in enumerate(own) if q.limit == five[1]), 0)
        return RateLimit(*five, key=key, rule=place, lease_id=lease_id, quotas=self.quotas(), binding=binding)


@dataclass(frozen=True)
class Ban(Policy):
    """RL.ALL's BAN rule, a penalty box: after ``strikes`` refused calls within
    ``window``, every call naming it is refused for ``duration`` (``DEL`` of its key
    lifts the ban). A rule of :class:`All` only: it has no command of its own."""

    strikes: int
    window: Duration
    duration: Duration
    name: str = "ban"

    def quotas(self, nkeys: int = 1) -> Tuple[Quota, ...]:
        return (Quota(self.name, self.strikes, duration_ms(self.duration)),)

    def call(self, keys, cost=1, at=None) -> Call:
        return All([self]).call(keys, cost, at)

    def rule_args(self, position: int) -> List[Any]:
        return ["BAN", position, self.strikes, duration_arg(self.window), duration_arg(self.duration)]


def quota_window_s(quota: Quota) -> Optional[int]:
    return None if quota.window_ms is None else math.ceil(quota.window_ms / 1000)
