"""docs/clients.md runs as written: its Python blocks, top to bottom in one interpreter,
against a server with the module, twice on the same server (a reader who runs the page
again must see it work again). And the `limits` library finds ``redis+ratelimit://``
with no import of the package."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile

from conftest import REPO

PAGE = REPO / "docs" / "clients.md"


def python_blocks(text: str):
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def run(code: str, server, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, REDIS_URL=server.url())
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_docs_clients_md_runs_as_written(server, tmp_path):
    blocks = python_blocks(PAGE.read_text())
    assert len(blocks) >= 10, "docs/clients.md: where are its python blocks?"
    for block in blocks:
        # Every block is code a reader can paste: nothing indented as an excerpt.
        first = block.splitlines()[0]
        assert first == first.lstrip(), f"an indented block, not runnable as written:\n{block}"
    page = "\n".join(blocks)
    for attempt in (1, 2):
        done = run(page, server, tmp_path)
        assert done.returncode == 0, f"run {attempt} of docs/clients.md's python blocks:\n{done.stdout}\n{done.stderr}"


def test_redis_ratelimit_scheme_works_without_importing_the_package(server, tmp_path):
    """The URI alone, as a Flask-Limiter app's configuration gives it: the package's .pth
    file registers the storage when the `limits` library is imported."""
    code = (
        "import sys\n"
        "assert 'redis' not in sys.modules and 'redis_native_ratelimit' not in sys.modules\n"
        "from limits.storage import storage_from_string\n"
        "import os\n"
        "storage = storage_from_string(os.environ['REDIS_URL'].replace('redis://', 'redis+ratelimit://', 1))\n"
        "assert type(storage).__module__ == 'redis_native_ratelimit.limits_storage', type(storage)\n"
        "assert storage.check()\n"
        "from flask import Flask\n"
        "from flask_limiter import Limiter\n"
        "from flask_limiter.util import get_remote_address\n"
        "app = Flask(__name__)\n"
        "limiter = Limiter(get_remote_address, app=app, storage_uri=os.environ['REDIS_URL'].replace('redis://', 'redis+ratelimit://', 1), key_prefix='nopkg')\n"
        "@app.route('/')\n"
        "@limiter.limit('1 per hour')\n"
        "def index():\n"
        "    return 'ok'\n"
        "storage.reset()\n"
        "codes = [app.test_client().get('/').status_code for _ in range(2)]\n"
        "assert codes == [200, 429], codes\n"
    )
    done = run(code, server, tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_wheel_carries_the_pth_file_and_its_hook(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(REPO / "clients" / "python")],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("redis_native_ratelimit-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert {"redis_native_ratelimit.pth", "redis_native_ratelimit_hook.py"} <= names, sorted(names)
        assert z.read("redis_native_ratelimit.pth").decode().strip() == "import redis_native_ratelimit_hook"


#: Names of other projects (and Python's) that the page's prose quotes.
OTHERS = {"RedisCluster", "TestClient", "TypeError", "ValueError", "Response", "Flask", "FastAPI", "Limiter"}


def test_the_python_part_names_only_what_the_package_has():
    """Every class or function the Python part of docs/clients.md quotes in its prose
    (`RateLimitMiddleware(...)`, `redis_native_ratelimit.twins.load_library`) is one the
    package has: a reader who copies it finds it."""
    import importlib
    import pkgutil

    import redis_native_ratelimit

    modules = [redis_native_ratelimit] + [
        importlib.import_module(f"redis_native_ratelimit.{m.name}") for m in pkgutil.iter_modules(redis_native_ratelimit.__path__)
    ]
    has = {name for module in modules for name in vars(module)}
    text = PAGE.read_text()
    python_part = text[: text.index("\n## Node\n")]
    # A section shared by both packages keeps its Node part under "### Node".
    python_part = re.sub(r"\n### Node\n.*?(?=\n## |\Z)", "\n", python_part, flags=re.S)
    prose = re.sub(r"```.*?```", "", python_part, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", prose)
    quoted = {m.group(1) for span in spans for m in re.finditer(r"\b([A-Z][A-Za-z0-9]+)(?=\()", span)}
    quoted |= {span for span in spans if re.fullmatch(r"[A-Z][a-z]+[A-Z][A-Za-z0-9]*", span)}
    assert {"RateLimitMiddleware", "RouteLimiter", "CircuitBreaker", "Lease", "LocalBudget", "BudgetClosed"} <= quoted
    assert sorted(quoted - has - OTHERS) == []
    for span in spans:
        for path in re.findall(r"(?<![\"'])\bredis_native_ratelimit(?:\.\w+)+", span):  # not a string
            if path.endswith(".pth"):  # the file the package installs, checked above
                continue
            module, _, attr = path.rpartition(".")
            try:
                owner = importlib.import_module(path)
            except ImportError:
                owner = getattr(importlib.import_module(module), attr, None)
            assert owner is not None, path
