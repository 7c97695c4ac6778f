"""Typed calls of every command, with redis-py: :class:`RateLimiter` (blocking) and, in
:mod:`redis_native_ratelimit.asyncio`, :class:`~redis_native_ratelimit.asyncio.AsyncRateLimiter`.

They take any redis-py client: ``redis.Redis`` or ``redis.cluster.RedisCluster`` (and
their asyncio versions), with ``decode_responses`` on or off, RESP2 or RESP3. With
``twins=True`` every call runs the command's Lua twin instead (EVALSHA, loaded on first
use), for servers where the module cannot be loaded: the same arguments, replies and
state.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Set, Tuple, Union

import redis

from . import budget as _budget
from . import strict as _strict
from . import twins as _twins
from ._args import ONE_KEY, Duration, Instant, duration_arg, find_key, key_list
from ._slots import across_slots, cluster_slots, drive, settled
from .policies import All, Call, Fixed, Gcra, Log, Multi, Policy, Sliding
from .results import RateLimit, Sweep, Throttle
from .lease import HeldLease, Lease, release_call

log = logging.getLogger("redis_native_ratelimit")

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
        twins: Union[bool, str] = False,
        lua_dir: Union[str, Path, None] = None,
        strict: Optional[_strict.Strict] = None,
        logger: Optional[logging.Logger] = None,
    ):
        if twins not in (False, True, "fallback"):
            raise ValueError(
                'twins: False (the module\'s commands), True (their Lua twins) or "fallback" '
                "(the commands, and the twin of a command the server lacks)"
            )
        self.client = client
        self.twins = twins
        self.lua_dir = lua_dir
        self.logger = logger or log
        #: twins="fallback": the commands the server turned out to lack (their twins run).
        self.missing: Set[str] = set()
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

    def _twin_for(self, call: Call) -> bool:
        """Whether the call runs as its twin: always, or (``twins="fallback"``) when the
        server turned out to lack its command."""
        return self.twins is True or (self.twins == "fallback" and str(call.argv[0]).upper() in self.missing)

    def _falls_back(self, call: Call, error: Exception) -> bool:
        """``twins="fallback"`` and the server has no such command: its twin runs now and
        from now on (said once in the log, as an error: the module is missing there)."""
        if self.twins != "fallback" or call.twin is None or not _twins.command_missing(error):
            return False
        name = str(call.argv[0]).upper()
        if name not in self.missing:
            self.missing.add(name)
            self.logger.error(
                "the Redis server has no %s (%s): its Lua twin runs instead, now and from now on "
                "(the Functions library when it is loaded, redis_native_ratelimit.twins.load_library, "
                "else the script); load the redis-ratelimit module into the server to use the command",
                name,
                error,
            )
        return True

    def _all(
        self,
        policy: All,
        keys: Sequence[Any],
        cost: int,
        at: Optional[Instant],
        id: Any,
        refund: bool,
        force: bool,
        new_lease: bool,
        upto: bool = False,
    ) -> Any:
        """One RL.ALL, or on a Cluster client whose keys are in several slots one per slot
        (``redis_native_ratelimit._slots``)."""
        keys = list(key_list(keys, "RL.ALL"))
        slots = cluster_slots(self.client, keys, self._encode) if len(keys) > 1 else None
        if slots is None or len(set(slots)) == 1:
            return self._run(settled(policy.call(keys, cost, at, id=id), refund, force, upto))
        if upto:
            raise ValueError(
                "upto across Cluster slots: what every rule allows is known only to one RL.ALL; "
                "give the keys one hash tag, e.g. {tenant7}:rate and {tenant7}:day"
            )
        return self._drive(across_slots(policy, keys, slots, cost, at, id, refund, force, new_lease))

    def _drive(self, plan: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _sending(self, call: Call, kwargs: dict) -> Any:
        """The plan of one call: what it sends to the server (each ``(argv, kwargs)``
        sent back its reply, or thrown its error), and its parsed result: the command,
        or its twin (the function while the server has the library, else the script,
        EVALSHA then EVAL), or the command and then its twin when the server lacks it
        (``twins="fallback"``)."""
        if self._twin_for(call):
            reply = yield from self._sending_twin(call)
        else:
            try:
                reply = yield (call.argv, kwargs)
            except redis.exceptions.ResponseError as e:
                if not self._falls_back(call, e):
                    raise
                reply = yield from self._sending_twin(call)
        return call.parse(reply, self._encode)

    def _sending_twin(self, call: Call) -> Any:
        fcall, evalsha, eval_ = self._twin_argv(call)
        if self._library is not False:
            try:
                reply = yield (fcall, {})
            except redis.exceptions.ResponseError as e:
                if not _twins.function_missing(e):
                    raise
                self._library = False
            else:
                self._library = True
                return reply
        try:
            return (yield (evalsha, {}))
        except redis.exceptions.NoScriptError:
            return (yield (eval_, {}))

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
        upto: bool = False,
        name: str = "fixed",
    ) -> RateLimit:
        """RL.FIXED key limit window [COST n] [ALIGN] [AT ms]."""
        return self._run(settled(Fixed(limit, window, align, name).call([key], cost, at), refund, force, upto))

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
        upto: bool = False,
        delay: Optional[Duration] = None,
        name: str = "gcra",
    ) -> RateLimit:
        """RL.GCRA key max_burst count period [COST n] [AT ms] [DELAY max_delay].
        With ``delay``, the result's ``delay_ms`` (and ``delay``) says when to act."""
        return self._run(settled(Gcra(max_burst, count, period, delay, name).call([key], cost, at), refund, force, upto))

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
        upto: bool = False,
        names: Optional[Sequence[str]] = None,
    ) -> RateLimit:
        """RL.MULTI numkeys key... LIMIT window limit... [COST n] [ALIGN] [AT ms]; the
        result names the binding ``key`` and ``window_ms``."""
        return self._run(settled(Multi(list(limits), names, align).call(key_list(keys, "RL.MULTI"), cost, at), refund, force, upto))

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
        upto: bool = False,
        names: Optional[Sequence[str]] = None,
    ) -> RateLimit:
        """RL.SLIDING numkeys key... LIMIT window limit... [BUCKETS n] [COST n] [AT ms]."""
        return self._run(settled(Sliding(list(limits), names, buckets).call(key_list(keys, "RL.SLIDING"), cost, at), refund, force, upto))

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
        upto: bool = False,
        name: str = "log",
    ) -> RateLimit:
        """RL.LOG key limit window [META value] [COST n] [AT ms]."""
        return self._run(settled(Log(limit, window, None, name).call([key], cost, at, meta=meta), refund, force, upto))

    def all(
        self,
        rules: Sequence[Tuple[Any, Policy]],
        *,
        cost: int = 1,
        at: Optional[Instant] = None,
        id: Optional[Any] = None,
        refund: bool = False,
        force: bool = False,
        upto: bool = False,
        new_lease: bool = False,
    ) -> RateLimit:
        """RL.ALL: ``rules`` is a list of ``(key, policy)`` pairs (Fixed, Gcra, Multi,
        Sliding, Log, Lease, Ban), one per key; the result names the binding ``rule``
        (1-based) and its ``key``, and with a Lease rule the ``lease_id`` (``id`` names
        it; release it on each Lease rule's key). With ``refund``/``force`` a Lease rule
        takes no part in a refund and takes or renews its lease in a forced call.

        On a Cluster client whose keys are in several slots, one RL.ALL per slot; when a
        slot refuses, the earlier ones give back what they took, and the leases they
        took with an id the package made (or with ``id`` when ``new_lease`` says it
        held no lease before: a renewal is not undone)."""
        if isinstance(rules, ONE_KEY) or not hasattr(rules, "__iter__"):
            raise TypeError(f"RL.ALL takes a list of (key, policy) pairs, not {type(rules).__name__}")
        pairs = list(rules)
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[1], Policy)):
                raise TypeError(f"RL.ALL takes (key, policy) pairs, not {pair!r}")
        return self._all(All([p for _, p in pairs]), [k for k, _ in pairs], cost, at, id, refund, force, new_lease, upto)

    # -- local budgets ------------------------------------------------------------------

    def local_budget(self, policy: Policy, key: Union[Any, Sequence[Any]], batch: int = 100, **options: Any) -> Any:
        """A local budget of ``policy`` on ``key`` (a list of keys for Sliding and All,
        in one Cluster slot): ``take()`` answers from units taken ``batch`` at a time with
        ``COST batch UPTO``, and what is left is given back before its window ends and on
        ``close()`` (:mod:`redis_native_ratelimit.budget`). Options: ``fail_open`` (True),
        ``timeout_ms`` (250; None: the client's own) and ``breaker`` act on its calls as
        the middleware's on theirs; ``clock`` (monotonic milliseconds) is the clock its
        times are read on; ``timer=False`` gives back only when a take,
        ``give_back()`` or ``close()`` finds the units due, with no background timer;
        ``logger``."""
        return self._budget_class(self, policy, key, batch, **options)

    _budget_class: Any = _budget.LocalBudget

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
        retry_after: Duration = "1s",
    ) -> Any:
        """RL.LEASE key limit ttl [ID id] [COST n] [AT ms]: one of ``limit`` slots. A
        :class:`~redis_native_ratelimit.lease.HeldLease` (``allowed``, ``id``, ``release()``),
        also a context manager that raises ``LeaseDenied`` when refused, renews every
        ``renew_every`` seconds (a third of ``ttl`` by default) while its body runs,
        and releases on exit; ``retry_after`` is the ``Retry-After`` of its denial's
        headers."""
        policy = Lease(limit, ttl, name, retry_after)
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
        upto: bool = False,
        id: Optional[Any] = None,
        new_lease: bool = False,
    ) -> RateLimit:
        """Apply a policy to its key (or list of keys, for Multi, Sliding and All);
        ``id`` names the lease of a Lease policy (or of the Lease rules of an All;
        ``new_lease`` as in :meth:`all`)."""
        keys = list(keys) if isinstance(keys, (list, tuple)) else [keys]
        if isinstance(policy, All):
            return self._all(policy, keys, cost, at, id, refund, force, new_lease, upto)
        call = policy.call(keys, cost, at, id=id) if id is not None else policy.call(keys, cost, at)
        return self._run(settled(call, refund, force, upto))

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
            argv, fallback = (call.argv, None) if not self._twin_for(call) else self._twin_argv(call)[1:]
            reply, acked = _strict.run(self.client, argv, fallback, self.strict)
            return self.strict.settle(call.parse(reply, self._encode), acked, _strict.wrote(call))
        return drive(self._sending(call, kwargs), self._send)

    def _send(self, sent: Tuple[Tuple[Any, ...], dict]) -> Any:
        argv, kwargs = sent
        return self.client.execute_command(*argv, **kwargs)

    def _drive(self, plan: Any) -> Any:
        return drive(plan, self._run)

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
