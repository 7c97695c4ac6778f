#!/usr/bin/env bash
# The project's Python virtualenv (.venv at the repository root), with the packages of the
# given requirements files installed; prints the path of its python. Idempotent: a
# requirements file already installed (same content) is not installed again.
#   scripts/venv.sh                         -> .venv with pip only
#   scripts/venv.sh examples/requirements.txt bench/requirements.txt
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
# The Python package's former name, redis-ratelimit (on PyPI another project's): its
# install of this checkout would fail at every start-up of the venv's python (its .pth
# imports a module that is now named redis_native_ratelimit_hook). Removed once.
if compgen -G "$venv/lib/python*/site-packages/redis_ratelimit-*.dist-info" > /dev/null; then
  "$venv/bin/pip" uninstall --quiet --yes redis-ratelimit >&2
fi
for req in "$@"; do
  stamp="$venv/.installed-$(sha1sum "$req" | cut -c1-12)"
  if [ ! -e "$stamp" ]; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
    touch "$stamp"
  fi
done
echo "$(pwd)/$venv/bin/python"
