"""The Lua twins: scripts with the commands' arguments, replies and state, for servers
where the module cannot be loaded (managed services that refuse ``MODULE LOAD``).

A twin is ``lua/prelude.lua`` followed by the command's file, as one script; the package
carries the repository's ``lua/`` (``redis_ratelimit/lua``, a link in the checkout that
the wheel resolves). ``lua_dir`` (or ``$RATELIMIT_LUA_DIR``) points at another copy.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

PACKAGED_LUA_DIR = Path(__file__).resolve().parent / "lua"


class TwinUnavailable(LookupError):
    """The command has no twin in the Lua directory (RL.SWEEP has none; newer commands
    need their file next to prelude.lua)."""


@dataclass(frozen=True)
class Twin:
    """One twin: its source and the SHA1 that EVALSHA takes."""

    name: str
    source: str
    sha: str


def lua_dir(path: Union[str, Path, None] = None) -> Path:
    if path is not None:
        return Path(path)
    env = os.environ.get("RATELIMIT_LUA_DIR")
    return Path(env) if env else PACKAGED_LUA_DIR


_cache: Dict[Tuple[str, str], Twin] = {}


def load(name: str, directory: Union[str, Path, None] = None) -> Twin:
    """The twin ``name`` (``"gcra"``, ``"multi"``...): prelude.lua followed by
    ``name``.lua, read once."""
    d = lua_dir(directory)
    cache_key = (str(d), name)
    twin = _cache.get(cache_key)
    if twin is None:
        try:
            prelude = (d / "prelude.lua").read_text(encoding="utf-8")
            body = (d / f"{name}.lua").read_text(encoding="utf-8")
        except FileNotFoundError as e:
            raise TwinUnavailable(f"no Lua twin {name}.lua (or prelude.lua) in {d}: {e}") from e
        source = prelude + "\n" + body
        twin = Twin(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())
        _cache[cache_key] = twin
    return twin


def available(name: str, directory: Optional[Union[str, Path]] = None) -> bool:
    try:
        load(name, directory)
    except TwinUnavailable:
        return False
    return True
