"""A storage for the `limits` library (and so for Flask-Limiter and SlowAPI) that
decides with the module's native commands.

Installing the package registers it under these URI schemes (its ``redis_native_ratelimit.pth``
imports this module right after the `limits` library, see ``redis_native_ratelimit_hook``;
``import redis_native_ratelimit`` does it too):

- ``redis+ratelimit://[user:password@]host:port[/db]`` and ``rediss+ratelimit://...``
  (TLS): one server;
- ``redis+ratelimit+cluster://host:port[,host:port...]`` and
  ``rediss+ratelimit+cluster://...``: a Redis Cluster.

A Flask-Limiter or SlowAPI app switches with
``storage_uri="redis+ratelimit://host:port"``. Add ``?twins=true`` to the URI (or the
storage option ``twins=True``) to run the Lua twins on a server where the module cannot
be loaded. Other storage options go to the redis-py client, as with the library's own
Redis storage; ``key_prefix`` (default ``LIMITS``) too.

How each strategy of the library is decided:

- **fixed window**: RL.FIXED on the library's own key (``LIMITS:<key>``) and in its own
  state (an integer counter that expires one window after the first hit), so processes
  still on the library's Redis storage and processes on this one count into the same
  windows during a rolling deploy. One native call per hit, no script; the limit is
  read from the library's key (``.../<amount>/<multiples>/<granularity>``).
- **moving window**: RL.LOG, an exact moving window, on ``LIMITS:log:<key>`` (a sorted
  set; the library keeps a list under ``LIMITS:<key>``). Limits up to 10 000 per window
  (RL.LOG's bound; a larger one is refused with the server's error).
- **sliding window counter**: RL.SLIDING with one window of 10 buckets, on
  ``LIMITS:sliding:<key>``.

Where the decisions differ from the library's Redis storage:

- **A refused hit counts nowhere.** The library's fixed window counts refused hits
  too (its counter climbs past the limit), so a client that keeps retrying while
  refused never gets more, but its count is wrong; here the count stays at the limit.
- **Sliding window counter**: the library weighs the previous window's count by how
  much of it still overlaps (an estimate that can let more than the limit through in
  some intervals, or refuse too early). RL.SLIDING counts every bucket that overlaps
  the window: never more than the limit in any interval of the window's length, and a
  request may be refused up to one bucket (a tenth of the window) early.
- **Moving window** decisions are the same (both are exact); the log is kept in a
  sorted set with one member per unit of cost.
- **Reset times** (``get_window_stats``, hence the ``X-RateLimit-Reset`` and
  ``Retry-After`` headers of Flask-Limiter and SlowAPI): fixed and moving windows as the
  library reports them (the window's end; when the oldest hit in the log leaves); the
  sliding window counter reports when the state is back to full capacity, never early.
- **A cost larger than the limit** is refused without a call (the commands would reply
  an error: it can never fit).
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any, List, Optional, Tuple

import redis
from limits.storage import MovingWindowSupport, SlidingWindowCounterSupport, Storage

from .client import RateLimiter

#: The largest limit the commands take (2^53 - 1): a counter with no limit.
UNLIMITED = 9007199254740991

_GRANULARITIES = {"second", "minute", "hour", "day", "month", "year"}
_TRUE = {"1", "true", "yes", "on"}


def limit_of(key: str) -> Optional[int]:
    """The amount of a key made by ``RateLimitItem.key_for``
    (``namespace/identifiers.../amount/multiples/granularity``), or None."""
    parts = key.rsplit("/", 3)
    if len(parts) == 4 and parts[3] in _GRANULARITIES and parts[1].isdigit() and parts[2].isdigit():
        return int(parts[1])
    return None


def _client_uri(uri: str) -> Tuple[str, bool, bool]:
    """The redis-py URI, whether it is a Cluster, and whether the URI asks for twins."""
    parsed = urllib.parse.urlsplit(uri)
    scheme = parsed.scheme
    cluster = scheme.endswith("+cluster")
    base = scheme.split("+", 1)[0]  # redis or rediss
    query = urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)
    twins = any(k == "twins" and v.lower() in _TRUE for k, v in query)
    rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "twins"])
    return urllib.parse.urlunsplit((base, parsed.netloc, parsed.path, rest, parsed.fragment)), cluster, twins


class RateLimitStorage(Storage, MovingWindowSupport, SlidingWindowCounterSupport):
    """The `limits` storage on the module's commands; see the module's description."""

    STORAGE_SCHEME = [
        "redis+ratelimit",
        "rediss+ratelimit",
        "redis+ratelimit+cluster",
        "rediss+ratelimit+cluster",
    ]
    DEPENDENCIES = ["redis"]
    PREFIX = "LIMITS"

    def __init__(
        self,
        uri: str,
        key_prefix: str = PREFIX,
        wrap_exceptions: bool = False,
        twins: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.key_prefix = key_prefix
        client_uri, cluster, uri_twins = _client_uri(uri)
        if cluster:
            parsed = urllib.parse.urlsplit(client_uri)
            nodes = []
            for location in parsed.netloc.rsplit("@", 1)[-1].split(","):
                host, _, port = location.strip().rpartition(":")
                nodes.append(redis.cluster.ClusterNode(host or "127.0.0.1", int(port or 6379)))
            kwargs = dict(options)
            if parsed.username:
                kwargs.setdefault("username", urllib.parse.unquote(parsed.username))
            if parsed.password:
                kwargs.setdefault("password", urllib.parse.unquote(parsed.password))
            if parsed.scheme == "rediss":
                kwargs.setdefault("ssl", True)
            self.storage: Any = redis.cluster.RedisCluster(startup_nodes=nodes, **kwargs)
        else:
            self.storage = redis.Redis.from_url(client_uri, **options)
        self.limiter = RateLimiter(self.storage, twins=twins or uri_twins)

    @property
    def base_exceptions(self) -> Any:
        return redis.RedisError

    # -- key names ------------------------------------------------------------------

    def prefixed_key(self, key: str) -> str:
        return f"{self.key_prefix}:{key}"

    def log_key(self, key: str) -> str:
        return f"{self.key_prefix}:log:{key}"

    def sliding_key(self, key: str) -> str:
        return f"{self.key_prefix}:sliding:{key}"

    # -- fixed window -----------------------------------------------------------------

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """The count the hit leaves (allowed), or would have made (refused: nothing is
        counted, and the count returned is above the limit)."""
        limit = limit_of(key) or UNLIMITED
        if amount > limit:
            return limit + amount
        result = self.limiter.fixed(self.prefixed_key(key), limit, int(expiry), cost=amount)
        used = result.limit - result.remaining
        return used if result.allowed else used + amount

    def get(self, key: str) -> int:
        return int(self.storage.get(self.prefixed_key(key)) or 0)

    def get_expiry(self, key: str) -> float:
        return max(self.storage.pttl(self.prefixed_key(key)), 0) / 1000 + time.time()

    def check(self) -> bool:
        """The server answers and can decide: it has the module's commands (or the
        storage runs the twins). False on a server without the module, where every hit
        would fail."""
        try:
            if not self.storage.ping():
                return False
            return self.limiter.twins or self.limiter.has_command("RL.FIXED")
        except Exception:  # noqa: BLE001 - a health check answers, it does not raise
            return False

    def reset(self) -> Optional[int]:
        """Delete every key under the prefix (SCAN, every primary of a Cluster)."""
        deleted = 0
        batch: List[Any] = []
        for key in self.storage.scan_iter(match=self.prefixed_key("*"), count=1000):
            batch.append(key)
            if len(batch) >= 500:
                deleted += self._delete(batch)
                batch = []
        if batch:
            deleted += self._delete(batch)
        return deleted

    def _delete(self, keys: List[Any]) -> int:
        pipe = self.storage.pipeline(transaction=False)
        for key in keys:
            pipe.delete(key)
        return sum(int(n) for n in pipe.execute())

    def clear(self, key: str) -> None:
        # One key per command: the pipeline keeps a Cluster happy.
        self._delete([self.prefixed_key(key), self.log_key(key)])

    # -- moving window ----------------------------------------------------------------

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False
        return self.limiter.log(self.log_key(key), limit, int(expiry), cost=amount).allowed

    def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[float, int]:
        """(time of the oldest hit in the window, hits in the window)."""
        log_key = self.log_key(key)
        peek = self.limiter.log(log_key, limit, int(expiry), cost=0)
        count = peek.limit - peek.remaining
        if count <= 0:
            return time.time(), 0
        # The log holds one member per unit of cost, scored in µs: the count-th newest
        # is the oldest hit still in the window.
        oldest = self.storage.zrevrange(log_key, count - 1, count - 1, withscores=True)
        if not oldest:
            return time.time(), count
        return float(oldest[0][1]) / 1e6, count

    # -- sliding window counter ---------------------------------------------------------

    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False
        return self.limiter.sliding([self.sliding_key(key)], [(int(expiry), limit)], cost=amount).allowed

    def get_sliding_window(self, key: str, expiry: int) -> Tuple[int, float, int, float]:
        """Everything counted is reported as the current window (the library weighs the
        previous one; RL.SLIDING has already counted what overlaps), with the time
        until the state is full again, below one window."""
        limit = limit_of(key) or UNLIMITED
        peek = self.limiter.sliding([self.sliding_key(key)], [(int(expiry), limit)], cost=0)
        used = peek.limit - peek.remaining
        reset = min(peek.reset_after_ms / 1000, expiry * (1 - 1e-9))
        return 0, 0.0, used, reset

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        self._delete([self.sliding_key(key)])
