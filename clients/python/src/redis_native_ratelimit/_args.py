"""Arguments in the commands' own forms: durations, times, keys."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional, Sequence, Tuple, Union

#: A duration as the commands take it: ``"1500ms"``, ``"90"`` or ``90`` (seconds),
#: ``"1m"``, ``"24h"``, ``"7d"``, or a :class:`datetime.timedelta` of whole milliseconds.
Duration = Union[str, int, timedelta]

#: A time for ``AT``: Unix milliseconds, or an aware :class:`datetime.datetime`.
Instant = Union[int, datetime]

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^([0-9]+)(ms|s|m|h|d)?$", re.IGNORECASE)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def duration_arg(value: Duration) -> Union[str, int]:
    """A duration as an argument: strings and integers go as they are (the server
    checks them), a timedelta as whole milliseconds."""
    if isinstance(value, bool):
        raise TypeError("a duration is a string such as '1m', an integer of seconds or a timedelta")
    if isinstance(value, timedelta):
        ms, rest = divmod(value, timedelta(milliseconds=1))
        if rest or ms <= 0:
            raise ValueError(f"a duration must be a positive whole number of milliseconds, not {value!r}")
        return f"{ms}ms"
    if isinstance(value, (str, int)):
        return value
    raise TypeError(f"a duration is a string such as '1m', an integer of seconds or a timedelta, not {value!r}")


def duration_ms(value: Duration) -> Optional[int]:
    """The duration in milliseconds, or None if it is not one the server accepts (the
    server's error then says why)."""
    if isinstance(value, timedelta):
        ms, rest = divmod(value, timedelta(milliseconds=1))
        return ms if not rest and ms > 0 else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000 if value > 0 else None
    if isinstance(value, str):
        m = _DURATION.match(value.strip())
        if m:
            n = int(m.group(1)) * _UNITS_MS[(m.group(2) or "s").lower()]
            return n if n > 0 else None
    return None


def duration_label(value: Duration) -> str:
    """A short name for a window in a policy name: as the caller wrote it."""
    if isinstance(value, timedelta):
        ms = duration_ms(value)
        return f"{ms}ms" if ms is not None else str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value}s"
    return str(value)


def at_arg(at: Instant) -> int:
    """``AT``'s argument: Unix milliseconds."""
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise ValueError("AT needs an aware datetime (with a tzinfo), or Unix milliseconds")
        return (at - _EPOCH) // timedelta(milliseconds=1)
    if isinstance(at, int) and not isinstance(at, bool):
        return at
    raise TypeError(f"AT takes Unix milliseconds (int) or an aware datetime, not {at!r}")


def options(cost: int = 1, at: Optional[Instant] = None) -> list:
    """``COST n`` (left out when 1, the default) and ``AT unix_ms``."""
    out: list = []
    if cost != 1:
        out += ["COST", cost]
    if at is not None:
        out += ["AT", at_arg(at)]
    return out


#: What redis-py sends as one key: a string or bytes is never a sequence of keys.
ONE_KEY = (str, bytes, bytearray, memoryview)


def key_list(keys: Any, what: str = "keys") -> Tuple[Any, ...]:
    """A sequence of keys as a tuple. A ``str`` or ``bytes`` (where a list of keys
    belongs) is one key, never the sequence of its characters; anything that is not a
    sequence of keys is a TypeError."""
    if isinstance(keys, ONE_KEY):
        return (keys,)
    if isinstance(keys, (dict, set, frozenset)) or not hasattr(keys, "__iter__"):
        raise TypeError(f"{what}: a key (str or bytes) or a list of keys, not {type(keys).__name__}")
    return tuple(keys)


def find_key(reply_key: Any, keys: Sequence[Any], encode: Callable[[Any], bytes]) -> Any:
    """The caller's own key object for a key the server names in a reply (bytes or
    str, whatever ``decode_responses``); the reply as it is if none matches."""
    if reply_key is None:
        return None
    wanted = reply_key if isinstance(reply_key, bytes) else encode(reply_key)
    for key in keys:
        if encode(key) == wanted:
            return key
    return reply_key
