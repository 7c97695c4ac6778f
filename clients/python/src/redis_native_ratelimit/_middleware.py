"""What the WSGI and ASGI middleware share: choosing the policy of a request, its keys,
telling an outage of the limiter from a bug, and the responses."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import redis

from .headers import ratelimit_headers
from .policies import All, Ban, Policy
from .results import RateLimit

log = logging.getLogger("redis_native_ratelimit")

#: How long a middleware waits for the limiter by default, in seconds, before it
#: serves the request unlimited (fail open) or refuses it (fail closed).
DEFAULT_TIMEOUT = 0.25

PolicyChoice = Union[Policy, Callable[[Any], Optional[Policy]], None]
Routes = Mapping[str, Optional[Policy]]

_OUT_OF_MEMORY = tuple(e for e in [getattr(redis.exceptions, "OutOfMemoryError", None)] if e is not None)
_OUTAGE_REPLIES = ("unknown command", "loading", "masterdown", "clusterdown", "tryagain", "readonly", "oom", "busy")


def is_outage(exc: BaseException) -> bool:
    """True when the limiter could not answer (connection refused or lost, timeout,
    a server loading or without the module); False for errors in the call itself
    (bad arguments), which are bugs to surface. A server out of memory (OOM) counts as
    an outage: requests go through while memory is full, and every denial is still a
    denial."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return True
    if isinstance(exc, redis.exceptions.ResponseError):
        if isinstance(exc, (redis.exceptions.ReadOnlyError,) + _OUT_OF_MEMORY):
            return True
        return str(exc).lower().startswith(_OUTAGE_REPLIES)
    if isinstance(exc, redis.exceptions.DataError):
        return False
    return isinstance(exc, (redis.exceptions.RedisError, OSError))


#: The commands the module adds: a server that answers ``unknown command`` to one of
#: them has no module loaded.
_MODULE_COMMANDS = ("'rl.", "'cl.throttle'")


def is_missing_module(exc: BaseException) -> bool:
    """True when the server answered that it does not know a command of the module:
    the module is not loaded there (a mistake of the deployment, not an outage)."""
    if not isinstance(exc, redis.exceptions.ResponseError):
        return False
    text = str(exc).lower()
    return text.startswith("unknown command") and any(c in text for c in _MODULE_COMMANDS)


class ModuleMissing(RuntimeError):
    """The server has no redis-ratelimit module, and the middleware was not allowed to
    use the Lua twins instead (``twins="auto"``). Raised by a middleware that fails
    closed (``fail_open=False``) on every request it limits; a middleware that fails
    open logs it once, as an error, and serves the requests unlimited."""


#: What the error log and ModuleMissing say: the fix.
MISSING_MODULE_FIX = (
    "load the module into the server (loadmodule /path/to/libredis_ratelimit.so in its "
    "configuration, or MODULE LOAD), or pass twins=\"auto\" to the middleware to run the "
    "commands' Lua twins on a server without it"
)


class CircuitBreaker:
    """Stops a middleware from waiting for a limiter that has just failed.

    Closed, every request calls the limiter. A failure (a timeout, a refused or lost
    connection, a server loading or out of memory) opens it: for ``cooldown`` seconds
    no request calls the limiter, each is served at once as the middleware fails
    (unlimited, or refused with 503). Then one request tries again: if it gets an
    answer the breaker closes, if not it stays open for another ``cooldown``.

    ``clock`` (seconds, monotonic) is the time it reads; ``opened`` counts the times it
    opened after being closed and ``skipped`` the requests that did not call.
    """

    def __init__(self, cooldown: float = 5.0, clock: Callable[[], float] = time.monotonic):
        if cooldown is None or cooldown <= 0:
            raise ValueError("a circuit breaker needs a positive cooldown, in seconds")
        self.cooldown = cooldown
        self.clock = clock
        self.opened = 0
        self.skipped = 0
        self._retry_at: Optional[float] = None  # None: closed
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        """``"closed"`` or ``"open"``."""
        return "closed" if self._retry_at is None else "open"

    def allow(self) -> bool:
        """Whether this request calls the limiter. Once the cooldown is over one request
        does (the trial); the others go on being skipped until it answers, or for one
        more cooldown if it never does."""
        with self._lock:
            if self._retry_at is None:
                return True
            now = self.clock()
            if now >= self._retry_at:
                self._retry_at = now + self.cooldown
                return True
            self.skipped += 1
            return False

    def success(self) -> bool:
        """The limiter answered: closed. True if it was open."""
        with self._lock:
            was_open = self._retry_at is not None
            self._retry_at = None
            return was_open

    def failure(self) -> bool:
        """The limiter failed: open for a cooldown from now. True if it was closed."""
        with self._lock:
            was_closed = self._retry_at is None
            self._retry_at = self.clock() + self.cooldown
            if was_closed:
                self.opened += 1
            return was_closed


_DEFAULT_BREAKER: Any = object()


def _matches(pattern: str, method: str, path: str) -> Optional[int]:
    """How specific a route pattern (``"/login"``, ``"POST /login"``, ``"/api/"``) is
    for this request, or None if it does not apply."""
    want_method, _, prefix = pattern.rpartition(" ")
    if want_method and want_method.upper() != method.upper():
        return None
    if path == prefix or prefix.endswith("/") and path.startswith(prefix):
        return len(prefix) * 2 + (1 if want_method else 0)
    if path.startswith(prefix.rstrip("/") + "/"):
        return len(prefix) * 2 + (1 if want_method else 0)
    return None


class Settings:
    """The middleware's settings (the keyword arguments of both middleware)."""

    def __init__(
        self,
        policy: PolicyChoice = None,
        *,
        key: Optional[Callable[[Any], Union[None, str, Sequence[str]]]] = None,
        routes: Optional[Routes] = None,
        prefix: str = "rl:",
        fail_open: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
        cost: Union[int, Callable[[Any], int]] = 1,
        legacy_headers: bool = True,
        draft_headers: bool = True,
        x_prefix: bool = False,
        headers_when_allowed: bool = True,
        breaker: Optional[CircuitBreaker] = _DEFAULT_BREAKER,
        limited_body: Optional[Callable[[RateLimit], Any]] = None,
        limited_content_type: Optional[str] = None,
        ban: Optional[Ban] = None,
    ):
        if timeout is None or timeout <= 0:
            raise ValueError("the middleware needs a positive timeout, in seconds")
        if breaker is _DEFAULT_BREAKER:
            breaker = CircuitBreaker()
        if breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise TypeError("breaker: a CircuitBreaker, or None to call the limiter on every request")
        self.breaker: Optional[CircuitBreaker] = breaker
        self.limited_body = limited_body
        self.limited_content_type = limited_content_type
        self.policy = policy
        self.key = key
        self.routes = dict(routes or {})
        self.prefix = prefix
        self.fail_open = fail_open
        self.timeout = timeout
        self.cost = cost
        self.legacy_headers = legacy_headers
        self.draft_headers = draft_headers
        self.x_prefix = x_prefix
        self.headers_when_allowed = headers_when_allowed
        if ban is not None and not isinstance(ban, Ban):
            raise TypeError(f"ban takes a Ban policy (strikes, window, duration), not {ban!r}")
        self.ban = ban

    def policy_for(self, request: Any, method: str, path: str) -> Optional[Policy]:
        best: Tuple[int, Optional[Policy]] = (-1, None)
        for pattern, policy in self.routes.items():
            score = _matches(pattern, method, path)
            if score is not None and score > best[0]:
                best = (score, policy)
        if best[0] >= 0:
            return best[1]
        if self.policy is None or isinstance(self.policy, Policy):
            return self.policy
        return self.policy(request)

    def keys_for(self, policy: Policy, identity: Union[str, Sequence[str]]) -> List[str]:
        idents = [identity] if isinstance(identity, (str, bytes)) else list(identity)
        return [f"{self.prefix}{policy.name}:{i.decode() if isinstance(i, bytes) else i}" for i in idents]

    def with_ban(self, policy: Policy, keys: List[str]) -> Tuple[Policy, List[str]]:
        """The policy and keys a request is checked with: as they are, or with the
        ``ban`` penalty box added (one RL.ALL call: the policy's rules on their keys, and
        a BAN rule on the first identity's ban key, so a caller refused ``strikes`` times
        within its window is refused for its duration)."""
        if self.ban is None:
            return policy, keys
        rules = list(policy.rules) if isinstance(policy, All) else [policy] * len(keys)
        ban_key = keys[0].replace(f"{self.prefix}{policy.name}:", f"{self.prefix}{self.ban.name}:", 1)
        return All(rules + [self.ban], name=policy.name), keys + [ban_key]

    def cost_for(self, request: Any) -> int:
        return self.cost(request) if callable(self.cost) else self.cost

    def headers(self, result: RateLimit) -> Dict[str, str]:
        return ratelimit_headers(
            result, legacy=self.legacy_headers, draft=self.draft_headers, x_prefix=self.x_prefix
        )

    def too_many(self, result: RateLimit, headers: Dict[str, str]) -> Tuple[int, List[Tuple[str, str]], bytes]:
        return too_many(result, headers, self.limited_body, self.limited_content_type)


#: What the guard says of a failed call.
OUTAGE, MISSING, USE_TWINS = "outage", "missing", "twins"


class Guard:
    """What a middleware knows of its limiter, shared by its requests: the circuit
    breaker, and whether the server lacks the module (found out on the first call that
    says so, logged once as an error; with ``twins="auto"`` the calls move to the Lua
    twins)."""

    def __init__(self, settings: Settings, twins: Union[bool, str]):
        if twins not in (False, True, "auto"):
            raise ValueError('twins: False (the module), True (the Lua twins) or "auto" (the twins where the module is missing)')
        self.settings = settings
        self.auto_twins = twins == "auto"
        self.use_twins = twins is True
        self.module_missing = False
        self._lock = threading.Lock()

    def allow(self) -> bool:
        breaker = self.settings.breaker
        return breaker is None or breaker.allow()

    def succeeded(self) -> None:
        breaker = self.settings.breaker
        if breaker is not None and breaker.success():
            log.warning("rate limiter available again: requests are limited")
        if self.module_missing:
            self.module_missing = False

    def failed(self, exc: BaseException, where: str) -> str:
        """OUTAGE (the request fails open or closed), MISSING (the same, the module is
        not loaded) or USE_TWINS (call the twins now); raises what is neither."""
        s = self.settings
        if is_missing_module(exc) and not self.use_twins:
            with self._lock:
                first = not self.module_missing
                self.module_missing = True
                if self.auto_twins:
                    self.use_twins = True
            if self.auto_twins:
                log.error(
                    "the Redis server has no redis-ratelimit module (%s): the middleware now runs the "
                    "commands' Lua twins, slower (their Functions library when it is loaded, "
                    "redis_native_ratelimit.twins.load_library, else their scripts); load the module into the "
                    "server to use its commands",
                    exc,
                )
                return USE_TWINS
            if first:
                log.error(
                    "the Redis server has no redis-ratelimit module (%s): requests are %s until it is "
                    "loaded. To fix: %s",
                    exc,
                    "served unlimited" if s.fail_open else "refused (ModuleMissing)",
                    MISSING_MODULE_FIX,
                )
            if s.breaker is not None:
                s.breaker.failure()
            return MISSING
        if not is_outage(exc):
            raise exc
        breaker = s.breaker
        if breaker is None:
            log.warning(
                "rate limiter unavailable (%s: %s): request %s",
                type(exc).__name__,
                exc,
                "served unlimited" if s.fail_open else "refused",
                extra={"path": where},
            )
        elif breaker.failure():
            log.warning(
                "rate limiter unavailable (%s: %s): requests %s without calling it for %g s, then one tries again",
                type(exc).__name__,
                exc,
                "served unlimited" if s.fail_open else "refused",
                breaker.cooldown,
                extra={"path": where},
            )
        else:
            log.warning(
                "rate limiter still unavailable (%s: %s): another %g s without calling it",
                type(exc).__name__,
                exc,
                breaker.cooldown,
                extra={"path": where},
            )
        return OUTAGE

    def refuse_missing(self) -> None:
        """Fail closed on a server without the module: raise."""
        raise ModuleMissing("the Redis server has no redis-ratelimit module: " + MISSING_MODULE_FIX)


def _body(value: Any, content_type: Optional[str]) -> Tuple[bytes, str]:
    if isinstance(value, (dict, list)):
        return json.dumps(value).encode(), content_type or "application/json"
    if isinstance(value, str):
        return value.encode("utf-8"), content_type or "text/plain; charset=utf-8"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value), content_type or "application/octet-stream"
    raise TypeError(f"limited_body must return a dict, a list, a str or bytes, not {type(value).__name__}")


def held_leases(policy: Policy, keys: Sequence[Any], result: RateLimit) -> List[Tuple[Any, Any]]:
    """The leases an allowed request holds until its response is sent: (key, lease id)
    of a Lease policy, or of each Lease rule of an All policy."""
    from .lease import Lease
    from .policies import All

    if not result.allowed or result.lease_id is None:
        return []
    if isinstance(policy, Lease):
        return [(keys[0], result.lease_id)]
    if isinstance(policy, All):
        return [(k, result.lease_id) for k, rule in zip(keys, policy.rules) if isinstance(rule, Lease)]
    return []


def release_failed(exc: BaseException, key: Any) -> None:
    """A lease the middleware could not release: it frees itself at its ttl."""
    log.warning("lease on %r not released (%s: %s): it frees itself at its ttl", key, type(exc).__name__, exc)


def too_many(
    result: RateLimit,
    headers: Dict[str, str],
    body_of: Optional[Callable[[RateLimit], Any]] = None,
    content_type: Optional[str] = None,
) -> Tuple[int, List[Tuple[str, str]], bytes]:
    """The 429 response: ``body_of(result)`` (a dict or list sent as JSON, a str as
    text, bytes as they are) or the default JSON body."""
    if body_of is None:
        value: Any = {"error": "too many requests", "retry_after_ms": result.retry_after_ms}
    else:
        value = body_of(result)
    body, ctype = _body(value, content_type)
    out = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
    return 429, out + list(headers.items()), body


def unavailable() -> Tuple[int, List[Tuple[str, str]], bytes]:
    body = json.dumps({"error": "rate limiter unavailable"}).encode()
    out = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Retry-After", "1")]
    return 503, out, body
