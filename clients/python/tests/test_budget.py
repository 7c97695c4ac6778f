"""Local budgets against real servers (the module; RL.* ... UPTO): takes answered from
batches, never a unit more than the server granted across threads, asyncio tasks and
processes (checked against the key's own state and the units each budget took), what
is held given back on close and before its window ends (the budget's clock is a fake
one the test moves, or the give-back is called directly), a refusal's numbers and
headers taken from the server's reply, one refill in flight shared by every taker
(server calls counted), fail open and closed, and the policies a budget refuses.

No assertion depends on how fast the machine is: a server stalled with CLIENT PAUSE
can only end a call by its timeout, and a test that waits for a background task waits
for the state it must reach, never for a time."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, List, Tuple

import pytest
import redis
import redis.asyncio
import redis.cluster

from conftest import Clock
from redis_native_ratelimit import (
    All,
    Ban,
    BudgetClosed,
    CircuitBreaker,
    Fixed,
    Gcra,
    Lease,
    Log,
    Multi,
    RateLimit,
    RateLimiter,
    Sliding,
    ratelimit_headers,
)
from redis_native_ratelimit.asyncio import AsyncRateLimiter
from redis_native_ratelimit.budget import TICK_S
from test_lease import PATIENT, wait_for

# wait_for: a test waits for a state a background task or other threads must reach,
# then checks it (PATIENT seconds at most: never a measure of speed).


async def await_for(check, what):
    deadline = time.monotonic() + PATIENT
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.01)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Calls:
    """What a recording client sent (each argv, before it is sent) and what came back."""

    def __init__(self) -> None:
        self.sent: List[Tuple[str, ...]] = []
        self.replies: List[Tuple[Tuple[str, ...], Any]] = []

    def limiter_calls(self, flag: str = "") -> List[Tuple[str, ...]]:
        return [a for a in self.sent if a[0].startswith("RL.") and (not flag or flag in a)]

    @property
    def refills(self) -> int:
        return len(self.limiter_calls("UPTO"))

    @property
    def refunds(self) -> List[int]:
        return [int(a[a.index("COST") + 1]) if "COST" in a else 1 for a in self.limiter_calls("REFUND")]


class Recording(redis.Redis):
    """A real client that records the limiter calls it makes."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.calls = Calls()

    def execute_command(self, *args: Any, **options: Any) -> Any:
        argv = tuple(_text(a) for a in args)
        self.calls.sent.append(argv)
        reply = super().execute_command(*args, **options)
        self.calls.replies.append((argv, reply))
        return reply


class ARecording(redis.asyncio.Redis):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.calls = Calls()

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        argv = tuple(_text(a) for a in args)
        self.calls.sent.append(argv)
        reply = await super().execute_command(*args, **options)
        self.calls.replies.append((argv, reply))
        return reply


@pytest.fixture
def recording(server):
    c = Recording(port=server.port)
    yield c
    c.close()


def count_of(plain, key) -> int:
    value = plain.get(key)
    return 0 if value is None else int(value)


# -- one budget, every policy ------------------------------------------------------------

HOUR = "1h"
# A GCRA period so long that no unit comes back while a test runs, however slow.
MONTH = "30d"

POLICIES = {
    "fixed": (Fixed(20, HOUR), 1, True),
    "gcra": (Gcra(max_burst=19, count=20, period=MONTH), 1, True),
    "multi": (Multi([(HOUR, 20)]), 1, True),
    "multi-two-windows": (Multi([(HOUR, 20), ("1d", 50)]), 1, False),
    "sliding": (Sliding([(HOUR, 20)]), 1, False),
    "log": (Log(20, HOUR), 1, False),
    "all-one-rule": (All([Fixed(20, HOUR)]), 1, True),
    "all-with-a-ban": (All([Fixed(20, HOUR), Ban(3, "1m", "1h")]), 2, True),
    "all-two-rules": (All([Gcra(19, 20, MONTH), Fixed(30, "1d")]), 2, False),
}


@pytest.mark.parametrize("name", list(POLICIES))
def test_takes_come_from_batches_and_close_gives_back_what_is_left(name, server, recording, tag):
    policy, nkeys, gives_back = POLICIES[name]
    keys = [f"{tag}:{name}:{i}" for i in range(nkeys)]
    key = keys[0] if nkeys == 1 else keys
    rl = RateLimiter(recording)
    peek = RateLimiter(redis.Redis(port=server.port))
    budget = rl.local_budget(policy, key, batch=6, timeout_ms=None)
    taken = [budget.take() for _ in range(10)]
    assert all(t.allowed for t in taken)
    # Two batches of 6: the server counts 12, the budget holds 2.
    assert recording.calls.refills == 2
    assert [a[a.index("COST") + 1] for a in recording.calls.limiter_calls("UPTO")] == ["6", "6"]
    assert peek.check(policy, key, cost=0).remaining == 8
    assert budget.stats()["held"] == 2
    # remaining: what the server had left at the last batch, plus what the budget holds.
    assert taken[-1].remaining == 8 + 2 and taken[0].remaining == 14 + 5
    assert taken[-1].limit == 20 and ratelimit_headers(taken[-1])["RateLimit-Remaining"] == "10"
    budget.close()
    stats = budget.stats()
    if gives_back:
        assert recording.calls.refunds == [2]
        assert peek.check(policy, key, cost=0).remaining == 10  # exactly what was spent
        assert (stats["given_back"], stats["dropped"]) == (2, 0)
    else:
        # A window whose give-back could land in another window keeps the units counted
        # until its window passes.
        assert recording.calls.refunds == []
        assert peek.check(policy, key, cost=0).remaining == 8
        assert (stats["given_back"], stats["dropped"]) == (0, 2)
    assert stats["spent"] == 10 and stats["granted"] == 12 and stats["held"] == 0
    assert stats["takes"] == 10 and stats["refills"] == 2 and stats["server_calls"] == 2 + (1 if gives_back else 0)
    with pytest.raises(BudgetClosed):
        budget.take()
    budget.close()  # twice: nothing more
    assert budget.stats() == stats
    peek.client.close()


def test_a_take_larger_than_the_batch_asks_for_what_it_needs(recording, plain, tag):
    key = f"{tag}:big"
    budget = RateLimiter(recording).local_budget(Fixed(1000, HOUR), key, batch=10, timeout_ms=None)
    assert budget.take(3).allowed  # a batch of 10; 7 held
    assert budget.take(250).allowed  # 7 held: COST 243 UPTO
    assert [a[a.index("COST") + 1] for a in recording.calls.limiter_calls("UPTO")] == ["10", "243"]
    assert count_of(plain, key) == 253 and budget.stats()["held"] == 0
    budget.close()


def test_a_take_the_server_cannot_cover_is_refused_and_the_units_stay_for_smaller_ones(recording, plain, tag):
    key = f"{tag}:partial"
    RateLimiter(plain).fixed(key, 100, HOUR, cost=70)  # another process took 70
    budget = RateLimiter(recording).local_budget(Fixed(100, HOUR), key, batch=10, timeout_ms=None)
    refused = budget.take(50)  # COST 50 UPTO: only 30 fit, and are taken
    assert not refused.allowed and refused.retry_after_ms >= 1
    assert refused.remaining == 30  # what the budget holds: smaller takes fit
    assert count_of(plain, key) == 100 and budget.stats()["held"] == 30
    assert [budget.take(10).allowed for _ in range(3)] == [True, True, True]
    assert recording.calls.refills == 1
    budget.close()
    assert count_of(plain, key) == 100


# -- a refusal -----------------------------------------------------------------------------


def test_a_refusal_has_the_servers_numbers_and_later_ones_within_its_wait_make_no_call(recording, plain, tag):
    key = f"{tag}:full"
    policy = Gcra(max_burst=4, count=5, period=MONTH)
    RateLimiter(plain).gcra(key, 4, 5, MONTH, cost=5)  # full: 5 of 5
    clock = Clock()
    budget = RateLimiter(recording).local_budget(policy, key, batch=10, timeout_ms=None, clock=clock, timer=False)
    refused = budget.take()
    assert not refused.allowed
    (argv, reply), = [(a, r) for a, r in recording.calls.replies if "UPTO" in a]
    assert [int(x) for x in reply[:5]] + [int(reply[-1])] == [1, 5, 0, int(reply[3]), int(reply[4]), 0]
    server_said = RateLimit(False, int(reply[1]), int(reply[2]), int(reply[3]), int(reply[4]))
    assert refused == server_said
    assert ratelimit_headers(refused) == ratelimit_headers(policy.call([key]).parse(reply[:-1], lambda v: v))
    assert ratelimit_headers(refused)["Retry-After"] == str(-(-int(reply[3]) // 1000))
    # Within its retry_after: refused here, the wait counted down, no call.
    clock.now += 100_000
    again = budget.take()
    assert not again.allowed and recording.calls.refills == 1
    assert again.retry_after_ms == int(reply[3]) - 100_000
    assert again.reset_after_ms == int(reply[4]) - 100_000
    assert again.limit == 5 and again.remaining == 0
    assert ratelimit_headers(again)["Retry-After"] == str(-(-(int(reply[3]) - 100_000) // 1000))
    # Past it: the server is asked again (still full: the real time has not passed).
    clock.now += int(reply[3])
    assert not budget.take().allowed and recording.calls.refills == 2
    stats = budget.stats()
    assert (stats["denials"], stats["local_denials"], stats["allowed"]) == (3, 1, 0)
    budget.close()


# -- giving back before the window ends ------------------------------------------------------


def test_units_past_their_deadline_are_never_spent_and_are_given_back(recording, plain, tag):
    """The deadline: the grant's reset_after less a margin (a tenth of it, at most 1 s).
    Before it, takes spend what is held; from it, what is held is given back (REFUND)
    before the next batch, or dropped once too late to give back."""
    key = f"{tag}:deadline"
    clock = Clock()
    budget = RateLimiter(recording).local_budget(Fixed(100, HOUR), key, batch=10, timeout_ms=None, clock=clock, timer=False)
    start = clock.now
    assert budget.take().allowed
    reset = int(recording.calls.replies[-1][1][4])  # the window's end, from the reply
    deadline = start + reset - 1000
    clock.now = deadline - 1
    assert budget.take().allowed and recording.calls.refills == 1  # still from the batch
    assert budget.stats()["held"] == 8
    clock.now = deadline  # due: the 8 go back, then a new batch
    assert budget.take().allowed
    assert recording.calls.refunds == [8] and recording.calls.refills == 2
    assert count_of(plain, key) == 10 - 8 + 10
    # Too late to give back (past the deadline's half margin): dropped, never spent.
    clock.now += reset - 400
    assert budget.take().allowed
    assert recording.calls.refunds == [8] and recording.calls.refills == 3
    stats = budget.stats()
    assert (stats["given_back"], stats["dropped"], stats["held"], stats["spent"]) == (8, 9, 9, 4)
    assert count_of(plain, key) == 22  # the dropped 9 stay counted: they return with the window
    budget.close()
    assert count_of(plain, key) == 13


def test_give_back_now(recording, plain, tag):
    key = f"{tag}:now"
    budget = RateLimiter(recording).local_budget(Gcra(max_burst=99, count=100, period=MONTH), key, batch=30, timeout_ms=None)
    assert budget.take(5).allowed
    peek = RateLimiter(plain)
    assert peek.gcra(key, 99, 100, MONTH, cost=0).remaining == 70
    assert budget.give_back() == 25
    assert peek.gcra(key, 99, 100, MONTH, cost=0).remaining == 95
    assert budget.give_back() == 0  # nothing held
    assert budget.take().allowed and recording.calls.refills == 2
    budget.close()
    assert peek.gcra(key, 99, 100, MONTH, cost=0).remaining == 94


def test_the_background_timer_gives_back_when_the_deadline_comes(recording, plain, tag):
    key = f"{tag}:timer"
    clock = Clock()
    budget = RateLimiter(recording).local_budget(Fixed(100, HOUR), key, batch=10, timeout_ms=None, clock=clock)
    assert budget.take().allowed
    reset = int(recording.calls.replies[-1][1][4])
    assert count_of(plain, key) == 10
    time.sleep(TICK_S * 2)  # the timer reads the clock meanwhile: not due, nothing sent
    assert recording.calls.refunds == [] and budget.stats()["held"] == 9
    clock.now += reset - 1000  # its deadline
    wait_for(lambda: budget.stats()["given_back"] == 9, "the timer gave back the 9 units held")
    assert recording.calls.refunds == [9] and count_of(plain, key) == 1
    # A take after it takes a new batch: nothing held is ever spent past its deadline.
    assert budget.take().allowed and recording.calls.refills == 2
    budget.close()
    assert count_of(plain, key) == 2


def test_async_timer_and_close(server, plain, tag):
    key = f"{tag}:atimer"

    async def main():
        client = ARecording(port=server.port)
        clock = Clock()
        budget = AsyncRateLimiter(client).local_budget(Fixed(100, HOUR), key, batch=10, timeout_ms=None, clock=clock)
        assert (await budget.take()).allowed
        reset = int(client.calls.replies[-1][1][4])
        clock.now += reset - 1000
        await await_for(lambda: budget.stats()["given_back"] == 9, "the timer task gave back the 9 units held")
        assert client.calls.refunds == [9] and count_of(plain, key) == 1
        async with budget:
            assert (await budget.take(3)).allowed
            assert count_of(plain, key) == 11
        assert client.calls.refunds == [9, 7] and count_of(plain, key) == 4
        with pytest.raises(BudgetClosed):
            await budget.take()
        assert await budget.give_back() == 0
        await client.aclose()

    asyncio.run(main())


def test_closed_at_exit_and_not_spent_by_a_forked_child(server, plain, tag):
    """A budget left open is closed when the interpreter exits; a child forked from a
    process that holds units does not spend them (they are its parent's)."""
    key = f"{tag}:exit"
    code = (
        "import json, os, sys, redis\n"
        "from redis_native_ratelimit import RateLimiter, Fixed\n"
        "r = redis.Redis(port=int(sys.argv[1]))\n"
        "b = RateLimiter(r).local_budget(Fixed(1000, '1h'), sys.argv[2], batch=10, timeout_ms=None)\n"
        "assert b.take().allowed\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ok = b.take().allowed\n"
        "    s = b.stats()\n"
        "    print(json.dumps({'ok': ok, 'count': int(r.get(sys.argv[2])), 'refills': s['refills'], 'held': s['held']}), flush=True)\n"
        "    os._exit(0)\n"  # no atexit: the child's 9 stay counted
        "os.waitpid(pid, 0)\n"
        "print(json.dumps({'parent_held': b.stats()['held']}), flush=True)\n"
        # no close: the interpreter's exit gives back what is held
    )
    done = subprocess.run([sys.executable, "-c", code, str(server.port), key], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    child, parent = [json.loads(line) for line in done.stdout.splitlines()]
    # The child took its own batch: 10 (parent's) + 10 (its own).
    assert child == {"ok": True, "count": 20, "refills": 1, "held": 9}
    assert parent == {"parent_held": 9}
    assert count_of(plain, key) == 11  # the parent's 9 given back at exit; the child's not


# -- never a unit more than granted -------------------------------------------------------------


@pytest.mark.parametrize(
    "policy",
    [Fixed(500, HOUR), Gcra(max_burst=499, count=500, period=MONTH), Multi([(HOUR, 500)])],
    ids=["fixed", "gcra", "multi"],
)
def test_threads_sharing_budgets_never_take_more_than_the_limit(policy, server, plain, tag):
    key = f"{tag}:threads"
    batches = [7 + 5 * i for i in range(4)]
    budgets = [RateLimiter(Recording(port=server.port)).local_budget(policy, key, batch=n, timeout_ms=None) for n in batches]
    allowed = [0] * 16
    costs = [1 + (i % 3) for i in range(16)]

    def work(i: int) -> None:
        budget = budgets[i % 4]
        for _ in range(60):
            if budget.take(costs[i]).allowed:
                allowed[i] += costs[i]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spent = sum(allowed)
    stats = [b.stats() for b in budgets]
    peek = RateLimiter(plain)
    counted = 500 - peek.check(policy, key, cost=0).remaining
    # Everything spent was granted and is counted by the server; the rest is held.
    assert counted == sum(s["granted"] - s["given_back"] for s in stats)
    assert counted == spent + sum(s["held"] for s in stats)
    assert spent <= 500 and counted <= 500
    for b in budgets:
        b.close()
    # What was held went back: the server counts exactly what was spent.
    assert 500 - peek.check(policy, key, cost=0).remaining == spent
    for b, s in zip(budgets, (b.stats() for b in budgets)):
        assert s["spent"] == s["granted"] - s["given_back"] - s["dropped"]
        assert s["dropped"] == 0 and s["unavailable"] == 0
        b.limiter.client.close()
    # The demand was about 4 times the limit, so the server ran out: every unit went to a
    # taker but what the budgets held when their threads ended (at most a batch each,
    # and what a take of 3 found too little: 2).
    assert spent >= 500 - sum(n + 2 for n in batches)


def test_asyncio_tasks_sharing_budgets_never_take_more_than_the_limit(server, plain, tag):
    key = f"{tag}:tasks"
    policy = Fixed(300, HOUR)

    async def main():
        clients = [ARecording(port=server.port) for _ in range(3)]
        budgets = [AsyncRateLimiter(c).local_budget(policy, key, batch=11, timeout_ms=None) for c in clients]
        allowed = [0] * 30

        async def work(i: int) -> None:
            for _ in range(40):
                if (await budgets[i % 3].take()).allowed:
                    allowed[i] += 1

        await asyncio.gather(*(work(i) for i in range(30)))
        spent = sum(allowed)
        counted = count_of(plain, key)
        assert counted == spent + sum(b.stats()["held"] for b in budgets) and spent <= 300
        for b in budgets:
            await b.aclose()
        assert count_of(plain, key) == spent and spent >= 300 - 3 * 11
        for c in clients:
            await c.aclose()

    asyncio.run(main())


WORKER = """
import json, sys, threading, redis
from redis_native_ratelimit import RateLimiter, Fixed
port, key, batch = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
budget = RateLimiter(redis.Redis(port=port)).local_budget(Fixed(400, "1h"), key, batch=batch, timeout_ms=None)
allowed = [0, 0]
def work(i):
    for _ in range(150):
        if budget.take().allowed:
            allowed[i] += 1
threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
for t in threads: t.start()
for t in threads: t.join()
held = budget.stats()["held"]
budget.close()
print(json.dumps(dict(allowed_units=sum(allowed), held_at_end=held, **budget.stats())))
"""


def test_processes_sharing_one_key_never_take_more_than_the_limit(server, plain, tag):
    key = f"{tag}:procs"
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(server.port), key, str(5 + 4 * i)], stdout=subprocess.PIPE, text=True)
        for i in range(4)
    ]
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        outs.append(json.loads(out))
    spent = sum(o["allowed_units"] for o in outs)
    assert sum(o["spent"] for o in outs) == spent
    assert sum(o["granted"] - o["given_back"] for o in outs) == spent
    assert count_of(plain, key) == spent <= 400
    assert spent >= 400 - (5 + 9 + 13 + 17)  # 1 200 asked for: the server ran out


# -- one refill in flight, shared ------------------------------------------------------------


def test_takers_share_the_refill_in_flight(server, plain, recording, tag):
    """The server stalls the first refill (CLIENT PAUSE WRITE); the other takers wait
    for it instead of calling; one batch answers them all."""
    key = f"{tag}:shared"
    budget = RateLimiter(recording).local_budget(Fixed(1000, HOUR), key, batch=100, timeout_ms=None)
    results: List[RateLimit] = []
    plain.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
    try:
        threads = [threading.Thread(target=lambda: results.append(budget.take())) for _ in range(8)]
        for t in threads:
            t.start()
        wait_for(lambda: budget.stats()["waiting"] == 7, "seven takers waiting for the one refill")
        assert recording.calls.refills == 1
    finally:
        plain.execute_command("CLIENT", "UNPAUSE")
    for t in threads:
        t.join()
    assert len(results) == 8 and all(r.allowed for r in results)
    assert recording.calls.refills == 1 and count_of(plain, key) == 100
    assert budget.stats()["held"] == 92
    budget.close()


def test_tasks_share_the_refill_in_flight(server, plain, tag):
    key = f"{tag}:ashared"

    async def main():
        client = ARecording(port=server.port)
        budget = AsyncRateLimiter(client).local_budget(Fixed(1000, HOUR), key, batch=100, timeout_ms=None)
        plain.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
        try:
            tasks = [asyncio.ensure_future(budget.take()) for _ in range(8)]
            await await_for(lambda: budget.stats()["waiting"] == 7, "seven tasks waiting for the one refill")
            assert client.calls.refills == 1
        finally:
            plain.execute_command("CLIENT", "UNPAUSE")
        results = await asyncio.gather(*tasks)
        assert all(r.allowed for r in results) and client.calls.refills == 1
        assert count_of(plain, key) == 100 and budget.stats()["held"] == 92
        await budget.aclose()
        await client.aclose()

    asyncio.run(main())


# -- when the server does not answer -------------------------------------------------------------


@pytest.mark.parametrize("fail_open", [True, False], ids=["fail-open", "fail-closed"])
def test_a_stalled_server_fails_open_or_closed_behind_the_breaker(fail_open, server, plain, tag):
    """Under CLIENT PAUSE WRITE a refill can only end by the budget's timeout (the pause
    outlasts it): the take fails open (allowed, nothing counted) or closed (refused,
    Retry-After 1), and the breaker stops the next takes from calling. A second budget
    with a patient timeout shares the breaker: its answer closes it."""
    key = f"{tag}:stall"
    clock = Clock()
    breaker = CircuitBreaker(cooldown_ms=5_000, now=clock)
    short_client = Recording(port=server.port)
    short = RateLimiter(short_client).local_budget(Fixed(100, HOUR), key, batch=10, timeout_ms=200, breaker=breaker, fail_open=fail_open)
    plain.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
    try:
        first = short.take()
        assert first.unavailable and first.allowed is fail_open
        assert ratelimit_headers(first) == ({} if fail_open else {"Retry-After": "1"})
        assert breaker.state == "open"
        for _ in range(5):  # no call while it is open
            assert short.take().unavailable
        assert breaker.skipped == 5
        stats = short.stats()
        assert stats["unavailable"] == 6 and stats["refills"] == 0 and stats["spent"] == 0
        assert stats["allowed" if fail_open else "denials"] == 6
    finally:
        plain.execute_command("CLIENT", "UNPAUSE")
    clock.now += 5_000
    patient = RateLimiter(Recording(port=server.port)).local_budget(Fixed(100, HOUR), key, batch=10, timeout_ms=None, breaker=breaker)
    assert patient.take().allowed and breaker.state == "closed"
    # The stalled refill may have run once the pause ended (its units then stay counted
    # until the window ends: never spent) or not.
    assert count_of(plain, key) in (10, 20)
    patient.close()
    short.close()
    short_client.close()


# -- what a budget refuses ------------------------------------------------------------------------


def test_policies_a_budget_refuses(server, cluster, tag):
    rl = RateLimiter(redis.Redis(port=server.port))
    with pytest.raises(ValueError, match="Lease counts requests in flight"):
        rl.local_budget(Lease(10, "30s"), "k")
    with pytest.raises(ValueError, match="Lease counts requests in flight"):
        rl.local_budget(All([Gcra(9, 10, "1s"), Lease(10, "30s")]), ["a", "b"])
    with pytest.raises(ValueError, match="DELAY"):
        rl.local_budget(Gcra(0, 10, "1s", delay="30s"), "k")
    with pytest.raises(ValueError, match="Ban rule alone"):
        rl.local_budget(Ban(3, "1m", "1h"), "k")
    with pytest.raises(ValueError, match="Multi policy takes one key"):
        rl.local_budget(Multi([("1m", 5)]), ["a", "b"])
    with pytest.raises(ValueError, match="one key per rule"):
        rl.local_budget(All([Gcra(9, 10, "1s"), Fixed(5, "1m")]), ["a"])
    with pytest.raises(ValueError, match="batch"):
        rl.local_budget(Fixed(5, "1m"), "k", batch=0)
    budget = rl.local_budget(Fixed(5, "1m"), f"{tag}:cost", timeout_ms=None)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="a take costs"):
            budget.take(bad)
    with pytest.raises(ValueError, match="a take of 6 can never be allowed: the policy's capacity is 5"):
        budget.take(6)  # as the command's capacity error, without a call
    assert budget.stats()["server_calls"] == 0
    budget.close()
    rl.client.close()
    on_cluster = RateLimiter(redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port))
    with pytest.raises(ValueError, match="share a Cluster slot"):
        on_cluster.local_budget(All([Gcra(9, 10, "1s"), Fixed(5, "1m")]), ["user:1", "acct:1"])
    keys = [f"{tag}user", f"{tag}acct"]
    one_slot = on_cluster.local_budget(All([Gcra(9, 10, "1s"), Fixed(50, "1m")]), keys, batch=3, timeout_ms=None)
    assert one_slot.take().allowed and one_slot.stats()["held"] == 2
    one_slot.close()
    on_cluster.client.close()


# -- UPTO on the typed calls -----------------------------------------------------------------------


def test_upto_on_the_typed_calls(server, cluster, tag):
    rl = RateLimiter(redis.Redis(port=server.port, decode_responses=True))
    k = f"{tag}:upto"
    first = rl.fixed(k + "f", 100, HOUR, cost=70, upto=True)
    second = rl.fixed(k + "f", 100, HOUR, cost=70, upto=True)
    third = rl.fixed(k + "f", 100, HOUR, cost=70, upto=True)
    assert (first.granted, second.granted, third.granted) == (70, 30, 0)
    assert (first.allowed, second.allowed, third.allowed) == (True, True, False)
    assert third.retry_after_ms > 0 and rl.fixed(k + "f", 100, HOUR).granted is None
    assert rl.gcra(k + "g", 9, 10, MONTH, cost=50, upto=True).granted == 10
    m = rl.multi([k + "m"], [(HOUR, 5), ("1d", 8)], cost=9, upto=True)
    assert (m.granted, m.key, m.window_ms) == (5, k + "m", 3_600_000)
    assert rl.sliding([k + "s"], [(HOUR, 4)], cost=9, upto=True).granted == 4
    assert rl.log(k + "l", 3, HOUR, cost=9, upto=True).granted == 3
    a = rl.all([(k + "a1", Gcra(9, 10, MONTH)), (k + "a2", Fixed(6, HOUR))], cost=9, upto=True)
    assert (a.granted, a.rule, a.key) == (6, 2, k + "a2")
    assert rl.check(Fixed(10, HOUR), k + "c", cost=25, upto=True).granted == 10
    with pytest.raises(ValueError, match="upto cannot be given with refund"):
        rl.fixed(k + "f", 100, HOUR, cost=5, upto=True, refund=True)
    with pytest.raises(redis.exceptions.ResponseError, match="UPTO takes COST n with n at least 1"):
        rl.fixed(k + "f", 100, HOUR, cost=0, upto=True)
    rl.client.close()
    on_cluster = RateLimiter(redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.port))
    with pytest.raises(ValueError, match="upto across Cluster slots"):
        on_cluster.all([("user:1", Gcra(9, 10, "1s")), ("acct:1", Fixed(5, "1m"))], cost=3, upto=True)
    on_cluster.client.close()
