"""RL.ALL across the slots of a Cluster: the rules grouped by the slot of their keys, one
RL.ALL per slot in ascending slot order, and when a slot denies, what the earlier slots
took given back (``REFUND`` of the same rules and cost, ``RL.RELEASE`` of the leases
they took), so that a refused request counts nowhere, as one RL.ALL would.

The plan is a generator of calls (each sent back its parsed result, or thrown the
exception it raised), driven by the blocking limiter (:func:`drive`) or the asyncio one
(:func:`adrive`), so that both settle a call the same way.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any, Awaitable, Callable, Dict, Generator, List, Optional, Sequence, Tuple

from .lease import Lease, release_call
from .policies import All, Ban, Call, Policy
from .results import RateLimit

Plan = Generator[Call, Any, Any]


def new_lease_id() -> str:
    """A random lease id (20 characters, as the module's own): made by the client, so
    that a call it gives up on can still be released."""
    return secrets.token_hex(10)


def holds_leases(policy: Policy) -> bool:
    """Whether a call of the policy takes a lease (a Lease, or an All with a Lease rule)."""
    if isinstance(policy, Lease):
        return True
    return isinstance(policy, All) and any(isinstance(rule, Lease) for rule in policy.rules)


def upto_call(call: Call) -> Call:
    """The call with ``UPTO`` after its other arguments: as much of its cost as fits
    now. The result's ``granted`` is the reply's last field, the units taken (0 when
    refused)."""
    parse = call.parse

    def parse_upto(reply: Any, encode: Any) -> RateLimit:
        return replace(parse(reply[:-1], encode), granted=int(reply[-1]))

    return replace(call, argv=call.argv + ("UPTO",), args=call.args + ("UPTO",), parse=parse_upto)


def settled(call: Call, refund: bool, force: bool, upto: bool = False) -> Call:
    """The call with ``REFUND`` or ``FORCE`` after its other arguments (settling a
    request after the fact: give back what it did not use, or record it whether it fits
    or not), or with ``UPTO`` (as much of the cost as fits now). One of them at most."""
    if upto:
        if refund or force:
            raise ValueError("upto cannot be given with refund or force: UPTO takes as much of the cost as fits now")
        return upto_call(call)
    if refund and force:
        raise ValueError("refund and force cannot be given together: a request is either given back or forced")
    if not (refund or force):
        return call
    flag = "REFUND" if refund else "FORCE"
    return replace(call, argv=call.argv + (flag,), args=call.args + (flag,))


def by_slot(slots: Sequence[int]) -> List[List[int]]:
    """The rules' positions (0-based) grouped by slot, in ascending slot order, each
    group in the call's order."""
    groups: Dict[int, List[int]] = {}
    for position, slot in enumerate(slots):
        groups.setdefault(slot, []).append(position)
    return [groups[slot] for slot in sorted(groups)]


def across_slots(
    policy: All,
    keys: Sequence[Any],
    slots: Sequence[int],
    cost: int,
    at: Any,
    id: Any,
    refund: bool,
    force: bool,
    new_lease: bool = False,
) -> Plan:
    """The plan of one RL.ALL whose keys are in several slots. Its result is the one RL.ALL
    would reply: when denied, the denying slot's binding rule (its place in the whole
    call); when allowed, the rule with the least remaining (the first on ties).

    A lease an earlier slot took is released after a denial when the id is the plan's
    own (``id`` None) or ``new_lease`` says the caller's id named no lease before: a
    renewal of a lease the caller holds cannot be undone, and is left as it is."""
    rules = list(policy.rules)
    if any(isinstance(rule, Ban) for rule in rules):
        raise ValueError(
            "a BAN rule cannot be settled across Cluster slots (a strike cannot be recorded "
            "atomically with the other slots' verdict): give the keys of the call one hash tag, "
            "e.g. {user42}:rate and {user42}:box"
        )
    if id is None and holds_leases(policy):
        id, new_lease = new_lease_id(), True
    # A refused peek, refund or forced call has nothing to give back: a peek and a
    # refused request wrote nothing, a refund is never refused, a forced request is paid.
    undo_on_denial = cost != 0 and not refund and not force
    groups = by_slot(slots)
    taken: List[Tuple[List[int], RateLimit]] = []
    for group in groups:
        sub = All([rules[p] for p in group], name=policy.name)
        sub_keys = [keys[p] for p in group]
        try:
            sub_id = id if holds_leases(sub) else None  # ID goes with a LEASE rule only
            result = yield settled(sub.call(sub_keys, cost, at, id=sub_id), refund, force)
        except Exception:
            if undo_on_denial:
                yield from _give_back(rules, keys, taken, cost, at, id if new_lease else None)
            raise
        if not result.allowed and undo_on_denial:
            yield from _give_back(rules, keys, taken, cost, at, id if new_lease else None)
            return _whole(policy, keys, group, result, id=None)
        taken.append((group, result))
    denied = [(g, r) for g, r in taken if not r.allowed]  # a peek, or a forced call
    if denied:
        group, result = min(denied, key=lambda gr: (-gr[1].retry_after_ms, gr[0][gr[1].rule - 1]))
        return _whole(policy, keys, group, result, id=None)
    group, result = min(taken, key=lambda gr: (gr[1].remaining, gr[0][gr[1].rule - 1]))
    return _whole(policy, keys, group, result, id=id if holds_leases(policy) else None)


def _give_back(rules: List[Policy], keys: Sequence[Any], taken: List[Tuple[List[int], RateLimit]], cost: int, at: Any, id: Any) -> Plan:
    """REFUND of what each earlier slot took (a LEASE rule takes no part in a refund),
    then RL.RELEASE of the leases it took (``id``; None: leave them). Best effort: a
    failure here leaves the units to their windows (and the leases to their ttl), and
    the call's own outcome stands."""
    for group, _ in taken:
        try:
            sub = All([rules[p] for p in group])
            if any(not isinstance(rules[p], Lease) for p in group):
                yield settled(sub.call([keys[p] for p in group], cost, at), True, False)
            for p in group:
                if isinstance(rules[p], Lease) and id is not None:
                    yield release_call(keys[p], id, at)
        except Exception:  # noqa: BLE001 - see above
            continue


def _whole(policy: All, keys: Sequence[Any], group: List[int], result: RateLimit, id: Any) -> RateLimit:
    """A slot's result as the whole call's: its binding rule's place among all the rules."""
    place = group[result.rule - 1] + 1
    five = (result.allowed, result.limit, result.remaining, result.retry_after_ms, result.reset_after_ms)
    return policy.result(keys, place, five, lease_id=id)


def drive(plan: Plan, run: Callable[[Call], Any]) -> Any:
    """Run a plan with a blocking ``run`` (a call in, its result out)."""
    try:
        call = next(plan)
        while True:
            try:
                outcome = run(call)
            except Exception as exc:  # noqa: BLE001 - handed to the plan
                call = plan.throw(exc)
            else:
                call = plan.send(outcome)
    except StopIteration as stop:
        return stop.value


async def adrive(plan: Plan, run: Callable[[Call], Awaitable[Any]]) -> Any:
    """Run a plan with an asyncio ``run``."""
    try:
        call = next(plan)
        while True:
            try:
                outcome = await run(call)
            except Exception as exc:  # noqa: BLE001 - handed to the plan
                call = plan.throw(exc)
            else:
                call = plan.send(outcome)
    except StopIteration as stop:
        return stop.value


def cluster_slots(client: Any, keys: Sequence[Any], encode: Callable[[Any], bytes]) -> Optional[List[int]]:
    """Each key's slot on a Cluster client (None on any other client)."""
    if not hasattr(client, "nodes_manager"):
        return None
    from redis.crc import key_slot

    return [key_slot(encode(k)) for k in keys]
