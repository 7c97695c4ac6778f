"""Calling the rate limiting commands from Python, with the redis-native-ratelimit package.

    python examples/quickstart.py          # a few calls against $REDIS_URL
    python examples/quickstart.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded
(`make run` starts one). Install the package with `pip install -r examples/requirements.txt`
(or `pip install ./clients/python`).
"""

import os
import sys
import uuid

import redis

from redis_native_ratelimit import RateLimit, RateLimiter, ratelimit_headers

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")


def calls(r):
    rl = RateLimiter(r)
    # RL.GCRA key max_burst count period: 1 request per 2 s, bursts of 3.
    result = rl.gcra("rl:gcra:user:42", max_burst=2, count=1, period="2s")
    if not result.allowed:
        print("refused; retry in", result.retry_after)  # a timedelta
    print(result.limit, result.remaining, result.reset_after_ms)

    # 5 per minute and 20 per hour, for an address and an account at once. The result
    # names the key and the window that decided.
    decision = rl.multi(
        ["rl:multi:ip:10.0.0.1", "rl:multi:user:42"],
        [("1m", 5), ("1h", 20)],
        names=["ip", "user"],  # the policies' names in the HTTP headers
    )
    print(decision.allowed, decision.key, decision.window, ratelimit_headers(decision))
    return decision


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


# The Lua twins: lua/scripts/<function>.lua, one self-contained script per command (the
# same code as the Functions library lua/ratelimit.lua). Point RATELIMIT_LUA_DIR at a
# copy of lua/ when this file is not next to it.
LUA_DIR = os.environ.get(
    "RATELIMIT_LUA_DIR",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lua"),
)


def load_twin(r, function: str, lua_dir: str = LUA_DIR):
    """The script of a twin (``rl_gcra``...) as a redis-py Script (EVALSHA, loaded on
    first use)."""
    with open(os.path.join(lua_dir, "scripts", function + ".lua")) as script:
        return r.register_script(script.read())


def self_check(r, prefix: str):
    """Exact results, with AT pinning the time."""
    rl = RateLimiter(r)
    t = 1900000000000  # ms since the Unix epoch (2030-03-17)
    key = prefix + "user:42"
    seen = [rl.gcra(key, 2, 1, "10s", at=t) for _ in range(4)]
    assert seen == [
        RateLimit(True, 3, 2, -1, 10000),
        RateLimit(True, 3, 1, -1, 20000),
        RateLimit(True, 3, 0, -1, 30000),
        RateLimit(False, 3, 0, 10000, 30000),
    ], seen
    assert ratelimit_headers(seen[3], standard_headers="draft-6") == {
        "RateLimit-Policy": "3;w=30",
        "RateLimit-Limit": "3",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "30",
        "Retry-After": "10",
    }, ratelimit_headers(seen[3])
    assert ratelimit_headers(seen[0], standard_headers="draft-8") == {
        "RateLimit-Policy": '"gcra";q=3;w=30',
        "RateLimit": '"gcra";r=2;t=10',
    }, ratelimit_headers(seen[0])
    # 2.5 s later one request has leaked out: a peek (COST 0) says one fits again.
    assert rl.gcra(key, 2, 1, "10s", cost=0, at=t + 2500).remaining == 0
    assert rl.gcra(key, 2, 1, "10s", at=t + 10000) == RateLimit(True, 3, 0, -1, 30000)

    keys = [prefix + "ip:10.0.0.1", prefix + "user:42:multi"]
    limits = [("1s", 2), ("1m", 3)]
    first = rl.multi(keys, limits, at=t)
    assert first == RateLimit(True, 2, 1, -1, 1000, key=keys[0], window_ms=1000), first
    rl.multi(keys, limits, at=t)
    third = rl.multi(keys, limits, at=t + 500)
    assert third == RateLimit(False, 2, 0, 500, 500, key=keys[0], window_ms=1000), third
    # A denial consumed nothing: a second later the minute window still has 1 left.
    fourth = rl.multi(keys, limits, at=t + 1000)
    assert fourth == RateLimit(True, 3, 0, -1, 59000, key=keys[0], window_ms=60000), fourth

    # The drop-in for over_limit_multi_lua: 2 per second, 3 per minute.
    ids = [prefix + "ip:10.0.0.9", prefix + "user:9"]
    seen = [over_limit_multi(r, ids, [(1, 2), (60, 3)], now=t / 1000) for _ in range(3)]
    assert seen == [False, False, True], seen
    assert over_limit_multi(r, ids, [(1, 2), (60, 3)], now=t / 1000 + 1) is False
    assert over_limit_multi(r, ids, [(1, 2), (60, 3)], now=t / 1000 + 2) is True
    # Aligned windows: the second of t + 1 s, and the minute holding t.
    state = r.get("rl:" + ids[1]).decode()
    assert state == "1000:1:1900000002000,60000:3:1900000020000", state

    # The twin gives the command's replies and reads the command's state: through the
    # package (twins=True, for servers without the module) and as a redis-py Script.
    other = prefix + "user:7"
    native = [rl.gcra(other, 2, 1, "10s", at=t) for _ in range(2)]
    scripted = RateLimiter(r, twins=True).gcra(other, 2, 1, "10s", at=t)
    assert native[1] == RateLimit(True, 3, 1, -1, 20000), native
    assert scripted == RateLimit(True, 3, 0, -1, 30000), scripted
    twin = load_twin(r, "rl_gcra")
    assert twin(keys=[other], args=[2, 1, "10s", "AT", t]) == [1, 3, 0, 10000, 30000]


if __name__ == "__main__":
    client = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        prefix = "check:quickstart:%s:" % uuid.uuid4().hex
        try:
            self_check(client, prefix)
        finally:  # the self-check leaves nothing behind, even when it fails
            keys = list(client.scan_iter(match=prefix + "*")) + list(client.scan_iter(match="rl:" + prefix + "*"))
            if keys:
                client.delete(*keys)
        print("self-check passed against " + REDIS_URL)
    elif sys.argv[1:]:
        sys.exit("usage: python examples/quickstart.py [--check]")
    else:
        calls(client)
        twin = load_twin(client, "rl_gcra")
        print("twin", twin(keys=["rl:gcra:user:42"], args=[2, 1, "2s", "COST", 0]))
