"""redis-native-ratelimit: typed Python calls of the redis-ratelimit module's native commands,
their HTTP headers, WSGI and ASGI middleware, and a storage for the `limits` library.

- :class:`RateLimiter` / :class:`redis_native_ratelimit.asyncio.AsyncRateLimiter`: every command,
  results as frozen dataclasses (:class:`RateLimit`, :class:`Throttle`, :class:`Sweep`);
- policies (:class:`Fixed`, :class:`Gcra`, :class:`Multi`, :class:`Sliding`, :class:`Log`,
  :class:`Lease`, :class:`All`, and :class:`Ban`, RL.ALL's penalty box): limits without
  their keys, for the middleware and RL.ALL; ``refund=``/``force=`` on every call, and
  :meth:`RateLimiter.reserve` / :meth:`Reservation.settle` to settle a cost known only
  afterwards;
- local budgets (``limiter.local_budget(policy, key, batch=100)``, :class:`LocalBudget`):
  a hot key's limit spent in the process, a batch at a time taken with ``UPTO``, never
  a unit more than the server granted;
- leases (``limiter.lease(key, limit, ttl)``, :class:`HeldLease`, :class:`LeaseDenied`):
  how many at once, released on exit and renewed in the background;
- :class:`Strict`: strict mode, a grant counted only once a replica holds it;
- :func:`ratelimit_headers`: ``RateLimit-*``, the IETF draft's ``RateLimit-Policy`` and
  ``RateLimit``, ``Retry-After``;
- :mod:`redis_native_ratelimit.wsgi` and :mod:`redis_native_ratelimit.asgi`: middleware that fails open,
  behind a circuit breaker, with shadow mode; :func:`ip_key`, the default key's address
  (an IPv6 one grouped by its /56);
- :mod:`redis_native_ratelimit.limits_storage`: registered as ``redis+ratelimit://`` when the
  `limits` library is installed.
"""

from ._middleware import CircuitBreaker, ModuleMissing, ip_key
from .budget import AsyncLocalBudget, BudgetClosed, LocalBudget
from .client import RateLimiter, Reservation
from .headers import DEFAULT_STANDARD_HEADERS, IETF_DRAFT, ceil_seconds, ratelimit_headers
from .lease import HeldLease, Lease, LeaseDenied
from .policies import All, Ban, Fixed, Gcra, Log, Multi, Policy, Sliding
from .results import Quota, RateLimit, Sweep, Throttle
from .strict import Strict
from .twins import TwinUnavailable

__version__ = "0.1.0"

__all__ = [
    "All",
    "AsyncLocalBudget",
    "Ban",
    "BudgetClosed",
    "CircuitBreaker",
    "DEFAULT_STANDARD_HEADERS",
    "Fixed",
    "Gcra",
    "HeldLease",
    "IETF_DRAFT",
    "Lease",
    "LeaseDenied",
    "LocalBudget",
    "Log",
    "ModuleMissing",
    "Multi",
    "Policy",
    "Quota",
    "RateLimit",
    "RateLimiter",
    "Reservation",
    "Sliding",
    "Strict",
    "Sweep",
    "Throttle",
    "TwinUnavailable",
    "ceil_seconds",
    "ip_key",
    "ratelimit_headers",
]

try:  # registers redis+ratelimit:// with the `limits` library, when it is installed
    import limits as _limits  # noqa: F401
except ImportError:  # pragma: no cover - the storage needs the library
    pass
else:
    from . import limits_storage  # noqa: F401
