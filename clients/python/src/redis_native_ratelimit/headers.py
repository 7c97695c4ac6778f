"""HTTP headers from a result.

Three families, each on request:

- the widely deployed ``RateLimit-Limit``, ``RateLimit-Remaining`` and
  ``RateLimit-Reset`` (the IETF drafts up to -06; ``X-RateLimit-*`` with
  ``x_prefix=True``), for the quota that decided;
- the current IETF draft (:data:`IETF_DRAFT`): ``RateLimit-Policy`` lists every quota
  the call checked (``"name";q=limit;w=window_seconds``, several for RL.MULTI,
  RL.SLIDING and RL.ALL), and ``RateLimit`` the one that decided
  (``"name";r=remaining;t=reset_seconds``), as Structured Fields;
- ``Retry-After`` when refused.

Every time is in whole seconds rounded up, so a client that waits is never early.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Union

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


def _policy_item(q: Quota) -> str:
    item = f"{sf_string(q.name)};q={q.limit}"
    if q.window_ms is not None:
        item += f";w={math.ceil(q.window_ms / 1000)}"
    return item


def ratelimit_headers(
    result: Union[RateLimit, Throttle],
    *,
    legacy: bool = True,
    draft: bool = True,
    x_prefix: bool = False,
    retry_after: bool = True,
) -> Dict[str, str]:
    """The HTTP headers of a result (see the module's description for each family)."""
    if isinstance(result, Throttle):
        reset_s, retry_s = result.reset_after_s, result.retry_after_s
        quotas: tuple = ()
        binding: Optional[Quota] = None
    else:
        reset_s = ceil_seconds(result.reset_after_ms)
        retry_s = ceil_seconds(result.retry_after_ms) if result.retry_after_ms >= 0 else -1
        quotas = result.quotas
        binding = result.quota
    headers: Dict[str, str] = {}
    if legacy:
        prefix = "X-RateLimit-" if x_prefix else "RateLimit-"
        headers[prefix + "Limit"] = str(result.limit)
        headers[prefix + "Remaining"] = str(result.remaining)
        headers[prefix + "Reset"] = str(reset_s)
    if draft:
        if not quotas:
            quotas = (Quota("default", result.limit, None),)
            binding = quotas[0]
        name = binding.name if binding is not None else quotas[0].name
        headers["RateLimit-Policy"] = ", ".join(_policy_item(q) for q in quotas)
        headers["RateLimit"] = f"{sf_string(name)};r={result.remaining};t={reset_s}"
    if retry_after and not result.allowed:
        # Refused: at least one second (a refusal always has something to wait for).
        headers["Retry-After"] = str(max(1, retry_s))
    return headers
