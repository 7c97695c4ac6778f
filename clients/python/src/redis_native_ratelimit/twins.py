"""The Lua twins: the commands' arguments, replies and state in Lua, for servers where
the module cannot be loaded (managed services that refuse ``MODULE LOAD``).

They come in two forms, both in the package's ``lua/`` (``redis_native_ratelimit/lua``, a link
to the repository's ``lua/`` in the checkout that the wheel resolves):

- the Functions library ``ratelimit.lua`` (``FUNCTION LOAD``, once per primary), whose
  function ``rl_gcra`` (...) is called with ``FCALL``: the fast form;
- one self-contained script per function, ``scripts/rl_gcra.lua`` (...), called with
  ``EVALSHA`` (and ``EVAL`` when the server does not have it yet), for servers that do
  not allow functions.

The limiters' ``twins=True`` calls the function when the library is loaded and the
script otherwise (:func:`load_library` loads it). ``lua_dir`` (or
``$RATELIMIT_LUA_DIR``) points at another copy of ``lua/``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import redis

PACKAGED_LUA_DIR = Path(__file__).resolve().parent / "lua"

# The library's name, as FUNCTION LOAD reports it.
LIBRARY = "ratelimit"

# Each twin's function (and script) by the short name the calls use.
FUNCTIONS: Dict[str, str] = {
    "fixed": "rl_fixed",
    "gcra": "rl_gcra",
    "multi": "rl_multi",
    "sliding": "rl_sliding",
    "log": "rl_log",
    "lease": "rl_lease",
    "release": "rl_release",
    "all": "rl_all",
    "throttle": "cl_throttle",
    "bulkexpire": "rl_bulkexpire",
}


class TwinUnavailable(LookupError):
    """The command has no twin in the Lua directory (RL.SWEEP has none; newer commands
    need their function in the library and their script in scripts/)."""


@dataclass(frozen=True)
class Twin:
    """One twin: its function's name (FCALL), and its script's source and the SHA1 that
    EVALSHA takes."""

    name: str
    function: str
    source: str
    sha: str


def lua_dir(path: Union[str, Path, None] = None) -> Path:
    if path is not None:
        return Path(path)
    env = os.environ.get("RATELIMIT_LUA_DIR")
    return Path(env) if env else PACKAGED_LUA_DIR


_cache: Dict[Tuple[str, str], Twin] = {}


def load(name: str, directory: Union[str, Path, None] = None) -> Twin:
    """The twin ``name`` (``"gcra"``, ``"multi"``...): its function's name, and its
    script ``scripts/<function>.lua``, read once."""
    d = lua_dir(directory)
    cache_key = (str(d), name)
    twin = _cache.get(cache_key)
    if twin is None:
        function = FUNCTIONS.get(name, name)
        path = d / "scripts" / f"{function}.lua"
        try:
            source = path.read_text(encoding="utf-8")
        except FileNotFoundError as e:
            raise TwinUnavailable(f"no Lua twin {name} ({function}.lua) in {d / 'scripts'}: {e}") from e
        twin = Twin(name, function, source, hashlib.sha1(source.encode("utf-8")).hexdigest())
        _cache[cache_key] = twin
    return twin


def available(name: str, directory: Optional[Union[str, Path]] = None) -> bool:
    try:
        load(name, directory)
    except TwinUnavailable:
        return False
    return True


def library_source(directory: Union[str, Path, None] = None) -> str:
    """The text of the Functions library ``ratelimit.lua``."""
    path = lua_dir(directory) / "ratelimit.lua"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise TwinUnavailable(f"no Functions library at {path}: {e}") from e


def load_library(client: Any, directory: Union[str, Path, None] = None) -> Any:
    """``FUNCTION LOAD REPLACE`` the library on the server behind a blocking redis-py
    client (on a Cluster, run it on every primary). Loading it again replaces it: the
    way to upgrade."""
    return client.execute_command("FUNCTION LOAD", "REPLACE", library_source(directory))


def function_missing(error: Exception) -> bool:
    """Whether an FCALL failed because the server has no such function (the library is
    not loaded) or no FCALL at all (a server before Redis 7): then the script runs."""
    text = str(error).lower()
    return "function not found" in text or "unknown command" in text


#: The commands the module adds: a server that answers ``unknown command`` to one of
#: them has no module loaded (or an older one).
_MODULE_COMMANDS = ("'rl.", "'cl.throttle'")


def command_missing(error: BaseException) -> bool:
    """True when the server answered that it does not know a command of the module: the
    module is not loaded there (or is older than the command)."""
    if not isinstance(error, redis.exceptions.ResponseError):
        return False
    text = str(error).lower()
    return text.startswith("unknown command") and any(c in text for c in _MODULE_COMMANDS)
