"""What the WSGI and ASGI middleware share: their settings, choosing the policy of a
request and its keys, telling an outage of the limiter from a bug, the circuit breaker,
shadow mode, the leases a request holds, and the responses.

A request is decided by a plan (a generator) that yields the one call it needs and is
sent its result (or thrown its exception): the WSGI middleware runs it with a blocking
client, the ASGI one with an asyncio client, and both decide alike.
"""

from __future__ import annotations

import asyncio
import http
import ipaddress
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Sequence, Tuple, Union

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ._args import ONE_KEY
from ._slots import new_lease_id
from .headers import DEFAULT_STANDARD_HEADERS, StandardHeaders, ratelimit_headers, standard_drafts
from .lease import Lease
from .policies import All, Ban, Policy
from .results import RateLimit
from .twins import command_missing

log = logging.getLogger("redis_native_ratelimit")

#: How long a middleware waits for the limiter by default, in milliseconds, before it
#: serves the request unlimited (fail open) or refuses it (fail closed).
DEFAULT_TIMEOUT_MS = 250

#: How IPv6 client addresses are grouped by default (as express-rate-limit 8 does): a
#: /56 is what one customer of an ISP usually gets, and can change its low bits at will.
DEFAULT_IPV6_SUBNET = 56

#: How long a background release waits after a failure before it tries again.
RELEASE_RETRY_MS = 1000

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


class ModuleMissing(RuntimeError):
    """The server has no redis-ratelimit module, and the middleware was not allowed to
    use the Lua twins instead (``twins="fallback"``). Raised by a middleware that fails
    closed (``fail_open=False``) on every request it limits; a middleware that fails
    open logs it once, as an error, and serves the requests unlimited."""


#: What the error log and ModuleMissing say: the fix.
MISSING_MODULE_FIX = (
    "load the module into the server (loadmodule /path/to/libredis_ratelimit.so in its "
    "configuration, or MODULE LOAD), or pass twins=\"fallback\" to the middleware to run the "
    "commands' Lua twins on a server without it"
)


def _monotonic_ms() -> float:
    return time.monotonic() * 1000


class CircuitBreaker:
    """Stops a middleware from waiting for a limiter that has just failed.

    Closed, every request calls the limiter. ``failures`` failures in a row (default 1:
    a timeout, a refused or lost connection, a server loading or out of memory) open it:
    for ``cooldown_ms`` (default 1000) no request calls the limiter, each is served at
    once as the middleware fails (unlimited, or refused with 503). Then one request
    probes it (``"half-open"``; the others are still served at once): an answer closes
    the breaker, a failure opens it for another cooldown.

    ``now`` (milliseconds, monotonic) is the clock it reads; ``opened`` counts the times
    it opened after being closed and ``skipped`` the requests that did not call.
    """

    def __init__(self, failures: int = 1, cooldown_ms: float = 1000, now: Optional[Callable[[], float]] = None):
        if not isinstance(failures, int) or failures < 1:
            raise ValueError(f"a circuit breaker opens after at least 1 failure, not {failures!r}")
        if cooldown_ms is None or cooldown_ms <= 0:
            raise ValueError("a circuit breaker needs a positive cooldown_ms")
        self.failures = failures
        self.cooldown_ms = cooldown_ms
        self.now = now or _monotonic_ms
        self.opened = 0
        self.skipped = 0
        self.state = "closed"
        self._failed = 0
        self._opened_at = 0.0
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """Whether this request calls the limiter."""
        with self._lock:
            if self.state == "closed":
                return True
            if self.state == "open" and self.now() - self._opened_at >= self.cooldown_ms:
                self.state = "half-open"
                return True
            self.skipped += 1
            return False

    def success(self) -> bool:
        """The limiter answered: closed. True if it was not."""
        with self._lock:
            was = self.state
            self.state, self._failed = "closed", 0
            return was != "closed"

    def failure(self) -> bool:
        """The limiter failed. True if this failure opened a closed breaker."""
        with self._lock:
            self._failed += 1
            if self.state == "closed" and self._failed < self.failures:
                return False
            opened = self.state == "closed"
            if opened:
                self.opened += 1
            self.state, self._opened_at = "open", self.now()
            return opened


#: The ``breaker`` setting's default: a CircuitBreaker of its own, with its defaults.
_DEFAULT_BREAKER: Any = object()


def breaker_of(value: Any) -> Optional[CircuitBreaker]:
    """The ``breaker`` setting: a CircuitBreaker, its options as a dict (``failures``,
    ``cooldown_ms``), None/False for none, or the default (a CircuitBreaker of its own)."""
    if value is _DEFAULT_BREAKER:
        return CircuitBreaker()
    if value is None or value is False:
        return None
    if isinstance(value, CircuitBreaker):
        return value
    if isinstance(value, Mapping):
        return CircuitBreaker(**value)
    raise TypeError("breaker: a CircuitBreaker, its options as a dict, or None to call the limiter on every request")


def ip_key(address: Optional[str], ipv6_subnet: Union[int, bool, None] = DEFAULT_IPV6_SUBNET) -> str:
    """A client address as a rate limiting key: an IPv4 address as it is, an IPv6 one as
    its /``ipv6_subnet`` network (``2001:db8:1:2300::/56``; False or None: the whole
    address), as express-rate-limit 8's ``ipKeyGenerator``. An IPv4 address mapped into
    IPv6 (``::ffff:10.0.0.1``) is the IPv4 address."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if isinstance(ip, ipaddress.IPv4Address) or not ipv6_subnet:
        return str(ip)
    return str(ipaddress.ip_network(f"{ip}/{ipv6_subnet}", strict=False))


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


def rule_tag(rule: Policy, position: int) -> str:
    """The part of an All policy's key that names its rule: kind and 1-based place
    (``gcra1``, ``lease2``), so that one identity can be given to several rules."""
    return f"{type(rule).__name__.lower()}{position}"


def check_default_key(policy: Optional[Policy], key: Any, where: str) -> None:
    """At start-up: the default key is one identity, which an All policy of several
    rules cannot take."""
    if key is None and isinstance(policy, All) and len(policy.rules) > 1:
        raise ValueError(
            f"{where}: the All policy {policy.name!r} has {len(policy.rules)} rules, and the default key is "
            f"one identity (the client's address): give key= a function that returns a list of "
            f"{len(policy.rules)} identities, one per rule (the same one several times is fine)"
        )


def _identities(identity: Any) -> List[str]:
    """What a key function returned, one identity or a list of them, as a list of str."""
    idents = [identity] if isinstance(identity, ONE_KEY) else identity
    if isinstance(idents, (dict, set, frozenset)) or not hasattr(idents, "__iter__"):
        raise TypeError(f"the key function returned {identity!r}: an identity (str) or a list of them")
    return [i.decode() if isinstance(i, (bytes, bytearray)) else str(i) for i in idents]


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
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
        cost: Union[int, Callable[[Any], int]] = 1,
        standard_headers: StandardHeaders = DEFAULT_STANDARD_HEADERS,
        legacy_headers: bool = False,
        headers_when_allowed: bool = True,
        breaker: Any = _DEFAULT_BREAKER,
        message: Any = None,
        status_code: int = 429,
        handler: Optional[Callable[[Any, RateLimit], Any]] = None,
        skip: Optional[Callable[[Any], bool]] = None,
        ipv6_subnet: Union[int, bool, None] = DEFAULT_IPV6_SUBNET,
        shadow: bool = False,
        ban: Optional[Ban] = None,
        logger: Optional[logging.Logger] = None,
    ):
        if timeout_ms is None or timeout_ms <= 0:
            raise ValueError("the middleware needs a positive timeout_ms")
        if ipv6_subnet not in (False, None) and not (isinstance(ipv6_subnet, int) and 1 <= ipv6_subnet <= 128):
            raise ValueError(f"ipv6_subnet: a prefix length from 1 to 128 (default 56), or False, not {ipv6_subnet!r}")
        if not isinstance(status_code, int) or not 400 <= status_code <= 599:
            raise ValueError(f"status_code: an HTTP error status (429 by default), not {status_code!r}")
        for name, value in (("key", key), ("skip", skip), ("handler", handler)):
            if value is not None and not callable(value):
                raise TypeError(f"{name}: a function of the request, not {value!r}")
        if ban is not None and not isinstance(ban, Ban):
            raise TypeError(f"ban takes a Ban policy (strikes, window, duration), not {ban!r}")
        self.breaker = breaker_of(breaker)
        self.policy = policy
        self.key = key
        self.routes = dict(routes or {})
        self.prefix = prefix
        self.fail_open = fail_open
        self.timeout_ms = timeout_ms
        self.cost = cost
        self.standard_headers = standard_drafts(standard_headers)
        self.legacy_headers = legacy_headers
        self.headers_when_allowed = headers_when_allowed
        self.message = message
        self.status_code = status_code
        self.handler = handler
        self.skip = skip
        self.ipv6_subnet = ipv6_subnet
        self.shadow = shadow
        self.ban = ban
        self.log = logger or log
        for p in [policy, *self.routes.values()]:
            if isinstance(p, Policy):
                check_default_key(p, key, "RateLimitMiddleware")

    @property
    def timeout(self) -> float:
        """The timeout in seconds."""
        return self.timeout_ms / 1000

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

    def keys_for(self, policy: Policy, identity: Any) -> List[str]:
        """The Redis keys of a request: ``<prefix><policy name>:<identity>``; for an All
        policy one identity per rule, each key naming its rule
        (``<prefix><policy name>:<kind><place>:<identity>``). An identity list that does
        not fit the policy is a ValueError that says what it needs."""
        idents = _identities(identity)
        base = f"{self.prefix}{policy.name}:"
        if isinstance(policy, All):
            n = len(policy.rules)
            if isinstance(identity, ONE_KEY) and n > 1 or len(idents) != n:
                raise ValueError(
                    f"the All policy {policy.name!r} has {n} rules, and the key function returned "
                    f"{identity!r}: return a list of {n} identities, one per rule in the rules' order "
                    f"(the same one several times is fine)"
                )
            return [base + f"{rule_tag(rule, i)}:{ident}" for i, (rule, ident) in enumerate(zip(policy.rules, idents), 1)]
        if not idents or policy.keys == 1 and len(idents) != 1:
            raise ValueError(
                f"the {type(policy).__name__} policy {policy.name!r} takes "
                f"{'one identity' if policy.keys == 1 else 'one identity or more'}, and the key function "
                f"returned {identity!r}"
            )
        return [base + i for i in idents]

    def with_ban(self, policy: Policy, keys: List[str], identity: Any) -> Tuple[Policy, List[str]]:
        """The policy and keys a request is checked with: as they are, or with the
        ``ban`` penalty box added (one RL.ALL call: the policy's rules on their keys, and
        a BAN rule on the first identity's ban key, ``<prefix><ban name>:<identity>``, so
        a caller refused ``strikes`` times within its window is refused for its
        duration)."""
        if self.ban is None:
            return policy, keys
        first = _identities(identity)[0]
        rules = list(policy.rules) if isinstance(policy, All) else [policy] * len(keys)
        return All(rules + [self.ban], name=policy.name), keys + [f"{self.prefix}{self.ban.name}:{first}"]

    def cost_for(self, request: Any) -> int:
        return self.cost(request) if callable(self.cost) else self.cost

    def headers(self, result: RateLimit, retry_after: bool = True, retry_after_ms: Optional[int] = None) -> Dict[str, str]:
        return ratelimit_headers(
            result,
            standard_headers=self.standard_headers,
            legacy_headers=self.legacy_headers,
            retry_after=retry_after,
            retry_after_ms=retry_after_ms,
        )

    def too_many(self, decision: "Decision", request: Any) -> Tuple[int, List[Tuple[str, str]], bytes]:
        """The refusal's status, headers and body (``message``: a value, or a function of
        the result and the request; a dict or list is sent as JSON, a str as text,
        bytes as they are)."""
        if self.message is None:
            value: Any = {"error": "too many requests", "retry_after_ms": decision.retry_after_ms}
        elif callable(self.message):
            value = self.message(decision.result, request)
        else:
            value = self.message
        body, ctype = _body(value)
        out = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
        return self.status_code, out + list(decision.headers.items()), body


class Shadow:
    """Shadow mode's record: every would-be denial is counted (``denials``) and the
    first of each key and window is logged (a warning naming the policy and the key),
    again once that refusal would have ended; the request passes. ``now``
    (milliseconds, monotonic) is the clock that tells when that time has come."""

    #: How many keys it remembers as logged; the oldest are forgotten past it.
    REMEMBERED = 10_000

    def __init__(self, logger: logging.Logger, now: Optional[Callable[[], float]] = None):
        self.log = logger
        self.now = now or _monotonic_ms
        self.denials = 0
        self._logged: Dict[Tuple[str, Tuple[str, ...]], float] = {}
        self._lock = threading.Lock()

    def denied(self, policy: Policy, keys: Sequence[str], result: RateLimit) -> None:
        now = self.now()
        with self._lock:
            self.denials += 1
            which = (policy.name, tuple(keys))
            if self._logged.get(which, -1.0) > now:
                return
            if len(self._logged) >= self.REMEMBERED:
                self._logged = {k: v for k, v in self._logged.items() if v > now}
                while len(self._logged) >= self.REMEMBERED:
                    self._logged.pop(next(iter(self._logged)))
            # Said again once the refusal would have ended (a new window, for a window).
            self._logged[which] = now + max(result.retry_after_ms, 1)
        self.log.warning(
            'shadow mode: policy "%s" would refuse %s (retry in %d ms); the request passes',
            policy.name,
            ", ".join(keys),
            result.retry_after_ms,
        )


class Guard:
    """What a middleware knows of its limiter, shared by its requests: the circuit
    breaker, and whether the server lacks the module (found out on the first call that
    says so, logged once as an error)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.module_missing = False
        self._lock = threading.Lock()

    def allow(self) -> bool:
        breaker = self.settings.breaker
        return breaker is None or breaker.allow()

    def succeeded(self) -> None:
        breaker = self.settings.breaker
        if breaker is not None and breaker.success():
            self.settings.log.warning("rate limiter available again: requests are limited")
        self.module_missing = False

    def failed(self, exc: BaseException, where: str) -> None:
        """A call that failed: an outage, or a server without the module (logged, and
        counted by the breaker); the request then fails open or closed. Raises what is
        neither."""
        s = self.settings
        if command_missing(exc):
            with self._lock:
                first = not self.module_missing
                self.module_missing = True
            if first:
                s.log.error(
                    "the Redis server has no redis-ratelimit module (%s): requests are %s until it is "
                    "loaded. To fix: %s",
                    exc,
                    "served unlimited" if s.fail_open else "refused (ModuleMissing)",
                    MISSING_MODULE_FIX,
                )
            if s.breaker is not None:
                s.breaker.failure()
            return
        if not is_outage(exc):
            self.succeeded()  # the server answered: the error is the call's own (a bug)
            raise exc
        how = "served unlimited" if s.fail_open else "refused"
        breaker = s.breaker
        was = "closed" if breaker is None else breaker.state
        if breaker is not None and breaker.failure():
            s.log.warning(
                "rate limiter unavailable (%s: %s): requests %s without calling it for %g ms, then one tries again",
                type(exc).__name__,
                exc,
                how,
                breaker.cooldown_ms,
                extra={"path": where},
            )
        elif was != "closed":
            s.log.warning(
                "rate limiter still unavailable (%s: %s): another %g ms without calling it",
                type(exc).__name__,
                exc,
                breaker.cooldown_ms,  # type: ignore[union-attr]
                extra={"path": where},
            )
        else:
            s.log.warning("rate limiter unavailable (%s: %s): request %s", type(exc).__name__, exc, how, extra={"path": where})


@dataclass
class Decision:
    """What the middleware decided for a request: ``"pass"`` (served as it is: no limit,
    skipped, or the limiter unavailable and failing open), ``"unavailable"`` (503),
    ``"limited"`` (the refusal) or ``"allowed"`` (served, with ``headers`` on its
    response and ``leases`` to release once it is sent). ``orphans`` are leases a call
    the middleware gave up on may have taken: released in the background."""

    kind: str
    result: Optional[RateLimit] = None
    headers: Dict[str, str] = field(default_factory=dict)
    leases: List[Tuple[Any, Any]] = field(default_factory=list)
    retry_after_ms: int = -1
    orphans: List[Tuple[Any, Any]] = field(default_factory=list)
    orphan_ttl_ms: int = 0


#: One call a plan needs: (policy, keys, cost, lease id).
Ask = Tuple[Policy, List[str], int, Optional[str]]
#: A step of a release plan: ("release", key, lease id) or ("sleep", seconds, None).
Chore = Tuple[str, Any, Any]
Plan = Generator[Ask, Any, Decision]


def _leases_of(policy: Policy, keys: Sequence[Any]) -> List[Tuple[Any, Lease]]:
    """(key, Lease) of each lease a call of the policy takes."""
    if isinstance(policy, Lease):
        return [(keys[0], policy)]
    if isinstance(policy, All):
        return [(k, rule) for k, rule in zip(keys, policy.rules) if isinstance(rule, Lease)]
    return []


def _binding_lease(policy: Policy, result: RateLimit) -> Optional[Lease]:
    """The Lease that refused a request, if a lease did."""
    if isinstance(policy, Lease):
        return policy
    if isinstance(policy, All) and result.rule is not None and 1 <= result.rule <= len(policy.rules):
        rule = policy.rules[result.rule - 1]
        return rule if isinstance(rule, Lease) else None
    return None


class Limiting:
    """The part of a middleware that decides requests: its settings, guard and shadow
    record; the WSGI and ASGI middleware run its plans with their own clients."""

    def __init__(self, policy: PolicyChoice, settings: Dict[str, Any]):
        self.settings = Settings(policy, **settings)
        self.guard = Guard(self.settings)
        self.shadow = Shadow(self.settings.log)
        self._counts = {"allowed": 0, "limited": 0}
        self._counting = threading.Lock()

    def _count(self, decision: Decision) -> Decision:
        if decision.kind in self._counts:
            with self._counting:
                self._counts[decision.kind] += 1
        return decision

    @property
    def breaker(self) -> Optional[CircuitBreaker]:
        return self.settings.breaker

    @property
    def shadow_denials(self) -> int:
        """Shadow mode: how many requests would have been refused (and passed)."""
        return self.shadow.denials

    def stats(self) -> Dict[str, Any]:
        """What the middleware counted: the requests ``allowed`` and ``limited`` (refused),
        the ``shadow_denials`` (would-be refusals that passed, also counted as allowed),
        and the breaker's ``state``, ``opened`` and ``skipped`` (None without a
        breaker)."""
        b = self.settings.breaker
        return {
            **self._counts,
            "shadow_denials": self.shadow.denials,
            "breaker": None if b is None else {"state": b.state, "opened": b.opened, "skipped": b.skipped},
        }

    def default_key(self, request: Any) -> Optional[str]:  # pragma: no cover - per framework
        raise NotImplementedError

    def check_route(self, policy: Policy, key: Any) -> None:
        """At decoration: a route's own policy fits the key it will be given."""
        check_default_key(policy, key or self.settings.key, "limit()")

    def deciding(
        self,
        request: Any,
        policy: Policy,
        where: str,
        key: Optional[Callable[[Any], Any]] = None,
        cost: Union[int, Callable[[Any], int], None] = None,
    ) -> Plan:
        """The plan of one request under ``policy`` (``key`` and ``cost`` override the
        settings' for a route)."""
        s = self.settings
        if s.skip is not None and s.skip(request):
            return Decision("pass")
        identity = (key or s.key or self.default_key)(request)
        if identity is None:
            return Decision("pass")
        if cost is None:
            cost = s.cost_for(request)
        elif callable(cost):
            cost = cost(request)
        checked, keys = s.with_ban(policy, s.keys_for(policy, identity), identity)
        if not self.guard.allow():
            return self._down()
        leases = _leases_of(checked, keys)
        lease_id = new_lease_id() if leases else None
        try:
            result = yield (checked, keys, cost, lease_id)
        except Exception as exc:
            self.guard.failed(exc, where)
            down = self._down()
            if leases:
                down.orphans = [(k, lease_id) for k, _ in leases]
                down.orphan_ttl_ms = max(rule.ttl_ms or 0 for _, rule in leases)
            return down
        self.guard.succeeded()
        if not result.allowed:
            lease = _binding_lease(checked, result)
            retry_ms = result.retry_after_ms if lease is None else lease.retry_after_ms
            if not s.shadow:
                headers = s.headers(result, retry_after_ms=retry_ms)
                return self._count(Decision("limited", result, headers, retry_after_ms=retry_ms))
            self.shadow.denied(checked, keys, result)
        headers = s.headers(result, retry_after=False) if s.headers_when_allowed else {}
        held = [(k, lease_id) for k, _ in leases] if result.allowed else []
        return self._count(Decision("allowed", result, headers, leases=held))

    def _down(self) -> Decision:
        """The limiter cannot answer: fail open (pass) or closed (503, or ModuleMissing
        on a server without the module)."""
        if self.settings.fail_open:
            return Decision("pass")
        if self.guard.module_missing:
            raise ModuleMissing("the Redis server has no redis-ratelimit module: " + MISSING_MODULE_FIX)
        return Decision("unavailable", headers={"Retry-After": "1"})

    def release_failed(self, exc: BaseException, key: Any) -> None:
        """A lease the middleware could not release: it frees itself at its ttl."""
        self.settings.log.warning(
            "lease on %r not released (%s: %s): it frees itself at its ttl", key, type(exc).__name__, exc
        )

    def releasing(self, leases: Sequence[Tuple[Any, Any]]) -> Generator[Chore, Any, None]:
        """The plan that releases a request's leases once its response is sent (one
        try each: a lease not released frees itself at its ttl)."""
        for key, lease_id in leases:
            try:
                yield ("release", key, lease_id)
            except Exception as exc:  # noqa: BLE001 - it frees itself at its ttl
                self.release_failed(exc, key)

    def releasing_later(self, leases: Sequence[Tuple[Any, Any]], ttl_ms: int) -> Generator[Chore, Any, None]:
        """The plan that releases leases a call the middleware gave up on may have taken
        (the server may run it late), run in the background: tried again every second
        until the server answers, or until the leases' ttl has freed them anyway.
        Releasing an id that holds nothing is harmless."""
        pending = list(leases)
        deadline = time.monotonic() + ttl_ms / 1000
        while pending and time.monotonic() < deadline:
            key, lease_id = pending[0]
            try:
                yield ("release", key, lease_id)
            except Exception as exc:  # noqa: BLE001 - try again, or leave it to its ttl
                if not is_outage(exc):
                    self.release_failed(exc, key)
                    return
                yield ("sleep", RELEASE_RETRY_MS / 1000, None)
                continue
            pending.pop(0)


def _body(value: Any) -> Tuple[bytes, str]:
    if isinstance(value, (dict, list)):
        return json.dumps(value).encode(), "application/json"
    if isinstance(value, str):
        return value.encode("utf-8"), "text/plain; charset=utf-8"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value), "application/octet-stream"
    raise TypeError(f"message must be (or return) a dict, a list, a str or bytes, not {type(value).__name__}")


def unavailable() -> Tuple[int, List[Tuple[str, str]], bytes]:
    body = json.dumps({"error": "rate limiter unavailable"}).encode()
    out = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Retry-After", "1")]
    return 503, out, body


def with_headers(response: Any, headers: Mapping[str, str]) -> Any:
    """A framework's response (Flask's, Starlette's) with the rate limit headers it does
    not set itself."""
    for name, value in headers.items():
        if name not in response.headers:
            response.headers[name] = value
    return response


def status_line(status: int) -> str:
    """A WSGI status line: ``"429 Too Many Requests"``."""
    try:
        return f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Error"


def bounded_client(client: Any, timeout: float) -> Any:
    """A client that gives up after ``timeout`` seconds without retrying: a URL makes
    one; a ``redis.Redis`` is copied onto a new pool with those settings (the caller's
    pool is left as it is); other clients are used as they are."""
    no_retry = Retry(NoBackoff(), 0)
    if isinstance(client, str):
        return redis.Redis.from_url(client, socket_timeout=timeout, socket_connect_timeout=timeout, retry=no_retry)
    if isinstance(client, redis.Redis):
        pool = client.connection_pool
        kwargs = dict(pool.connection_kwargs)
        for name in ("socket_timeout", "socket_connect_timeout"):
            current = kwargs.get(name)
            kwargs[name] = timeout if current is None else min(current, timeout)
        kwargs["retry"] = no_retry
        kwargs["retry_on_error"] = []
        kwargs.pop("retry_on_timeout", None)
        new_pool = type(pool)(connection_class=pool.connection_class, max_connections=pool.max_connections, **kwargs)
        return redis.Redis(connection_pool=new_pool)
    return client
