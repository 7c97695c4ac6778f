"""At most 3 report exports at a time per account, with RL.LEASE.

A rate limit bounds how often; this bounds how many at once. Each export holds one of
the account's 3 slots while it runs: `limiter.lease(key, 3, "30s")` takes a slot (or
raises LeaseDenied, with the Retry-After of a 429), renews it in the background while
the export runs, and releases it when the export ends, also when it fails. A worker
that dies without releasing frees its slot by itself, 30 s after its last renewal.

    python examples/concurrency.py          # 8 workers share 12 exports, 3 at a time
    python examples/concurrency.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import os
import sys
import threading
import time
import uuid
from datetime import timedelta

import redis

from redis_native_ratelimit import LeaseDenied, RateLimiter

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

SLOTS = 3  # exports at once per account
TTL = "30s"  # a dead worker's slot comes back this long after its last renewal


def export(limiter, account, job, work, say=print):
    """Run one export in one of the account's slots; False when every slot is busy."""
    try:
        with limiter.lease(f"exports:{account}", SLOTS, TTL, id=job):
            work(job)
            return True
    except LeaseDenied as denied:
        # In a web handler: return 429 (or 503) with denied.headers (Retry-After).
        say(f"{job}: every slot busy, retry within {denied.retry_after}")
        return False


def run_jobs(limiter, account, jobs, workers, work, say=print):
    """Each worker takes jobs from the list and retries a refused one a little later (a
    slot frees up as soon as another export ends)."""
    pending = list(jobs)
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                job = pending.pop(0)
            while not export(limiter, account, job, work, say):
                time.sleep(0.02)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def demo():
    limiter = RateLimiter(redis.Redis.from_url(REDIS_URL))
    account = "acct:3"

    def work(job):
        print(f"{job}: exporting")
        time.sleep(0.5)

    run_jobs(limiter, account, [f"export-{i}" for i in range(12)], 8, work)


def check():
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    limiter = RateLimiter(client)
    account = f"check:{uuid.uuid4().hex}"
    key = f"exports:{account}"
    held, done = [], []
    lock = threading.Lock()

    def work(job):
        # What the account's key holds while this export runs (a snapshot of the set).
        pipe = client.pipeline(transaction=True)
        pipe.zcard(key)
        pipe.zscore(key, job)
        count, score = pipe.execute()
        with lock:
            held.append(count)
            done.append(job)
        assert score is not None, f"{job} runs without its slot"

    jobs = [f"export-{i}" for i in range(12)]
    run_jobs(limiter, account, jobs, 8, work, say=lambda _: None)
    assert sorted(done) == sorted(jobs), done
    assert max(held) <= SLOTS, f"{max(held)} exports at once"
    assert client.exists(key) == 0, "every slot released"

    # A worker that dies: its lease, taken at t and never released, holds its slot
    # until t + ttl, to the millisecond (AT pins the times).
    t = 1_900_000_000_000
    dead = f"dead:{uuid.uuid4().hex}"
    assert limiter.lease(dead, 1, TTL, id="crashed", at=t).allowed
    refused = limiter.lease(dead, 1, TTL, id="next", at=t + 29_999)
    assert not refused.allowed and refused.retry_after == timedelta(milliseconds=1)
    assert limiter.lease(dead, 1, TTL, id="next", at=t + 30_000).allowed
    assert limiter.release(dead, "crashed", at=t + 30_000) is False
    assert limiter.release(dead, "next", at=t + 30_000) is True
    print("self-check passed")


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        check()
    else:
        demo()
