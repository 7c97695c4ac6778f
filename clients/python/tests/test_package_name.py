"""The package's name, the same wherever a user reads or copies it: the distribution
``redis-native-ratelimit`` (PyPI's ``redis-ratelimit`` is another project, which
installs a ``redis_ratelimit`` of its own) and the import package
``redis_native_ratelimit``; the `limits` storage scheme stays ``redis+ratelimit://``."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from conftest import REPO

DIST = "redis-native-ratelimit"
IMPORT = "redis_native_ratelimit"
PACKAGE = REPO / "clients" / "python"


def test_pyproject_names_the_distribution_and_its_import_package():
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())
    assert project["project"]["name"] == DIST
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [f"src/{IMPORT}"]
    assert (PACKAGE / "src" / IMPORT / "__init__.py").is_file()
    assert (PACKAGE / "src" / f"{IMPORT}.pth").read_text().strip() == f"import {IMPORT}_hook"
    assert project["project"]["urls"]["Homepage"] == "https://github.com/redis-ratelimit/redis-ratelimit"
    # What the tests run is that distribution, installed.
    assert importlib.metadata.distribution(DIST).metadata["Name"] == DIST


def test_the_readmes_and_the_docs_install_and_import_it_by_that_name():
    readme = (PACKAGE / "README.md").read_text()
    assert readme.startswith(f"# {DIST}") and f"from {IMPORT} import RateLimiter" in readme
    clients = (REPO / "docs" / "clients.md").read_text()
    assert f"(distribution\n`{DIST}`, import `{IMPORT}`)" in clients
    assert f"from {IMPORT} import RateLimiter" in clients
    assert f"Python package `{DIST}`" in (REPO / "CONTRIBUTING.md").read_text()
    imported = [
        (example.name, m.group(1))
        for example in sorted((REPO / "examples").glob("*.py"))
        for m in re.finditer(r"^(?:from|import) (redis_\w+)", example.read_text(), re.M)
    ]
    assert len(imported) >= 10 and all(module == IMPORT for _, module in imported), imported
    assert "redis+ratelimit://" in clients  # the storage scheme keeps its name


def what_users_read():
    """README, CONTRIBUTING, docs/, the examples and their requirements, bench/, and the
    package itself (not the Node package, whose name is npm's)."""
    paths = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "examples" / "requirements.txt"]
    paths += sorted((REPO / "docs").glob("*.md")) + sorted((REPO / "examples").glob("*.py"))
    paths += sorted((REPO / "bench").glob("*.py")) + sorted((REPO / "bench").glob("*.txt"))
    paths += [p for p in sorted(PACKAGE.rglob("*")) if p.suffix in (".py", ".md", ".toml", ".txt", ".pth")]
    this = Path(__file__).resolve()
    return [p for p in paths if p.is_file() and "__pycache__" not in p.parts and p.resolve() != this]


#: The old name as a Python package: an import, a module path, a pip requirement, or the
#: name of the Python distribution in prose. (`libredis_ratelimit.so`, the module's file,
#: and the project's own name, redis-ratelimit, are something else.)
OLD_NAME = [
    re.compile(r"(?<![A-Za-z0-9_/.-])redis_ratelimit(?![A-Za-z0-9_])"),
    re.compile(r"pip3? install[^\n]*(?<![\w/.-])redis-ratelimit(?![\w-])"),
    re.compile(r"(?<![\w/.-])redis-ratelimit(\[|==|>=|~=|<)"),
    re.compile(r"(distribution|Python package|PyPI)[^.\n`]{0,30}`redis-ratelimit`"),
]


def test_the_old_name_is_nowhere_a_user_would_copy_it_from():
    found = []
    for path in what_users_read():
        text = path.read_text(errors="replace")
        for pattern in OLD_NAME:
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}: {m.group(0)!r}")
    assert found == []


def test_the_old_name_patterns_catch_what_they_should():
    for text in [
        "from redis_ratelimit import Gcra",
        "pip install redis-ratelimit",
        "redis-ratelimit[flask]",
        "the distribution `redis-ratelimit`",
        'environ["redis_ratelimit.result"]',
    ]:
        assert any(p.search(text) for p in OLD_NAME), text
    for text in ["libredis_ratelimit.so", "the redis-ratelimit module", f"{IMPORT}", "npm package `redis-ratelimit`"]:
        assert not any(p.search(text) for p in OLD_NAME), text
