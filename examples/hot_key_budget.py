"""Worker processes sharing one hot key with local budgets.

A tenant may send 20 000 requests a minute, whichever of the service's worker
processes serves them. Checking RL.FIXED on every request costs every worker a round
trip per request, and puts every request of the tenant on one shard. With a local
budget each worker takes the tenant's limit a batch at a time (``COST 500 UPTO``) and
answers its requests from it in the process; what it holds and has not spent it gives
back (``REFUND``) before the minute ends and when it stops. It never spends a unit the
server did not grant, so the tenant never gets more than its 20 000, whatever the
number of workers.

    python examples/hot_key_budget.py          # 4 workers, 10 000 requests each
    python examples/hot_key_budget.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import argparse
import multiprocessing
import os
import sys
import uuid

import redis

from redis_native_ratelimit import Fixed, RateLimiter

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

QUOTA = Fixed(20_000, "1m", name="tenant")  # the tenant's requests a minute
BATCH = 500  # what a worker takes at a time


def serve(key, requests, results, timeout_ms=250, quota=QUOTA):
    """One worker: `requests` requests of the tenant, each checked with the budget. A
    batch not answered within `timeout_ms` fails open (the request is served, counted
    nowhere), as the middleware does."""
    r = redis.Redis.from_url(REDIS_URL)
    allowed = refused = 0
    with RateLimiter(r).local_budget(quota, key, batch=BATCH, timeout_ms=timeout_ms) as budget:
        for _ in range(requests):
            result = budget.take()
            if result.allowed:
                allowed += 1  # serve the request
            else:
                refused += 1  # 429, with ratelimit_headers(result)
    # Closed: what the worker held and did not spend went back.
    results.put((allowed, refused, budget.stats()))
    r.close()


def run(key, workers, requests, timeout_ms=250, quota=QUOTA):
    """The workers, each in its own process: what each allowed, refused and counted."""
    results = multiprocessing.Queue()
    args = (key, requests, results, timeout_ms, quota)
    procs = [multiprocessing.Process(target=serve, args=args) for _ in range(workers)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    return out


def report(out):
    for n, (allowed, refused, stats) in enumerate(out, start=1):
        print(
            f"worker {n}: {allowed} allowed, {refused} refused, {stats['server_calls']} server calls "
            f"({stats['granted']} units granted, {stats['given_back']} given back)"
        )
    allowed = sum(a for a, _, _ in out)
    calls = sum(s["server_calls"] for _, _, s in out)
    takes = sum(s["takes"] for _, _, s in out)
    print(f"{allowed} allowed of {takes} requests; {calls} server calls, one per {takes / max(calls, 1):.0f} requests")


def check():
    r = redis.Redis.from_url(REDIS_URL)
    key = "rl:example:tenant:" + uuid.uuid4().hex[:8]
    # 24 000 requests for a quota of 20 000. The self-check waits for every answer
    # (timeout_ms=None), however loaded the machine: no request fails open. Its window
    # is an hour, so that every request falls in the one window, however long they take.
    out = run(key, workers=4, requests=6_000, timeout_ms=None, quota=Fixed(20_000, "1h", name="tenant"))
    report(out)
    allowed = sum(a for a, _, _ in out)
    # Never above the quota, and every unit accounted for: after the workers closed
    # their budgets the server counts exactly the requests they allowed.
    assert allowed <= 20_000, allowed
    assert int(r.get(key)) == allowed, (r.get(key), allowed)
    # The server ran out, and the workers together held at most a batch each then.
    assert allowed >= 20_000 - 4 * BATCH, allowed
    for allowed_here, refused, stats in out:
        assert stats["spent"] == stats["granted"] - stats["given_back"] - stats["dropped"], stats
        assert allowed_here + refused == 6_000
    # A handful of calls instead of one per request.
    assert sum(s["server_calls"] for _, _, s in out) < 200
    r.delete(key)
    r.close()
    print("self-check passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="run the self-check")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--requests", type=int, default=10_000, help="requests per worker")
    args = parser.parse_args()
    if args.check:
        check()
        return 0
    report(run("rl:example:tenant:7", args.workers, args.requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
