"""Local budgets: a hot key's limit spent in the process, a batch at a time.

``limiter.local_budget(policy, key, batch=100)`` takes ``COST batch UPTO`` from the
server (as much of a batch as the limit allows now) and answers ``take()`` from the
units it holds, without a round trip, until they run out; then it takes the next
batch. It never spends a unit the server did not grant, so the limit holds exactly
across every process; what it holds and has not spent it gives back (``REFUND``)
before the batch's window ends and when it is closed::

    with limiter.local_budget(Fixed(100_000, "1m"), "tpm:provider", batch=1_000) as budget:
        result = budget.take()              # a RateLimit, as every call returns
        if not result.allowed:
            return 429, ratelimit_headers(result)

:class:`LocalBudget` (a blocking limiter's, thread-safe) and :class:`AsyncLocalBudget`
(an asyncio limiter's, task-safe: ``await budget.take()``, ``aclose()``,
``async with``) decide alike: both run the decisions of :class:`_Budget`, which does no
input or output of its own.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import weakref
from contextlib import closing
from dataclasses import replace
from typing import Any, Callable, Dict, Generator, List, Optional, Tuple

import redis

from ._args import key_list
from ._middleware import _DEFAULT_BREAKER, CircuitBreaker, _monotonic_ms, bounded_client, breaker_of, is_outage
from ._slots import cluster_slots, holds_leases, settled, upto_call
from .policies import All, Ban, Call, Fixed, Gcra, Log, Multi, Policy, Sliding
from .results import RateLimit

log = logging.getLogger("redis_native_ratelimit")

#: How often (seconds) the background timer reads the clock while it holds units.
TICK_S = 0.5

#: A batch's units are spent and given back before its window ends, by this margin:
#: a tenth of the time left, at most this many milliseconds.
MARGIN_MS = 1000

# A result made from a template of its fields (a take answered from what is held costs
# a fraction of a frozen dataclass's __init__, which checks nothing here anyway).
_new_result = object.__new__


def _rate_rules(policy: Policy) -> List[Policy]:
    """The rules that count units: the policy, or an All's rules but its Ban."""
    if isinstance(policy, All):
        return [rule for rule in policy.rules if not isinstance(rule, Ban)]
    return [policy]


def check_policy(policy: Policy) -> None:
    """A local budget takes a rate policy whose command takes UPTO."""
    what = (
        "a local budget takes a rate policy (Fixed, Gcra, Multi, Sliding, Log, or All of "
        "them): it takes units in advance with COST n UPTO"
    )
    if holds_leases(policy):
        raise ValueError(
            f"{what}, and a Lease counts requests in flight, which cannot be taken in advance "
            "(RL.LEASE does not take UPTO): use limiter.lease() for it"
        )
    if isinstance(policy, Ban):
        raise ValueError(f"{what}; a Ban rule alone counts no units: put it in an All with a rate rule")
    if not isinstance(policy, (Fixed, Gcra, Multi, Sliding, Log, All)):
        raise TypeError(f"{what}, not {policy!r}")
    for rule in _rate_rules(policy):
        if isinstance(rule, Gcra) and rule.delay is not None:
            raise ValueError(f"{what}; Gcra with delay books a later slot, and UPTO is not given with DELAY")
    if isinstance(policy, All) and not _rate_rules(policy):
        raise ValueError(f"{what}; this All has no rate rule, only a Ban")


def gives_back(policy: Policy) -> bool:
    """Whether what a budget holds can be given back (REFUND) into the window it came
    from: one window (Fixed, Gcra, Multi with one limit), whose end the grant's reply
    tells. A Sliding or Log window gives back from its newest entries, which may be
    another process's (the units would come back into later windows than theirs), and
    with several windows the reply does not say when each ends."""
    rules = _rate_rules(policy)
    if len(rules) != 1:
        return False
    rule = rules[0]
    if isinstance(rule, (Fixed, Gcra)):
        return True
    return isinstance(rule, Multi) and len(list(rule.limits)) == 1


def capacity(policy: Policy) -> int:
    """The largest cost the policy can ever allow at once (every rule of an All)."""
    return min(q.limit for rule in _rate_rules(policy) for q in rule.quotas(1))


def horizon_ms(policy: Policy) -> Optional[int]:
    """The shortest window of the policy's rules (for Gcra the time its burst takes to
    come back): no unit is kept longer than that."""
    windows = [q.window_ms for rule in _rate_rules(policy) for q in rule.quotas(1) if q.window_ms is not None]
    return min(windows) if windows else None


class BudgetClosed(RuntimeError):
    """A take from a local budget that was closed."""


class _Budget:
    """The decisions of a local budget, shared by the blocking and the asyncio one, with
    no input or output: the callers hold the lock (blocking) or run on one event loop
    (asyncio) around each method, and do the calls these methods ask for."""

    def __init__(self, policy: Policy, keys: Tuple[Any, ...], batch: int, clock: Callable[[], float], fail_open: bool):
        self.policy = policy
        self.keys = keys
        self.batch = batch
        self.clock = clock
        self.fail_open = fail_open
        self.gives_back = gives_back(policy)
        self.horizon = horizon_ms(policy)
        self.capacity = capacity(policy)
        self._batch_call: Optional[Call] = None
        self.closed = False
        self.reset()
        self.denied: Optional[RateLimit] = None
        self.denied_at = 0.0
        self.deny_until = float("-inf")

    def reset(self) -> None:
        """Afresh: nothing held, nothing counted (a new budget, or a forked child, which
        must not spend what its parent holds); a closed budget stays closed."""
        self.held = 0
        self.deadline: Optional[float] = None  # no unit is spent from then on
        self.send_by = 0.0  # nor given back after this
        self.pending: List[Tuple[int, float]] = []  # (units, send_by) to give back
        self.refilling = False
        self.waiting = 0
        # The last grant: the fields of the allowed results, its remaining and reset.
        self.template: Optional[Dict[str, Any]] = None
        self.server_remaining = 0
        self.reset_ms = 0
        self.granted_at = 0.0
        self.limit = 0
        # What it counted (stats()).
        self.takes = self.allowed = self.denials = self.local_denials = self.spent = 0
        self.server_calls = self.refills = self.granted_units = self.given_back = 0
        self.dropped = self.unavailable = 0

    # -- what a take does ---------------------------------------------------------------

    def expire(self, now: float) -> None:
        """Past the deadline: what is held is no longer spent; it is given back while
        there is time (before ``send_by``), else dropped (it returns when its window
        ends)."""
        if self.held:
            if self.gives_back and now < self.send_by:
                self.pending.append((self.held, self.send_by))
            else:
                self.dropped += self.held
            self.held = 0
        self.deadline = None

    def spend(self, cost: int, now: float) -> RateLimit:
        """An allowed take from what is held: the last grant's fields, ``remaining`` the
        server's then plus what is still held, ``reset_after_ms`` counted down."""
        self.held -= cost
        self.spent += cost
        self.allowed += 1
        result = _new_result(RateLimit)
        fields = result.__dict__
        fields.update(self.template)  # type: ignore[arg-type]
        fields["remaining"] = self.server_remaining + self.held
        left = self.reset_ms - int(now - self.granted_at)
        fields["reset_after_ms"] = left if left > 0 else 0
        return result

    def local_denial(self, now: float) -> RateLimit:
        """A take within the server's last retry_after: its denial, times counted down."""
        assert self.denied is not None
        self.denials += 1
        self.local_denials += 1
        result = _new_result(RateLimit)
        fields = result.__dict__
        fields.update(self.denied.__dict__)
        fields["remaining"] = self.denied.remaining + self.held
        retry = int(-(-(self.deny_until - now) // 1))
        fields["retry_after_ms"] = retry if retry > 1 else 1
        reset = self.denied.reset_after_ms - int(now - self.denied_at)
        fields["reset_after_ms"] = reset if reset > 0 else 0
        return result

    def step(self, cost: int) -> Tuple[str, Any]:
        """What a take does now: ("result", the RateLimit), ("wait", None) for the refill
        in flight, or ("refill", units to ask for): then the caller calls the server and
        hands the outcome to :meth:`granted` or :meth:`failed`."""
        if self.closed:
            raise BudgetClosed("this local budget is closed")
        now = self.clock()
        if self.deadline is not None and now >= self.deadline:
            self.expire(now)
        if self.held >= cost:
            return "result", self.spend(cost, now)
        if now < self.deny_until:
            return "result", self.local_denial(now)
        if self.refilling:
            return "wait", None
        self.refilling = True
        return "refill", max(self.batch, cost - self.held)

    def refill_call(self, units: int) -> Call:
        if units == self.batch:  # the usual one, made once
            if self._batch_call is None:
                self._batch_call = upto_call(self.policy.call(list(self.keys), units))
            return self._batch_call
        return upto_call(self.policy.call(list(self.keys), units))

    def refund_call(self, units: int) -> Call:
        return settled(self.policy.call(list(self.keys), units), True, False)

    def granted(self, result: RateLimit, sent_at: float, cost: int) -> Optional[RateLimit]:
        """The server's reply to a refill sent at ``sent_at``: the units join what is
        held, and the take of ``cost`` is answered (None: the budget was closed
        meanwhile, the units are given back)."""
        self.refilling = False
        self.server_calls += 1
        self.refills += 1
        k = int(result.granted or 0) if result.allowed else 0
        self.limit = result.limit
        if k > 0:
            self.granted_units += k
            self._hold(k, result, sent_at)
        else:
            # Refused: later takes within its retry_after are refused here.
            denied = _new_result(RateLimit)
            denied.__dict__.update(result.__dict__, granted=None)
            self.denied = denied
            self.denied_at = sent_at
            self.deny_until = sent_at + max(result.retry_after_ms, 1)
        if self.closed:
            self.expire(self.clock())
            return None
        now = self.clock()
        if self.deadline is not None and now >= self.deadline:
            self.expire(now)
        if self.held >= cost:
            return self.spend(cost, now)
        self.denials += 1
        if k == 0:
            if not self.held:
                return self.denied
            return replace(self.denied, remaining=self.denied.remaining + self.held)
        # The server had less than the take needs: refused, what it gave stays held for
        # smaller takes; the take of this cost fits once the state is full again.
        return replace(
            result,
            allowed=False,
            remaining=result.remaining + self.held,
            retry_after_ms=max(1, result.reset_after_ms),
            granted=None,
        )

    def _hold(self, k: int, result: RateLimit, sent_at: float) -> None:
        first = self.held == 0  # else the units held keep their earlier deadline
        self.held += k
        self.server_remaining = result.remaining
        self.reset_ms = result.reset_after_ms
        self.granted_at = sent_at
        template = dict(result.__dict__)
        template["retry_after_ms"] = -1
        template["granted"] = None
        self.template = template
        life = result.reset_after_ms
        if self.horizon is not None:
            life = min(life, self.horizon)
        margin = min(MARGIN_MS, life / 10)
        deadline = sent_at + life - margin
        send_by = sent_at + life - margin / 2
        if first or self.deadline is None or deadline < self.deadline:
            self.deadline, self.send_by = deadline, send_by

    def failed(self) -> RateLimit:
        """A refill the server did not answer (or a breaker that is open): fail open
        (allowed, nothing spent) or closed (refused, retry in 1 s); ``unavailable``."""
        self.unavailable += 1
        if self.fail_open:
            self.allowed += 1
            return RateLimit(True, self.limit, 0, -1, 0, unavailable=True)
        self.denials += 1
        return RateLimit(False, self.limit, 0, 1000, 0, unavailable=True)

    # -- giving back ----------------------------------------------------------------------

    def due(self, now: float) -> Optional[Tuple[int, float]]:
        """Units to give back now (and the time by which the call must be sent), if any:
        the budget's deadline has come, or it was closed."""
        if self.deadline is not None and now >= self.deadline:
            self.expire(now)
        while self.pending:
            units, send_by = self.pending.pop(0)
            if now < send_by:
                return units, send_by
            self.dropped += units
        return None

    def close(self, now: float) -> None:
        self.closed = True
        self.expire(now)

    def give_back_now(self, now: float) -> Optional[Tuple[int, float]]:
        """Everything held, to give back now (:meth:`LocalBudget.give_back`)."""
        if self.held and self.gives_back and self.deadline is not None and now < self.send_by:
            self.pending.append((self.held, self.send_by))
            self.held = 0
            self.deadline = None
        return self.due(now)

    def gave_back(self, units: int, done: bool) -> None:
        self.server_calls += 1
        if done:
            self.given_back += units

    #: What stats() says: its names, and the attribute behind each.
    STATS = (
        ("takes", "takes"),
        ("allowed", "allowed"),
        ("denials", "denials"),
        ("local_denials", "local_denials"),
        ("spent", "spent"),
        ("server_calls", "server_calls"),
        ("refills", "refills"),
        ("granted", "granted_units"),
        ("given_back", "given_back"),
        ("dropped", "dropped"),
        ("unavailable", "unavailable"),
        ("held", "held"),
        ("waiting", "waiting"),
    )

    def stats(self) -> Dict[str, int]:
        return {name: getattr(self, attr) for name, attr in self.STATS}


def retry_is_safe(exc: BaseException) -> bool:
    """Whether a failed give-back certainly did not apply, so that sending it again
    cannot give the units back twice: the server answered with an error, or the
    connection could not be opened. A timeout, or a connection lost after the call was
    sent, may have applied."""
    if isinstance(exc, redis.exceptions.ResponseError):
        return True
    return isinstance(exc, redis.exceptions.ConnectionError) and "connecting to" in str(exc).lower()


def _budget_keys(limiter: Any, policy: Policy, key: Any) -> Tuple[Any, ...]:
    keys = key_list(key, "local_budget")
    if not keys:
        raise ValueError("local_budget: a key is needed")
    if isinstance(policy, Multi) and len(keys) != 1:
        raise ValueError(f"local_budget: a Multi policy takes one key here, not {len(keys)}")
    if isinstance(policy, (Fixed, Gcra, Log)) and len(keys) != 1:
        raise ValueError(f"local_budget: a {type(policy).__name__} policy takes one key, not {len(keys)}")
    if isinstance(policy, All) and len(keys) != len(list(policy.rules)):
        raise ValueError(f"local_budget: the All policy takes one key per rule: {len(list(policy.rules))} rules, {len(keys)} keys")
    slots = cluster_slots(limiter.client, keys, limiter._encode) if len(keys) > 1 else None
    if slots is not None and len(set(slots)) > 1:
        raise ValueError(
            "local_budget: the keys of a budget must share a Cluster slot (one call takes each batch): "
            "give them one hash tag, e.g. {tenant7}:rate and {tenant7}:day"
        )
    return keys


def _check_batch(batch: Any) -> int:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch: the units taken from the server at a time, an integer of at least 1, not {batch!r}")
    return batch


def _check_cost(cost: Any, most: int) -> None:
    """Called when ``cost`` is not a plain int from 1 to the policy's capacity (an int
    subclass may be one)."""
    if isinstance(cost, bool) or not isinstance(cost, int) or cost < 1:
        raise ValueError(f"a take costs an integer of at least 1, not {cost!r}")
    if cost > most:
        raise ValueError(f"a take of {cost} can never be allowed: the policy's capacity is {most}")


#: What a plan yields when it waits for the batch another take is taking (then it is sent
#: None); it yields a :class:`Call` to have it run (then it is sent the reply, or thrown
#: the call's exception).
WAIT = "wait"

Plan = Generator[Any, Any, Any]


class _Common:
    """What both budgets share around the decisions: settings, breaker, log, and the
    plans of a take and of a give-back (generators of the calls they need, run by the
    blocking budget with its lock held between calls, and by the asyncio one on its
    event loop)."""

    def __init__(
        self,
        limiter: Any,
        policy: Policy,
        key: Any,
        batch: int = 100,
        *,
        fail_open: bool = True,
        timeout_ms: Optional[float] = 250,
        breaker: Any = _DEFAULT_BREAKER,
        clock: Optional[Callable[[], float]] = None,
        timer: bool = True,
        logger: Optional[logging.Logger] = None,
    ):
        """A budget of ``policy`` on ``key`` (see :meth:`RateLimiter.local_budget`)."""
        check_policy(policy)
        self.policy = policy
        self.keys = _budget_keys(limiter, policy, key)
        self.batch = _check_batch(batch)
        self.fail_open = bool(fail_open)
        self.breaker: Optional[CircuitBreaker] = breaker_of(breaker)
        self.clock = clock or _monotonic_ms
        self.timer = timer
        self.log = logger or log
        self._b = _Budget(policy, self.keys, self.batch, self.clock, self.fail_open)
        self._timer_until: Optional[float] = None  # when the timer wakes by itself
        self._connect(limiter, timeout_ms)

    def _connect(self, limiter: Any, timeout_ms: Optional[float]) -> None:  # pragma: no cover - per budget
        raise NotImplementedError

    @property
    def key(self) -> Any:
        return self.keys[0] if len(self.keys) == 1 else list(self.keys)

    def _start_take(self, cost: int) -> None:
        """A take's checks before its first step: the cost, the budget open; the take
        counted."""
        b = self._b
        if cost.__class__ is not int or cost < 1 or cost > b.capacity:
            _check_cost(cost, b.capacity)
        if b.closed:
            raise BudgetClosed("this local budget is closed")
        b.takes += 1

    def _taking(self, cost: int, first: Tuple[str, Any]) -> Plan:
        """The rest of a take whose first step (``b.step``) was ``first``: the batch
        another take is taking, or a new batch (what fell due given back first)."""
        b = self._b
        what, value = first
        while what != "refill":
            if what == "result":
                return value
            b.waiting += 1
            try:
                yield WAIT
            finally:
                b.waiting -= 1
            what, value = b.step(cost)
        try:
            pending = b.due(self.clock())
            if pending is not None:
                yield from self._giving_back(*pending)
            return (yield from self._refilling(value, cost))
        finally:
            b.refilling = False

    def _refilling(self, units: int, cost: int) -> Plan:
        b = self._b
        if not self._may_call():
            return b.failed()
        sent_at = self.clock()
        try:
            reply = yield b.refill_call(units)
        except Exception as exc:
            if not is_outage(exc):
                if isinstance(exc, redis.exceptions.ResponseError):
                    self._answered()  # the server answered: the error is the call's own
                raise
            self._outage(exc, "refill")
            return b.failed()
        self._answered()
        result = b.granted(reply, sent_at, cost)
        if result is None:  # closed meanwhile: what came goes back
            pending = b.due(self.clock())
            if pending is not None:
                yield from self._giving_back(*pending)
            raise BudgetClosed("this local budget was closed while it took a batch")
        if b.held and self.timer:
            self._granted_to_timer()
        return result

    def _giving_back(self, units: int, send_by: float) -> Plan:
        """REFUND of ``units``; once more if it certainly did not apply and there is
        still time; else dropped (they return when their window ends)."""
        b = self._b
        for attempt in (1, 2):
            try:
                yield b.refund_call(units)
            except GeneratorExit:  # the caller stopped waiting: its fate is unknown
                b.dropped += units
                raise
            except Exception as exc:  # noqa: BLE001 - dropped below, or raised if a bug
                b.gave_back(units, False)
                if not is_outage(exc) and not isinstance(exc, redis.exceptions.ResponseError):
                    raise
                if attempt == 1 and retry_is_safe(exc) and self.clock() < send_by:
                    continue
                b.dropped += units
                self.log.warning("a local budget's give-back of %d units on %s failed (%s): dropped", units, self.key, exc)
                return 0
            b.gave_back(units, True)
            return units
        return 0  # pragma: no cover - the loop returns

    def _due_plan(self) -> Optional[Plan]:
        """The timer's step: the give-back of what fell due, if anything did."""
        pending = self._b.due(self.clock())
        return None if pending is None else self._giving_back(*pending)

    def _timer_wait(self) -> Optional[float]:
        """How long the timer sleeps (seconds; None: until a batch comes)."""
        b = self._b
        if b.deadline is None:
            self._timer_until = None
            return None
        now = self.clock()
        wait = max(0.0, min(TICK_S, (b.deadline - now) / 1000))
        self._timer_until = now + wait * 1000
        return wait

    def _timer_must_wake(self) -> bool:
        """A batch came whose deadline is before the timer's next look."""
        deadline = self._b.deadline
        return deadline is not None and (self._timer_until is None or deadline < self._timer_until)

    def _granted_to_timer(self) -> None:  # pragma: no cover - per budget
        raise NotImplementedError

    def _outage(self, exc: BaseException, what: str) -> None:
        """A call the server did not answer: the breaker opens, said once per opening."""
        opened = self.breaker.failure() if self.breaker is not None else True
        if opened:
            self.log.warning(
                "rate limiter unavailable (%s: %s) during a local budget's %s on %s: takes are %s%s",
                type(exc).__name__,
                exc,
                what,
                ", ".join(str(k) for k in self.keys),
                "allowed without counting" if self.fail_open else "refused",
                "" if self.breaker is None else f" without calling it for {self.breaker.cooldown_ms:g} ms",
            )

    def _answered(self) -> None:
        if self.breaker is not None and self.breaker.success():
            self.log.warning("rate limiter available again: local budget on %s takes batches", ", ".join(str(k) for k in self.keys))

    def _may_call(self) -> bool:
        return self.breaker is None or self.breaker.allow()

    def stats(self) -> Dict[str, int]:
        """``takes`` (calls of take), ``allowed``, ``denials`` (of which
        ``local_denials``, answered without a call), ``spent`` (units), ``server_calls``
        (batches taken, ``refills``, and give-backs), ``granted`` (units the server
        gave), ``given_back``, ``dropped`` (held units left to their window),
        ``unavailable`` (takes answered without the server: fail open or closed),
        ``held`` and ``waiting`` (takers waiting for a batch) now."""
        return self._b.stats()


# Blocking budgets still open, closed (what they hold given back) when the interpreter
# exits; and forgotten in a forked child, which must not spend what its parent holds.
_OPEN: "weakref.WeakSet[LocalBudget]" = weakref.WeakSet()
_ALL_BUDGETS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _close_at_exit() -> None:
    for budget in list(_OPEN):
        try:
            budget.close()
        except Exception:  # noqa: BLE001 - the units return when their window ends
            pass


def _forget_in_child() -> None:
    for budget in list(_ALL_BUDGETS):
        budget._after_fork()


atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class LocalBudget(_Common):
    """A blocking limiter's local budget (:meth:`RateLimiter.local_budget`), safe to
    share between threads: ``take(cost=1)``, ``give_back()``, ``close()`` (or ``with``),
    ``stats()``."""

    def _connect(self, limiter: Any, timeout_ms: Optional[float]) -> None:
        self.limiter = _bounded(limiter, timeout_ms)
        self._locks()
        _OPEN.add(self)
        _ALL_BUDGETS.add(self)

    def _locks(self) -> None:
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # takers waiting for a batch
        self._tcond = threading.Condition(lock)  # the timer, woken only when it must be
        self._thread: Optional[threading.Thread] = None

    def _after_fork(self) -> None:
        self._locks()
        self._b.reset()

    def take(self, cost: int = 1) -> RateLimit:
        """Take ``cost`` units: from what the budget holds, else from a new batch (one
        call at a time; other takers wait for it). A :class:`RateLimit`: allowed, or
        refused with the server's numbers (``retry_after_ms``, headers)."""
        b = self._b
        with self._cond:
            # The common case inline (a call less): a cost that what is held pays for.
            if cost.__class__ is int and 0 < cost <= b.held and cost <= b.capacity and not b.closed:
                now = self.clock()
                if b.deadline is None or now < b.deadline:
                    b.takes += 1
                    return b.spend(cost, now)
            self._start_take(cost)
            first = b.step(cost)  # what is held, or a refusal within the server's wait, needs no plan
            if first[0] == "result":
                return first[1]
            return self._drive(self._taking(cost, first), self._cond)

    def _drive(self, plan: Plan, cond: threading.Condition) -> Any:
        """Run a plan, the lock held but for its calls and its waits; the takers
        waiting for a batch are woken when a plan that called ends."""
        called = False
        with closing(plan):  # closed however it ends: its own clean-up runs
            try:
                step = next(plan)
                while True:
                    if step is WAIT:
                        cond.wait()
                        step = plan.send(None)
                        continue
                    called = True
                    cond.release()
                    try:
                        reply = self.limiter._run(step)
                    except Exception as exc:  # noqa: BLE001 - handed to the plan
                        cond.acquire()
                        step = plan.throw(exc)
                        continue
                    except BaseException:
                        cond.acquire()
                        raise
                    cond.acquire()
                    step = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            finally:
                if called:
                    self._cond.notify_all()

    def _granted_to_timer(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._timer_loop, name="redis_native_ratelimit budget", daemon=True)
            self._thread.start()
        elif self._timer_must_wake():
            self._tcond.notify()

    def _timer_loop(self) -> None:
        """Gives back what is held when its deadline comes (the clock read every
        TICK_S at most)."""
        b = self._b
        with self._tcond:
            while not (b.closed and not b.pending):
                try:
                    plan = self._due_plan()
                    if plan is not None:
                        self._drive(plan, self._tcond)
                    else:
                        self._tcond.wait(self._timer_wait())
                except Exception as exc:  # noqa: BLE001 - the timer goes on
                    self.log.warning("a local budget's timer on %s: %s: %s", self.key, type(exc).__name__, exc)

    def give_back(self) -> int:
        """Give back now what the budget holds (REFUND; a Sliding or Log budget keeps
        it, see :func:`gives_back`): the units given back."""
        with self._cond:
            pending = self._b.give_back_now(self.clock())
            return 0 if pending is None else self._drive(self._giving_back(*pending), self._cond)

    def close(self) -> None:
        """Give back what the budget holds; takes after this raise :class:`BudgetClosed`."""
        with self._cond:
            if self._b.closed:
                return
            self._b.close(self.clock())
            self._tcond.notify_all()
            _OPEN.discard(self)
            plan = self._due_plan()
            if plan is not None:
                self._drive(plan, self._cond)

    def stats(self) -> Dict[str, int]:
        with self._cond:
            return self._b.stats()

    stats.__doc__ = _Common.stats.__doc__

    def __enter__(self) -> "LocalBudget":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<LocalBudget {self.policy!r} on {self.key!r}, batch {self.batch}, holding {self._b.held}>"


def _bounded(limiter: Any, timeout_ms: Optional[float]) -> Any:
    """The limiter whose calls give up after ``timeout_ms``: on a ``redis.Redis``, a
    copy of its client with that socket timeout and no retries (as the WSGI
    middleware's); other clients as they are."""
    if timeout_ms is None:
        return limiter
    _check_timeout(timeout_ms)
    client = bounded_client(limiter.client, timeout_ms / 1000)
    if client is limiter.client:
        return limiter
    return type(limiter)(client, twins=limiter.twins, lua_dir=limiter.lua_dir, strict=limiter.strict, logger=limiter.logger)


def _check_timeout(timeout_ms: float) -> None:
    if timeout_ms <= 0:
        raise ValueError(f"timeout_ms: a positive number of milliseconds, or None for the client's own, not {timeout_ms!r}")


class AsyncLocalBudget(_Common):
    """An asyncio limiter's local budget (:meth:`AsyncRateLimiter.local_budget`), safe
    to share between the tasks of one event loop: ``await take(cost=1)``,
    ``await give_back()``, ``await aclose()`` (or ``async with``), ``stats()``."""

    def _connect(self, limiter: Any, timeout_ms: Optional[float]) -> None:
        if timeout_ms is not None:
            _check_timeout(timeout_ms)
        self.limiter = limiter
        self.timeout = None if timeout_ms is None else timeout_ms / 1000
        self._refill_done: Optional[asyncio.Future] = None
        self._timer_task: Optional[asyncio.Task] = None
        self._wake: Optional[asyncio.Event] = None
        _ALL_BUDGETS.add(self)

    def _after_fork(self) -> None:
        """Afresh in a forked child, which must not spend what its parent holds."""
        self._refill_done = self._timer_task = self._wake = None
        self._b.reset()

    async def take(self, cost: int = 1) -> RateLimit:
        """As :meth:`LocalBudget.take`, awaited."""
        self._start_take(cost)
        first = self._b.step(cost)  # what is held, or a refusal within the server's wait, needs no plan
        if first[0] == "result":
            return first[1]
        return await self._drive(self._taking(cost, first), take=True)

    async def _drive(self, plan: Plan, take: bool = False) -> Any:
        """Run a plan on the event loop; a take that calls is the batch the others wait
        for until it ends."""
        made = False
        step = None
        with closing(plan):  # closed however it ends (a cancelled task too)
            try:
                while True:
                    step = plan.send(None) if step is None or step is WAIT else step
                    if step is WAIT:
                        await asyncio.shield(self._refill_done)  # type: ignore[arg-type]
                        continue
                    if take and not made:
                        self._refill_done, made = asyncio.get_running_loop().create_future(), True
                    run = self.limiter._run(step)
                    try:
                        reply = await (run if self.timeout is None else asyncio.wait_for(run, self.timeout))
                    except Exception as exc:  # noqa: BLE001 - handed to the plan
                        step = plan.throw(exc)
                    else:
                        step = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            finally:
                if made:
                    done, self._refill_done = self._refill_done, None
                    if done is not None and not done.done():
                        done.set_result(None)

    def _granted_to_timer(self) -> None:
        if self._timer_task is None:
            self._wake = asyncio.Event()
            self._timer_task = asyncio.ensure_future(self._timer_loop())
        elif self._wake is not None and self._timer_must_wake():
            self._wake.set()

    async def _timer_loop(self) -> None:
        wake = self._wake
        assert wake is not None
        while not self._b.closed:
            try:
                plan = self._due_plan()
                if plan is not None:
                    await self._drive(plan)
                    continue
                wake.clear()
                wait = self._timer_wait()
                try:
                    await asyncio.wait_for(wake.wait(), wait)
                except asyncio.TimeoutError:
                    pass
            except Exception as exc:  # noqa: BLE001 - the timer goes on
                self.log.warning("a local budget's timer on %s: %s: %s", self.key, type(exc).__name__, exc)

    async def give_back(self) -> int:
        """As :meth:`LocalBudget.give_back`, awaited."""
        pending = self._b.give_back_now(self.clock())
        return 0 if pending is None else await self._drive(self._giving_back(*pending))

    async def aclose(self) -> None:
        """Give back what the budget holds; takes after this raise :class:`BudgetClosed`."""
        b = self._b
        if b.closed:
            return
        b.close(self.clock())
        task, self._timer_task = self._timer_task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - it only gives back
                pass
        plan = self._due_plan()
        if plan is not None:
            await self._drive(plan)

    async def __aenter__(self) -> "AsyncLocalBudget":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AsyncLocalBudget {self.policy!r} on {self.key!r}, batch {self.batch}, holding {self._b.held}>"
