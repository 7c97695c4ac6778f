"""Typed calls of every command, with redis-py: :class:`RateLimiter` (blocking) and, in
:mod:`redis_native_ratelimit.asyncio`, :class:`~redis_native_ratelimit.asyncio.AsyncRateLimiter`.

They take any redis-py client: ``redis.Redis`` or ``redis.cluster.RedisCluster`` (and
their asyncio versions), with ``decode_responses`` on or off, RESP2 or RESP3. With
``twins=True`` every call runs the command's Lua twin instead (EVALSHA, loaded on first
use), for servers where the module cannot be loaded: the same arguments, replies and
state.
"""

from __future__ import annotations

from dataclasses import replace

from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import redis

from . import strict as _strict
from . import twins as _twins
from ._args import ONE_KEY, Duration, Instant, duration_arg, find_key, key_list
from .policies import All, Call, Fixed, Gcra, Log, Multi, Policy, Sliding
from .results import RateLimit, Sweep, Throttle
from .lease import HeldLease, Lease, release_call

#: The file of each twin in the Lua directory.
TWIN_OF = {
    "RL.FIXED": "fixed",
    "RL.GCRA": "gcra",
    "RL.MULTI": "multi",
    "RL.SLIDING": "sliding",
    "RL.LOG": "log",
    "RL.LEASE": "lease",
    "RL.RELEASE": "release",
    "RL.ALL": "all",
    "CL.THROTTLE": "throttle",
    "RL.BULKEXPIRE": "bulkexpire",
}


def _encoder(client: Any) -> Callable[[Any], bytes]:
    get = getattr(client, "get_encoder", None)
    if get is not None:
        try:
            enc = get()
            return lambda v: v if isinstance(v, bytes) else enc.encode(v)
        except Exception:  # noqa: BLE001 - any client without a usable encoder
            pass
    return lambda v: v if isinstance(v, bytes) else str(v).encode("utf-8")


def _throttle_parse(reply: Any, encode: Any) -> Throttle:
    return Throttle(int(reply[0]) == 0, int(reply[1]), int(reply[2]), int(reply[3]), int(reply[4]))


def _sweep_parse(reply: Any, encode: Any) -> Sweep:
    cursor = reply[0]
    if isinstance(cursor, bytes):
        cursor = cursor.decode("ascii")
    return Sweep(int(cursor), int(reply[1]), int(reply[2]))


def _seconds_arg(value: Union[int, timedelta]) -> int:
    if isinstance(value, timedelta):
        s, rest = divmod(value, timedelta(seconds=1))
        if rest:
            raise ValueError(f"CL.THROTTLE takes whole seconds, not {value!r}")
        return s
    return value


def _settled(call: Call, refund: bool, force: bool) -> Call:
    """The call with ``REFUND`` or ``FORCE`` after its other arguments (settling a
    request after the fact: give back what it did not use, or record it whether it fits
    or not). Not both."""
    if refund and force:
        raise ValueError("refund and force cannot be given together: a request is either given back or forced")
    if not (refund or force):
        return call
    flag = "REFUND" if refund else "FORCE"
    return replace(call, argv=call.argv + (flag,), args=call.args + (flag,))


class Reservation:
    """An estimate reserved with :meth:`RateLimiter.reserve`: ``result`` (its
    :class:`RateLimit`), ``allowed``, and :meth:`settle`."""

    def __init__(self, limiter: Any, policy: Policy, keys: Any, estimate: int, at: Optional[Instant], result: Any):
        self.limiter = limiter
        self.policy = policy
        self.keys = keys
        self.estimate = estimate
        self.at = at
        self.result = result
        self.settled = False

    @property
    def allowed(self) -> bool:
        return bool(self.result.allowed)

    def settle(self, actual: int, *, at: Optional[Instant] = None) -> Any:
        """Settle the real cost: ``REFUND`` of ``estimate - actual`` when it used less,
        ``FORCE`` of ``actual - estimate`` when it used more; the reply of that call
        (None when there is nothing to settle: the cost was the estimate, or the
        reservation was refused and consumed nothing). Once only."""
        if actual < 0:
            raise ValueError(f"the actual cost is a count, not {actual!r}")
        if self.settled:
            raise ValueError("this reservation is already settled")
        self.settled = True
        diff = actual - self.estimate
        if not self.allowed or diff == 0:
            return None
        when = self.at if at is None else at
        return self.limiter.check(self.policy, self.keys, cost=abs(diff), at=when, refund=diff < 0, force=diff > 0)


class _Calls:
    """The calls, shared by the blocking and the asyncio limiter: each method builds a
    :class:`~redis_native_ratelimit.policies.Call` and hands it to ``_run`` (which returns the
    result, or an awaitable of it)."""

    def __init__(
        self,
        client: Any,
        *,
        twins: bool = False,
        lua_dir: Union[str, Path, None] = None,
        strict: Optional[_strict.Strict] = None,
    ):
        self.client = client
        self.twins = twins
        self.lua_dir = lua_dir
        self._encode = _encoder(client)
        #: Strict mode (:mod:`redis_native_ratelimit.strict`): each call followed by ``WAIT``.
        self.strict = strict
        if strict is not None:
            _strict.check_client(client)

    def _run(self, call: Call, **kwargs: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _twin_argv(self, call: Call) -> Tuple[Tuple[Any, ...], Tuple[Any, ...], Tuple[Any, ...]]:
        """FCALL's, EVALSHA's and EVAL's argument vectors for the call's twin."""
        if call.twin is None:
            raise _twins.TwinUnavailable(f"{call.argv[0]} has no Lua twin")
        twin = _twins.load(call.twin, self.lua_dir)
        tail = (len(call.keys),) + tuple(call.keys) + tuple(call.args)
        return ("FCALL", twin.function) + tail, ("EVALSHA", twin.sha) + tail, ("EVAL", twin.source) + tail

    # Whether the server has the Functions library: None until an FCALL tells (the
    # twins then call the function while it is there, the script otherwise).
    _library: Optional[bool] = None

    # -- the limiters ---------------------------------------------------------------

    def fixed(
        self,
        key: Any,
        limit: int,
        window: Duration,
        *,
        cost: int = 1,
        align: bool = False,
        at: Optional[Instant] = None,
        refund: bool = False,
        force: bool = False,
        name: str = "fixed",
    ) -> RateLimit:
        """RL.FIXED key limit window [COST n] [ALIGN] [AT ms]."""
        return self._run(_settled(Fixed(limit, window, align, name).call([key], cost, at), refund, force))

    def gcra(
        self,
        key: Any,
        max_burst: int,
        count: int,
        period: Duration,
        *,
        cost: int = 1,
        at: Optional[Instant] = None,
        refund: bool = False,
        force: bool = False,
        delay: Optional[Duration] = None,
        name: str = "gcra",
    ) -> RateLimit:
        """RL.GCRA key max_burst count period [COST n] [AT ms] [DELAY max_delay].
        With ``delay``, the result's ``delay_ms`` (and ``delay``) says when to act."""
        return self._run(_settled(Gcra(max_burst, count, period, delay, name).call([key], cost, at), refund, force))

    def multi(
        self,
        keys: Sequence[Any],
        limits: Sequence[Tuple[Duration, int]],
        *,
        cost: int = 1,
        align: bool = False,
        at: Optional[Instant] = None,
        refund: bool = False,
        force: bool = False,
        names: Optional[Sequence[str]] = None,
    ) -> RateLimit:
        """RL.MULTI numkeys key... LIMIT window limit... [COST n] [ALIGN] [AT ms]; the
        result names the binding ``key`` and ``window_ms``."""
        return self._run(_settled(Multi(list(limits), names, align).call(key_list(keys, "RL.MULTI"), cost, at), refund, force))

    def sliding(
        self,
        keys: Sequence[Any],
        limits: Sequence[Tuple[Duration, int]],
        *,
        buckets: Optional[int] = None,
        cost: int = 1,
        at: Optional[Instant] = None,
        refund: bool = False,
        force: bool = False,
        names: Optional[Sequence[str]] = None,
    ) -> RateLimit:
        """RL.SLIDING numkeys key... LIMIT window limit... [BUCKETS n] [COST n] [AT ms]."""
        return self._run(_settled(Sliding(list(limits), names, buckets).call(key_list(keys, "RL.SLIDING"), cost, at), refund, force))

    def log(
        self,
        key: Any,
        limit: int,
        window: Duration,
        *,
        meta: Optional[Any] = None,
        cost: int = 1,
        at: Optional[Instant] = None,
        refund: bool = False,
        force: bool = False,
        name: str = "log",
    ) -> RateLimit:
        """RL.LOG key limit window [META value] [COST n] [AT ms]."""
        return self._run(_settled(Log(limit, window, None, name).call([key], cost, at, meta=meta), refund, force))

    def all(
        self,
        rules: Sequence[Tuple[Any, Policy]],
        *,
        cost: int = 1,
        at: Optional[Instant] = None,
        id: Optional[Any] = None,
        refund: bool = False,
        force: bool = False,
    ) -> RateLimit:
        """RL.ALL: ``rules`` is a list of ``(key, policy)`` pairs (Fixed, Gcra, Multi,
        Sliding, Log, Lease, Ban), one per key; the result names the binding ``rule``
        (1-based) and its ``key``, and with a Lease rule the ``lease_id`` (``id`` names
        it; release it on each Lease rule's key). With ``refund``/``force`` a Lease rule
        takes no part in a refund and takes or renews its lease in a forced call."""
        if isinstance(rules, ONE_KEY) or not hasattr(rules, "__iter__"):
            raise TypeError(f"RL.ALL takes a list of (key, policy) pairs, not {type(rules).__name__}")
        pairs = list(rules)
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[1], Policy)):
                raise TypeError(f"RL.ALL takes (key, policy) pairs, not {pair!r}")
        policy = All([p for _, p in pairs])
        return self._run(_settled(policy.call([k for k, _ in pairs], cost, at, id=id), refund, force))

    # -- leases -----------------------------------------------------------------------

    def lease(
        self,
        key: Any,
        limit: int,
        ttl: Duration,
        *,
        id: Optional[Any] = None,
        cost: int = 1,
        at: Optional[Instant] = None,
        renew_every: Optional[float] = None,
        name: str = "lease",
    ) -> Any:
        """RL.LEASE key limit ttl [ID id] [COST n] [AT ms]: one of ``limit`` slots. A
        :class:`~redis_native_ratelimit.lease.HeldLease` (``allowed``, ``id``, ``release()``),
        also a context manager that raises ``LeaseDenied`` when refused, renews every
        ``renew_every`` seconds (a third of ``ttl`` by default) while its body runs,
        and releases on exit."""
        policy = Lease(limit, ttl, name)
        return self._hold(key, policy, policy.call([key], cost, at, id=id), renew_every)

    def release(self, key: Any, id: Any, *, at: Optional[Instant] = None) -> bool:
        """RL.RELEASE key id [AT ms]: True when a live lease with that id was
        released (an unknown or expired one is not an error)."""
        return self._run(release_call(key, id, at))

    def _hold(self, key: Any, policy: Lease, call: Call, renew_every: Optional[float]) -> Any:
        return HeldLease(self, key, policy, self._run(call), renew_every)

    def check(
        self,
        policy: Policy,
        keys: Union[Any, Sequence[Any]],
        *,
        cost: int = 1,
        at: Optional[Instant] = None,
        refund: bool = False,
        force: bool = False,
    ) -> RateLimit:
        """Apply a policy to its key (or list of keys, for Multi, Sliding and All)."""
        keys = list(keys) if isinstance(keys, (list, tuple)) else [keys]
        return self._run(_settled(policy.call(keys, cost, at), refund, force))

    def reserve(
        self,
        policy: Policy,
        keys: Union[Any, Sequence[Any]],
        estimate: int,
        *,
        at: Optional[Instant] = None,
    ) -> Any:
        """Reserve ``estimate`` (a request whose real cost is known only afterwards, such
        as an LLM call's tokens): the call of ``policy`` on ``keys`` with ``COST
        estimate``. The :class:`Reservation` tells whether it was allowed; once the work
        is done, ``settle(actual)`` gives back what it did not use (``REFUND``) or pays
        the overage (``FORCE``). An asyncio limiter returns an awaitable of it, and its
        ``settle`` is awaited too."""
        result = self.check(policy, keys, cost=estimate, at=at)
        return self._reservation(result, policy, keys, estimate, at)

    def _reservation(self, result: Any, policy: Policy, keys: Any, estimate: int, at: Optional[Instant]) -> Any:
        return Reservation(self, policy, keys, estimate, at, result)

    def throttle(
        self,
        key: Any,
        max_burst: int,
        count: int,
        period: Union[int, timedelta],
        quantity: int = 1,
    ) -> Throttle:
        """CL.THROTTLE key max_burst count period [quantity], as redis-cell: ``period``
        in whole seconds, the reply's times in whole seconds rounded up."""
        args = (max_burst, count, _seconds_arg(period), quantity)
        call = Call(("CL.THROTTLE", key) + args, (key,), args, TWIN_OF["CL.THROTTLE"], _throttle_parse)
        return self._run(call)

    # -- keys without a TTL ---------------------------------------------------------

    def bulkexpire(self, seconds: Duration, keys: Sequence[Any]) -> List[Any]:
        """RL.BULKEXPIRE seconds key...: the keys that got a TTL, as the caller gave
        them."""
        keys = key_list(keys, "RL.BULKEXPIRE")
        seconds_arg = duration_arg(seconds)

        def parse(reply: Any, encode: Any) -> List[Any]:
            return [find_key(k, keys, encode) for k in reply]

        call = Call(("RL.BULKEXPIRE", seconds_arg) + keys, keys, (seconds_arg,), "bulkexpire", parse)
        return self._run(call)

    def sweep(
        self,
        cursor: int,
        seconds: Duration,
        *,
        match: Optional[str] = None,
        count: Optional[int] = None,
        type: Optional[str] = None,
        dryrun: bool = False,
        node: Any = None,
    ) -> Sweep:
        """RL.SWEEP cursor seconds [MATCH p] [COUNT n] [TYPE t] [DRYRUN], on one node: in
        a Cluster, pass the ``node`` (redis-py's ``ClusterNode``) to sweep."""
        argv: List[Any] = ["RL.SWEEP", cursor, duration_arg(seconds)]
        if match is not None:
            argv += ["MATCH", match]
        if count is not None:
            argv += ["COUNT", count]
        if type is not None:
            argv += ["TYPE", type]
        if dryrun:
            argv.append("DRYRUN")
        call = Call(tuple(argv), (), (), None, _sweep_parse)
        return self._run(call, **({"target_nodes": node} if node is not None else {}))


class RateLimiter(_Calls):
    """Typed calls of the commands on a blocking redis-py client::

        rl = RateLimiter(redis.Redis.from_url("redis://127.0.0.1:6379"))
        result = rl.gcra("user:42", max_burst=2, count=1, period="2s")
        if not result.allowed:
            wait = result.retry_after          # a timedelta

    ``twins=True`` runs the Lua twins instead of the module's commands;
    ``strict=Strict()`` counts a grant only once a replica holds it
    (:mod:`redis_native_ratelimit.strict`).
    """

    def _run(self, call: Call, **kwargs: Any) -> Any:
        if self.strict is not None and call.keys:
            # Twins: the call's script (EVALSHA, then EVAL when the server lacks it).
            argv, fallback = (call.argv, None) if not self.twins else self._twin_argv(call)[1:]
            reply, acked = _strict.run(self.client, argv, fallback, self.strict)
            return self.strict.settle(call.parse(reply, self._encode), acked, _strict.wrote(call))
        if not self.twins:
            reply = self.client.execute_command(*call.argv, **kwargs)
        else:
            fcall, evalsha, eval_ = self._twin_argv(call)
            reply = None
            if self._library is not False:
                try:
                    reply = self.client.execute_command(*fcall)
                    self._library = True
                except redis.exceptions.ResponseError as e:
                    if not _twins.function_missing(e):
                        raise
                    self._library = False
            if self._library is False:
                try:
                    reply = self.client.execute_command(*evalsha)
                except redis.exceptions.NoScriptError:
                    reply = self.client.execute_command(*eval_)
        return call.parse(reply, self._encode)

    def has_command(self, name: str) -> bool:
        """Whether the server knows a command (COMMAND INFO): RL.ALL and CL.THROTTLE
        arrived in later versions of the module."""
        info = self.client.execute_command("COMMAND INFO", name, **_any_node(self.client))
        return _known(info, name)


def _any_node(client: Any) -> dict:
    """Where a keyless command goes: any node of a Cluster."""
    if hasattr(client, "nodes_manager") and hasattr(client, "get_random_node"):
        return {"target_nodes": client.get_random_node()}
    return {}


def _known(info: Any, name: str) -> bool:
    """COMMAND INFO's reply, parsed or raw, for one command: is it known?"""
    if isinstance(info, dict):
        return any(v for v in info.values())
    if isinstance(info, (list, tuple)):
        return any(x for x in info)
    return bool(info)
