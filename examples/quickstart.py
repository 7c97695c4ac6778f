"""Calling the rate limiting commands from Python, with redis-py.

    python examples/quickstart.py          # a few calls against $REDIS_URL
    python examples/quickstart.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded
(`make run` starts one). Install the client with `pip install -r examples/requirements.txt`.
"""

import os
import sys
from typing import List, NamedTuple, Tuple

import redis

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")


class RateLimit(NamedTuple):
    """The first five fields of every limiter's reply."""

    limited: bool  # False: allowed, True: denied
    limit: int  # the capacity
    remaining: int  # how much more would be allowed right now
    retry_after_ms: int  # when denied: wait this long; -1 when allowed
    reset_after_ms: int  # until back to full capacity


def gcra(r, key, max_burst, count, period, cost=1, at_ms=None):
    """RL.GCRA: `count` requests per `period`, plus `max_burst` at once."""
    args = ["RL.GCRA", key, max_burst, count, period, "COST", cost]
    if at_ms is not None:  # judge at this time instead of the server clock
        args += ["AT", at_ms]
    reply = r.execute_command(*args)
    return RateLimit(bool(reply[0]), *reply[1:5])


class MultiLimit(NamedTuple):
    """RL.MULTI's reply: the five fields, then the pair (key, window) that decided."""

    rate: RateLimit
    key: str
    window_ms: int


def multi(r, keys: List[str], limits: List[Tuple[str, int]], cost=1, at_ms=None):
    """RL.MULTI: every key against every (window, limit), all or nothing."""
    args = ["RL.MULTI", len(keys), *keys]
    for window, limit in limits:
        args += ["LIMIT", window, limit]
    args += ["COST", cost]
    if at_ms is not None:
        args += ["AT", at_ms]
    reply = r.execute_command(*args)
    rate = RateLimit(bool(reply[0]), *reply[1:5])
    return MultiLimit(rate, reply[5].decode(), reply[6])


def ceil_seconds(ms: int) -> int:
    """Milliseconds to whole seconds, rounded up: a client never comes back too early."""
    return (ms + 999) // 1000


def http_headers(rate: RateLimit) -> dict:
    """The HTTP headers of a reply: RateLimit-* always, Retry-After when denied."""
    headers = {
        "RateLimit-Limit": str(rate.limit),
        "RateLimit-Remaining": str(rate.remaining),
        "RateLimit-Reset": str(ceil_seconds(rate.reset_after_ms)),
    }
    if rate.limited:
        headers["Retry-After"] = str(ceil_seconds(rate.retry_after_ms))
    return headers


def over_limit_multi(r, identifiers, limits=((1, 10), (60, 125), (3600, 250)), now=None):
    """The widely copied over_limit_multi_lua, as one RL.MULTI call: True when over a
    limit. Same (seconds, limit) pairs, windows aligned to the epoch as the script's
    `time // duration` buckets (ALIGN); `now` is optional (the server's clock by
    default). Unlike the script, a refused request consumes nothing."""
    keys = ["rl:" + identifier for identifier in identifiers]
    args = ["RL.MULTI", len(keys), *keys, "ALIGN"]
    for seconds, limit in limits:
        args += ["LIMIT", seconds, limit]
    if now is not None:
        args += ["AT", int(now * 1000)]
    return r.execute_command(*args)[0] == 1


# The Lua twins: lua/prelude.lua followed by the command's file, as one script. Point
# RATELIMIT_LUA_DIR at a copy of lua/ when this file is not next to it.
LUA_DIR = os.environ.get(
    "RATELIMIT_LUA_DIR",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lua"),
)


def load_twin(r, name: str, lua_dir: str = LUA_DIR):
    """The twin of RL.<NAME> as a redis-py Script (EVALSHA, loaded on first use)."""
    with open(os.path.join(lua_dir, "prelude.lua")) as prelude:
        with open(os.path.join(lua_dir, name + ".lua")) as body:
            return r.register_script(prelude.read() + body.read())


def main():
    r = redis.Redis.from_url(REDIS_URL)
    # RL.GCRA key max_burst count period: 1 request per 2 s, bursts of 3.
    limited, limit, remaining, retry_after_ms, reset_after_ms = r.execute_command(
        "RL.GCRA", "rl:gcra:user:42", 2, 1, "2s"
    )
    print("RL.GCRA ", limited, limit, remaining, retry_after_ms, reset_after_ms)
    # The same through the helpers above: the 4th call in a row is denied.
    for _ in range(3):
        rate = gcra(r, "rl:gcra:user:42", 2, 1, "2s")
        print("RL.GCRA ", rate, http_headers(rate))
    # 5 per minute and 20 per hour, for an address and an account at once. Each
    # command keeps its own state format: give each its own key prefix.
    decision = multi(r, ["rl:multi:ip:10.0.0.1", "rl:multi:user:42"], [("1m", 5), ("1h", 20)])
    print("RL.MULTI", decision)
    # The twin of RL.GCRA, on the key the command just used.
    twin = load_twin(r, "gcra")
    print("twin    ", twin(keys=["rl:gcra:user:42"], args=[2, 1, "2s", "COST", 0]))


def self_check(r, prefix: str):
    """Exact replies, with AT pinning the time."""
    t = 1900000000000  # ms since the Unix epoch (2030-03-17)
    key = prefix + "user:42"
    seen = [gcra(r, key, 2, 1, "10s", at_ms=t) for _ in range(4)]
    assert seen == [
        RateLimit(False, 3, 2, -1, 10000),
        RateLimit(False, 3, 1, -1, 20000),
        RateLimit(False, 3, 0, -1, 30000),
        RateLimit(True, 3, 0, 10000, 30000),
    ], seen
    assert http_headers(seen[3]) == {
        "RateLimit-Limit": "3",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "30",
        "Retry-After": "10",
    }, http_headers(seen[3])
    assert http_headers(seen[0]) == {
        "RateLimit-Limit": "3",
        "RateLimit-Remaining": "2",
        "RateLimit-Reset": "10",
    }, http_headers(seen[0])
    # 2.5 s later one request has leaked out: one fits again.
    assert gcra(r, key, 2, 1, "10s", cost=0, at_ms=t + 2500).remaining == 0
    assert gcra(r, key, 2, 1, "10s", at_ms=t + 10000) == RateLimit(False, 3, 0, -1, 30000)

    keys = [prefix + "ip:10.0.0.1", prefix + "user:42:multi"]
    limits = [("1s", 2), ("1m", 3)]
    first = multi(r, keys, limits, at_ms=t)
    assert first == MultiLimit(RateLimit(False, 2, 1, -1, 1000), keys[0], 1000), first
    multi(r, keys, limits, at_ms=t)
    third = multi(r, keys, limits, at_ms=t + 500)
    assert third == MultiLimit(RateLimit(True, 2, 0, 500, 500), keys[0], 1000), third
    # A denial consumed nothing: a second later the minute window still has 1 left.
    fourth = multi(r, keys, limits, at_ms=t + 1000)
    assert fourth == MultiLimit(RateLimit(False, 3, 0, -1, 59000), keys[0], 60000), fourth

    # The drop-in for over_limit_multi_lua: 2 per second, 3 per minute.
    ids = [prefix + "ip:10.0.0.9", prefix + "user:9"]
    seen = [over_limit_multi(r, ids, [(1, 2), (60, 3)], now=t / 1000) for _ in range(3)]
    assert seen == [False, False, True], seen
    assert over_limit_multi(r, ids, [(1, 2), (60, 3)], now=t / 1000 + 1) is False
    assert over_limit_multi(r, ids, [(1, 2), (60, 3)], now=t / 1000 + 2) is True
    # Aligned windows: the second of t + 1 s, and the minute holding t.
    state = r.get("rl:" + ids[1]).decode()
    assert state == "1000:1:1900000002000,60000:3:1900000020000", state

    # The twin gives the command's replies and reads the command's state.
    twin = load_twin(r, "gcra")
    other = prefix + "user:7"
    native = [gcra(r, other, 2, 1, "10s", at_ms=t) for _ in range(2)]
    scripted = twin(keys=[other], args=[2, 1, "10s", "AT", t])
    assert native[1] == RateLimit(False, 3, 1, -1, 20000), native
    assert scripted == [0, 3, 0, -1, 30000], scripted
    assert gcra(r, other, 2, 1, "10s", at_ms=t) == RateLimit(True, 3, 0, 10000, 30000)


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        client = redis.Redis.from_url(REDIS_URL)
        self_check(client, "check:quickstart:%d:" % os.getpid())
        print("self-check passed against " + REDIS_URL)
    elif sys.argv[1:]:
        sys.exit("usage: python examples/quickstart.py [--check]")
    else:
        main()
