"""What the WSGI and ASGI middleware share: choosing the policy of a request, its keys,
telling an outage of the limiter from a bug, and the responses."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import redis

from .headers import ratelimit_headers
from .policies import Policy
from .results import RateLimit

log = logging.getLogger("redis_ratelimit")

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
    ):
        if timeout is None or timeout <= 0:
            raise ValueError("the middleware needs a positive timeout, in seconds")
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

    def cost_for(self, request: Any) -> int:
        return self.cost(request) if callable(self.cost) else self.cost

    def headers(self, result: RateLimit) -> Dict[str, str]:
        return ratelimit_headers(
            result, legacy=self.legacy_headers, draft=self.draft_headers, x_prefix=self.x_prefix
        )

    def outage(self, exc: BaseException, where: str) -> None:
        log.warning(
            "rate limiter unavailable (%s: %s): request %s",
            type(exc).__name__,
            exc,
            "served unlimited" if self.fail_open else "refused",
            extra={"path": where},
        )


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


def too_many(result: RateLimit, headers: Dict[str, str]) -> Tuple[int, List[Tuple[str, str]], bytes]:
    body = json.dumps({"error": "too many requests", "retry_after_ms": result.retry_after_ms}).encode()
    out = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    return 429, out + list(headers.items()), body


def unavailable() -> Tuple[int, List[Tuple[str, str]], bytes]:
    body = json.dumps({"error": "rate limiter unavailable"}).encode()
    out = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Retry-After", "1")]
    return 503, out, body
