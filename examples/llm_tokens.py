"""LLM tokens per API key, reserved before each call and settled after it.

The cost of an LLM call is its tokens, known only once the model has answered. Each
call reserves an estimate (the prompt's tokens plus the most the answer may use); if
the reservation is refused, the call is not made. Once the answer is in, the real
count settles the difference: what was not used is given back (REFUND), an overage is
paid (FORCE), atomically, inside the server. An API key may use 10 000 tokens a minute.

    python examples/llm_tokens.py            # a few simulated calls, printed
    python examples/llm_tokens.py --check    # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import sys
import uuid

import redis

from redis_native_ratelimit import Fixed, RateLimiter

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

# 10 000 tokens a minute per API key.
TOKENS = Fixed(limit=10_000, window="1m", name="tokens")


def complete(prompt_tokens, max_tokens):
    """Stands in for an LLM client: the tokens the call really used."""
    return prompt_tokens + max_tokens // 2


def ask(rl, api_key, prompt_tokens, max_tokens, at=None):
    """One LLM call within the key's token budget: None when refused (with the wait),
    else the tokens it used."""
    reservation = rl.reserve(TOKENS, "tokens:" + api_key, prompt_tokens + max_tokens, at=at)
    if not reservation.allowed:
        return None, reservation.result.retry_after_ms
    used = complete(prompt_tokens, max_tokens)
    # Give back what the answer did not use (or pay what it used beyond the estimate).
    reservation.settle(used)
    return used, None


def self_check(r, prefix):
    rl = RateLimiter(r)
    t = 1_900_000_000_000
    key = prefix + "key:42"
    # 2 000 reserved, 1 300 used: 700 given back.
    used, _ = ask(rl, key, 300, 2000, at=t)
    assert used == 1300, used
    assert r.get("tokens:" + key) == b"1300"
    # An estimate below the real count: the overage is forced, over the limit.
    reservation = rl.reserve(TOKENS, "tokens:" + key, 8000, at=t + 1000)
    assert reservation.allowed
    over = reservation.settle(9500)
    assert over.limited and over.remaining == 0 and over.retry_after_ms == 59000, over
    assert r.get("tokens:" + key) == b"10800"
    # Refused until the minute has passed: no call is made, nothing is counted.
    used, wait = ask(rl, key, 100, 100, at=t + 2000)
    assert used is None and wait == 58000, (used, wait)
    used, _ = ask(rl, key, 100, 100, at=t + 60000)
    assert used == 150, used
    assert r.get("tokens:" + key) == b"150"
    # A refund never goes below empty: the key is full again, and gone.
    back = rl.fixed("tokens:" + key, 10_000, "1m", cost=1_000_000, at=t + 60000, refund=True)
    assert back.allowed and back.remaining == 10_000, back
    assert r.exists("tokens:" + key) == 0


if __name__ == "__main__":
    client = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        prefix = "check:llm:%s:" % uuid.uuid4().hex
        try:
            self_check(client, prefix)
        finally:
            keys = list(client.scan_iter(match="tokens:" + prefix + "*"))
            if keys:
                client.delete(*keys)
        print("self-check passed against " + REDIS_URL)
    elif sys.argv[1:]:
        sys.exit("usage: python examples/llm_tokens.py [--check]")
    else:
        rl = RateLimiter(client)
        for prompt in (400, 1200, 3000, 6000):
            used, wait = ask(rl, "demo", prompt, 2000)
            print(f"prompt {prompt} tokens:", f"used {used}" if used else f"refused, retry in {wait} ms")
