"""Puts redis_native_ratelimit.pth (one line: ``import redis_native_ratelimit_hook``) at the root of
the wheel, editable or not, next to the module it imports: the `limits` library then
finds the ``redis+ratelimit://`` storage without an ``import redis_native_ratelimit``."""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            return
        if version == "editable":
            # The editable wheel puts src/ on sys.path: the hook module is found there.
            build_data["force_include_editable"]["src/redis_native_ratelimit.pth"] = "redis_native_ratelimit.pth"
        else:
            build_data["force_include"]["src/redis_native_ratelimit.pth"] = "redis_native_ratelimit.pth"
            build_data["force_include"]["src/redis_native_ratelimit_hook.py"] = "redis_native_ratelimit_hook.py"
