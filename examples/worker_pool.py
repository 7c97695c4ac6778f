"""Worker processes sharing a third-party API's quota with RL.GCRA ... DELAY.

Many workers call an API that allows 10 requests per second in all. Instead of trying,
failing and retrying until they win, each worker books its slot with one call:

    RL.GCRA quota:partner-api 0 10 1s AT <now_ms> DELAY 30s

and the sixth field of the reply (``delay_ms``) says how many milliseconds after
``now_ms`` to call (0: call now; -1: the queue is more than 30 s long, give up or come
back later). Slots are handed out atomically, so the booked slots of all workers are
spaced exactly 100 ms apart, in booking order, with no idle gaps and no bursts.

    python examples/worker_pool.py          # 8 workers call a local fake API
    python examples/worker_pool.py --check  # the self-check `make test` runs

$REDIS_URL defaults to redis://127.0.0.1:6379; the server needs the module loaded.
"""

import multiprocessing
import os
import sys
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import redis

from redis_native_ratelimit import RateLimiter

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

RATE = 10  # requests per second, shared by every worker
MAX_WAIT = "30s"  # longest queue a worker accepts


def now_ms():
    return time.time_ns() // 1_000_000


def book_slot(rl, key):
    """Book the next free slot of the shared quota: (its time in Unix ms, the delay the
    server gave), or None if the queue is longer than MAX_WAIT. The booking is judged
    at our own clock's time (AT), so the slot is exactly that time plus the delay."""
    at = now_ms()
    result = rl.gcra(key, 0, RATE, "1s", delay=MAX_WAIT, at=at)
    if result.delay_ms is None or result.delay_ms < 0:
        return None
    return at + result.delay_ms, result.delay_ms


def wait_until(slot_ms):
    """Sleep until the clock the slot was booked on reaches it."""
    while True:
        left = slot_ms - now_ms()
        if left <= 0:
            return
        time.sleep(left / 1000)


def worker(url, key, jobs, started, log):
    rl = RateLimiter(redis.Redis.from_url(REDIS_URL))
    started.wait()
    for job in range(jobs):
        booked = book_slot(rl, key)
        if booked is None:
            return  # a real worker would put the job back in its queue
        slot, delay_ms = booked
        wait_until(slot)
        acted = now_ms()
        urllib.request.urlopen(f"{url}?job={job}").read()
        log.put((slot, delay_ms, acted))


class FakeApi(BaseHTTPRequestHandler):
    """Stands in for the third-party API: counts the calls."""

    calls = 0
    lock = threading.Lock()

    def do_GET(self):
        with FakeApi.lock:
            FakeApi.calls += 1
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def run_pool(workers, jobs, key):
    """Start the fake API and the worker processes; (slot, delay, acted) of every call
    (Unix ms, ms, Unix ms), in booking order, and how many calls the API received."""
    FakeApi.calls = 0
    api = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)  # a free port
    threading.Thread(target=api.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{api.server_address[1]}/"
    started = multiprocessing.Event()
    log = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(url, key, jobs, started, log)) for _ in range(workers)]
    for p in procs:
        p.start()
    started.set()  # every worker books at once
    calls = [log.get(timeout=120) for _ in range(workers * jobs)]
    for p in procs:
        p.join(timeout=60)
    api.shutdown()
    return sorted(calls), FakeApi.calls


def self_check(r, key):
    """What the limiter guarantees, not how fast this machine is: in booking order, each
    slot is exactly one interval after the previous one when it was queued (delay > 0);
    no worker acted before its slot (each compared with its own booked slot, on its own
    clock). A booking that found the queue empty (delay 0) is at its booker's own time,
    which says nothing of the gap to the previous slot: a worker stalled between reading
    its clock and booking can find the queue gone by the server's clock. The exact
    schedule is checked with the time pinned, below (how many bookings of the live run
    found a queue depends on the machine's speed: it is printed, not asserted)."""
    interval_ms = 1000 // RATE
    workers, jobs = 6, 5
    calls, received = run_pool(workers, jobs, key)
    assert len(calls) == workers * jobs == received, (len(calls), received)
    for (slot, _, _), (next_slot, next_delay, _) in zip(calls, calls[1:]):
        gap = next_slot - slot
        if next_delay > 0:
            assert gap == interval_ms, f"a queued slot {gap} ms after the previous one"
    for slot, _, acted in calls:
        assert acted >= slot, f"a worker acted {slot - acted} ms before its slot"

    # The booked schedule, exactly, with the time pinned: 10 per second, no burst.
    rl = RateLimiter(r)
    other, t = key + ":pinned", 1900000000000
    delays = [rl.gcra(other, 0, RATE, "1s", delay="1s", at=t).delay_ms for _ in range(12)]
    assert delays == [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, -1], delays
    # A caller with a shorter patience is refused while the queue is long, and books
    # nothing: the next booking gets the slot after the last one.
    refused = rl.gcra(other, 0, RATE, "1s", delay="100ms", at=t)
    assert not refused.allowed and refused.delay_ms == -1, refused
    assert rl.gcra(other, 0, RATE, "1s", delay="2s", at=t).delay_ms == 1100
    queued = sum(1 for _, delay, _ in calls if delay > 0)
    print(f"{len(calls)} calls from {workers} workers, {queued} queued {interval_ms} ms apart")


if __name__ == "__main__":
    r = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        key = "check:worker_pool:%s" % uuid.uuid4().hex
        try:
            self_check(r, key)
        finally:  # the self-check leaves nothing behind, even when it fails
            r.delete(key, key + ":pinned")
        print("self-check passed")
    else:
        calls, _ = run_pool(workers=8, jobs=5, key="quota:partner-api")
        for slot, delay, acted in calls:
            print(f"slot {slot - calls[0][0]:5d} ms (booked {delay:4d} ms ahead), acted {acted - slot:3d} ms after it")
