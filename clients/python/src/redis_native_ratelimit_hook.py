"""Registers the ``redis+ratelimit://`` storage with the `limits` library as soon as that
library is imported, so that a Flask-Limiter or SlowAPI app needs no ``import
redis_native_ratelimit`` kept for its side effect.

The `limits` library finds storages only among the classes defined so far (it has no
plugin entry points), so the storage's module must be imported before a URI names it.
The package installs ``redis_native_ratelimit.pth``, whose one line imports this module when
Python starts. It imports nothing else and does nothing until `limits` is imported:
it puts one finder on ``sys.meta_path`` that, when `limits` is first imported, lets the
library load as usual and then imports ``redis_native_ratelimit.limits_storage``, which
registers the schemes. If that import fails, the library is left as it is.
"""

import sys


class _AfterLimits:
    """A meta path finder that answers for no module: it only wraps the loading of
    `limits`, once."""

    def find_spec(self, name, path=None, target=None):
        if name != "limits":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_register(module):
            exec_module(module)
            try:
                import redis_native_ratelimit.limits_storage  # noqa: F401 - registers the schemes
            except Exception:  # noqa: BLE001 - the library works without the storage
                pass

        loader.exec_module = exec_then_register
        return spec


if "limits" not in sys.modules and not any(isinstance(f, _AfterLimits) for f in sys.meta_path):
    sys.meta_path.insert(0, _AfterLimits())
