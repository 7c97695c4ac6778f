"""Worker processes sharing a third-party API's quota with RL.GCRA ... DELAY.

Many workers call an API that allows 10 requests per second in all. Instead of trying,
failing and retrying until they win, each worker books its slot with one call:

    RL.GCRA quota:partner-api 0 10 1s DELAY 30s

and the sixth field of the reply says how many milliseconds to wait before calling
(0: call now; -1: the queue is more than 30 s long, give up or come back later). Slots
are handed out atomically, so the calls of all workers are spaced 100 ms apart, in
booking order, with no idle gaps and no bursts.

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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import redis

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")

RATE = 10  # requests per second, shared by every worker
MAX_WAIT = "30s"  # longest queue a worker accepts


def book_slot(r, key):
    """Book the next free slot of the shared quota; seconds to wait, or None if the
    queue is longer than MAX_WAIT."""
    reply = r.execute_command("RL.GCRA", key, 0, RATE, "1s", "DELAY", MAX_WAIT)
    delay_ms = reply[5]
    if delay_ms < 0:
        return None
    return delay_ms / 1000


def worker(url, key, jobs, started):
    r = redis.Redis.from_url(REDIS_URL)
    started.wait()
    for job in range(jobs):
        wait = book_slot(r, key)
        if wait is None:
            return  # a real worker would put the job back in its queue
        time.sleep(wait)
        urllib.request.urlopen(f"{url}?job={job}").read()


class FakeApi(BaseHTTPRequestHandler):
    """Stands in for the third-party API: records when each call arrives."""

    calls = []

    def do_GET(self):
        FakeApi.calls.append(time.monotonic())
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def run_pool(workers, jobs, key):
    """Start the fake API and the worker processes; the arrival times of all calls."""
    FakeApi.calls = []
    api = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{api.server_address[1]}/"
    started = multiprocessing.Event()
    procs = [multiprocessing.Process(target=worker, args=(url, key, jobs, started)) for _ in range(workers)]
    for p in procs:
        p.start()
    started.set()  # every worker books at once
    for p in procs:
        p.join(timeout=60)
    api.shutdown()
    return sorted(FakeApi.calls)


def self_check(r):
    key = "quota:check:" + str(os.getpid())
    workers, jobs = 6, 5
    calls = run_pool(workers, jobs, key)
    assert len(calls) == workers * jobs, f"{len(calls)} calls, expected {workers * jobs}"
    interval = 1 / RATE
    # What the scheduler and the network add to a call's time, at most (generous for a
    # busy test machine).
    jitter = 0.06
    # Never over the quota: n calls take at least (n - 1) intervals, up to the jitter.
    for i in range(len(calls)):
        for j in range(i + 1, len(calls)):
            assert calls[j] - calls[i] >= (j - i) * interval - jitter, (
                f"calls {i}..{j} came {calls[j] - calls[i]:.3f} s apart, quota allows {(j - i) * interval:.3f} s"
            )
    # No idle gaps: the quota is used all the time.
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert max(gaps) <= interval + jitter, f"an idle gap of {max(gaps):.3f} s"
    # The whole run takes the quota's time, not more.
    span = calls[-1] - calls[0]
    assert span <= (len(calls) - 1) * interval + jitter, f"{len(calls)} calls took {span:.3f} s"
    # A caller with a shorter patience is refused while the queue is long, and books nothing.
    for _ in range(3):
        assert book_slot(r, key) is not None
    refused = r.execute_command("RL.GCRA", key, 0, RATE, "1s", "DELAY", "100ms")
    assert refused[0] == 1 and refused[5] == -1, refused
    r.delete(key)
    print(f"{len(calls)} calls from {workers} workers, {1000 * max(gaps):.0f} ms longest gap")


if __name__ == "__main__":
    r = redis.Redis.from_url(REDIS_URL)
    if sys.argv[1:] == ["--check"]:
        self_check(r)
        print("self-check passed")
    else:
        calls = run_pool(workers=8, jobs=5, key="quota:partner-api")
        for t in calls:
            print(f"{t - calls[0]:6.3f} s")
