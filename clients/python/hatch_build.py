"""Puts redis_native_ratelimit.pth (one line: ``import redis_native_ratelimit_hook``) at
the root of the wheel, editable or not, next to the module it imports: the `limits`
library then finds the ``redis+ratelimit://`` storage without an ``import
redis_native_ratelimit``.

And checks that the Lua twins are there: ``src/redis_native_ratelimit/lua`` is a link to
the repository's ``lua/`` (an sdist built from a checkout holds the files themselves).
A copy of ``clients/python`` made without the rest of the repository has a link to
nothing: the build stops and says how to install instead."""

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

LUA = Path("src") / "redis_native_ratelimit" / "lua"

NO_TWINS = (
    "{path} holds no Lua twins (ratelimit.lua, scripts/): it is a link to the repository's "
    "lua/, and this copy of clients/python was made without it. Install from a checkout of "
    "the repository (pip install ./clients/python), or build the sdist there (python -m "
    "hatchling build -t sdist, in clients/python) and install that file anywhere: it holds "
    "the twins themselves."
)


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        lua = Path(self.root) / LUA
        if not (lua / "ratelimit.lua").is_file() or not (lua / "scripts").is_dir():
            raise FileNotFoundError(NO_TWINS.format(path=lua))
        if self.target_name != "wheel":
            return
        if version == "editable":
            # The editable wheel puts src/ on sys.path: the hook module is found there.
            build_data["force_include_editable"]["src/redis_native_ratelimit.pth"] = "redis_native_ratelimit.pth"
        else:
            build_data["force_include"]["src/redis_native_ratelimit.pth"] = "redis_native_ratelimit.pth"
            build_data["force_include"]["src/redis_native_ratelimit_hook.py"] = "redis_native_ratelimit_hook.py"
