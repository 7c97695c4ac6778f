"""HTTP headers from a result, in the header families express-rate-limit 8 names.

- ``standard_headers``: the IETF drafts' fields, one draft or several:

  - ``"draft-6"``: ``RateLimit-Limit``, ``RateLimit-Remaining``, ``RateLimit-Reset`` (the
    widely deployed fields) and ``RateLimit-Policy: limit;w=window_s``, for the quota
    that decided;
  - ``"draft-7"``: ``RateLimit: limit=L, remaining=R, reset=S`` and the same
    ``RateLimit-Policy``;
  - ``"draft-8"`` (the current draft, :data:`IETF_DRAFT`, has the same fields):
    ``RateLimit-Policy`` lists every quota the call checked
    (``"name";q=limit;w=window_s``, several for RL.MULTI, RL.SLIDING and RL.ALL), and
    ``RateLimit`` the one that decided (``"name";r=remaining;t=reset_s``), as Structured
    Fields;

  the default, :data:`DEFAULT_STANDARD_HEADERS`, is ``("draft-6", "draft-8")``: the three
  widely deployed fields and the current draft's two (where two drafts name the same
  field, the later one in the list writes it); ``False`` sends none;
- ``legacy_headers``: ``X-RateLimit-Limit``, ``X-RateLimit-Remaining``,
  ``X-RateLimit-Reset`` (seconds until the reset, as ``RateLimit-Reset``); off by default;
- ``Retry-After`` when refused.

Every time is in whole seconds rounded up, so a client that waits is never early.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple, Union

from .results import Quota, RateLimit, Throttle

#: The revision of the IETF draft whose ``RateLimit-Policy`` and ``RateLimit`` fields
#: :func:`ratelimit_headers` writes.
IETF_DRAFT = "draft-ietf-httpapi-ratelimit-headers-10"


def ceil_seconds(ms: int) -> int:
    """Milliseconds to whole seconds, rounded up: a client never comes back too early."""
    return max(0, -(-ms // 1000))


def sf_string(text: str) -> str:
    """A Structured Fields String: quoted, ``\\`` and ``"`` escaped, printable ASCII."""
    out = []
    for ch in str(text):
        if ch in '\\"':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("?")
    return '"' + "".join(out) + '"'


#: The drafts ``standard_headers`` takes.
DRAFTS = ("draft-6", "draft-7", "draft-8")

#: What the package sends unless told otherwise: draft-6's three fields and draft-8's two.
DEFAULT_STANDARD_HEADERS = ("draft-6", "draft-8")

StandardHeaders = Union[str, Sequence[str], bool, None]


def standard_drafts(value: StandardHeaders) -> Tuple[str, ...]:
    """``standard_headers`` as a tuple of drafts (empty: none); a ValueError names the
    values it takes."""
    if value is False or value is None:
        return ()
    if value is True:  # as express-rate-limit reads it
        return ("draft-6",)
    drafts = (value,) if isinstance(value, str) else tuple(value)
    for draft in drafts:
        if draft not in DRAFTS:
            raise ValueError(f"standard_headers: {draft!r} is not one of {', '.join(DRAFTS)} (or False, or a list of them)")
    return drafts


def _policy_item(q: Quota) -> str:
    item = f"{sf_string(q.name)};q={q.limit}"
    if q.window_ms is not None:
        item += f";w={math.ceil(q.window_ms / 1000)}"
    return item


def ratelimit_headers(
    result: Union[RateLimit, Throttle],
    *,
    standard_headers: StandardHeaders = DEFAULT_STANDARD_HEADERS,
    legacy_headers: bool = False,
    retry_after: bool = True,
    retry_after_ms: Optional[int] = None,
) -> Dict[str, str]:
    """The HTTP headers of a result (see the module's description for each family);
    ``retry_after_ms`` is sent as ``Retry-After`` of a refusal instead of the result's
    own wait (a lease's ``retry_after``)."""
    if getattr(result, "unavailable", False):
        # Not decided by the limiter (a local budget failing open or closed): no limit to tell.
        if retry_after and not result.allowed:
            return {"Retry-After": str(max(1, ceil_seconds(result.retry_after_ms)))}
        return {}
    if isinstance(result, Throttle):
        reset_s, retry_s = result.reset_after_s, result.retry_after_s
        quotas: tuple = ()
        binding: Optional[Quota] = None
    else:
        reset_s = ceil_seconds(result.reset_after_ms)
        retry_s = ceil_seconds(result.retry_after_ms) if result.retry_after_ms >= 0 else -1
        quotas = result.quotas
        binding = result.quota
    if retry_after_ms is not None:
        retry_s = ceil_seconds(retry_after_ms)
    if not quotas:
        quotas = (Quota("default", result.limit, None),)
        binding = quotas[0]
    if binding is None:
        binding = quotas[0]
    window = "" if binding.window_ms is None else f";w={math.ceil(binding.window_ms / 1000)}"
    headers: Dict[str, str] = {}
    for draft in standard_drafts(standard_headers):
        if draft == "draft-8":
            headers["RateLimit-Policy"] = ", ".join(_policy_item(q) for q in quotas)
            headers["RateLimit"] = f"{sf_string(binding.name)};r={result.remaining};t={reset_s}"
            continue
        headers["RateLimit-Policy"] = f"{result.limit}{window}"
        if draft == "draft-7":
            headers["RateLimit"] = f"limit={result.limit}, remaining={result.remaining}, reset={reset_s}"
        else:
            headers["RateLimit-Limit"] = str(result.limit)
            headers["RateLimit-Remaining"] = str(result.remaining)
            headers["RateLimit-Reset"] = str(reset_s)
    if legacy_headers:
        headers["X-RateLimit-Limit"] = str(result.limit)
        headers["X-RateLimit-Remaining"] = str(result.remaining)
        headers["X-RateLimit-Reset"] = str(reset_s)
    if retry_after and not result.allowed:
        # Refused: at least one second (a refusal always has something to wait for).
        headers["Retry-After"] = str(max(1, retry_s))
    return headers
