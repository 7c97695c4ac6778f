"""The explicit fallback: ``twins=True`` runs the Lua twins on a server started without
the module, and gives the results the module gives."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import redis

from conftest import REPO, make_limiter
from redis_native_ratelimit import Fixed, Gcra, RateLimiter, TwinUnavailable, twins

T = 1_900_000_000_000


def workload(rl, tag):
    """The same calls, with AT pinned, for both servers."""
    out = []
    for i in range(4):
        out.append(rl.gcra(tag + "g", 2, 1, "10s", at=T + i * 1000))
        out.append(rl.fixed(tag + "f", 3, "10s", cost=1 + i % 2, at=T + i * 1000))
        out.append(rl.multi([tag + "m1", tag + "m2"], [("1s", 2), ("1m", 3)], at=T + i * 400))
        out.append(rl.sliding([tag + "s"], [("1s", 3)], buckets=5, at=T + i * 300))
        out.append(rl.log(tag + "l", 3, "1m", meta="user:%d" % i, at=T + i * 10000))
        out.append(rl.gcra(tag + "d", 0, 10, "1s", delay="300ms", at=T))
    out.append(rl.bulkexpire(60, [tag + "f", tag + "missing"]))
    return out


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("decode", [False, True], ids=["bytes", "str"])
def test_twins_on_a_server_without_the_module_give_the_modules_results(server, bare_server, mode, decode, tag):
    native, close_native = make_limiter("standalone", mode, decode, 2, server.port)
    scripted, close_scripted = make_limiter("standalone", mode, decode, 3, bare_server.port, twins=True)
    try:
        # The module is not there: the command itself fails.
        plain = redis.Redis(port=bare_server.port)
        with pytest.raises(redis.exceptions.ResponseError, match="unknown command"):
            plain.execute_command("RL.GCRA", "k", 1, 1, "1s")
        assert not scripted.has_command("RL.GCRA")
        expected = workload(native, tag)
        assert workload(scripted, tag) == expected
        assert any(not r.allowed for r in expected[:-1])  # the workload reaches the limits
        # The same state: the values the module wrote are the values the twins wrote.
        native_raw = redis.Redis(port=server.port)
        for key in ("g", "f", "m1", "s", "d"):
            assert plain.get(tag + key) == native_raw.get(tag + key), key
        assert plain.zrange(tag + "l", 0, -1, withscores=True) == native_raw.zrange(tag + "l", 0, -1, withscores=True)
    finally:
        close_native()
        close_scripted()


def test_twins_reload_a_flushed_script_cache(bare_server, tag):
    rl = RateLimiter(redis.Redis(port=bare_server.port), twins=True)
    assert rl.check(Gcra(1, 1, "1s"), tag + "a", at=T).allowed
    rl.client.script_flush()
    assert rl.check(Fixed(1, "1s"), tag + "b", at=T).allowed  # NOSCRIPT, then EVAL


def test_a_command_without_a_twin_says_so(bare_server, tmp_path):
    rl = RateLimiter(redis.Redis(port=bare_server.port), twins=True)
    with pytest.raises(TwinUnavailable):
        rl.sweep(0, 60)
    empty = RateLimiter(redis.Redis(port=bare_server.port), twins=True, lua_dir=tmp_path)
    with pytest.raises(TwinUnavailable, match="gcra.lua"):
        empty.gcra("k", 1, 1, "1s")


PACKAGE = REPO / "clients" / "python"


def pip_wheel(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_carries_every_twin(wheel_dir: Path) -> None:
    """The wheel holds the twins of lua/ (the library and each script), byte for byte,
    and not their sources (lua/src/, which the build assembles) nor the published
    scripts kept there as benchmark baselines."""
    (wheel,) = wheel_dir.glob("redis_native_ratelimit-*.whl")
    prefix = "redis_native_ratelimit/lua/"
    with zipfile.ZipFile(wheel) as z:
        carried = {n[len(prefix):]: z.read(n) for n in z.namelist() if n.startswith(prefix)}
    lua = REPO / "lua"
    repo = {str(p.relative_to(lua)): p.read_bytes() for p in lua.rglob("*.lua")
            if p.relative_to(lua).parts[0] not in ("published", "src")}
    assert "ratelimit.lua" in repo and "scripts/rl_gcra.lua" in repo
    assert carried == repo


def test_the_wheel_carries_every_twin(tmp_path):
    """`pip install ./clients/python` installs the twins (redis_native_ratelimit/lua is a
    link to lua/ in the checkout)."""
    built = pip_wheel(PACKAGE, tmp_path)
    assert built.returncode == 0, built.stderr
    assert_carries_every_twin(tmp_path)


def test_the_sdist_holds_the_twins_and_installs_anywhere(tmp_path):
    """The sdist built in a checkout holds the twins' files themselves: unpacked far from
    the repository, it builds a wheel that carries them all."""
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(tmp_path / "dist")],
        cwd=PACKAGE,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (sdist,) = (tmp_path / "dist").glob("redis_native_ratelimit-*.tar.gz")
    with tarfile.open(sdist) as tar:
        assert not any(m.issym() or "/published/" in m.name or "/lua/src/" in m.name for m in tar.getmembers())
        tar.extractall(tmp_path / "unpacked")
    (source,) = (tmp_path / "unpacked").iterdir()
    built = pip_wheel(source, tmp_path / "wheel")
    assert built.returncode == 0, built.stderr
    assert_carries_every_twin(tmp_path / "wheel")


def test_a_copy_of_the_package_without_the_repository_says_how_to_install(tmp_path):
    """A copy of clients/python alone has a lua link to nothing: the build stops with
    what to do instead, not with a missing file deep in the build tool."""
    copy = tmp_path / "python"
    shutil.copytree(PACKAGE, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = pip_wheel(copy, tmp_path / "wheel")
    assert built.returncode != 0
    said = built.stdout + built.stderr
    assert "holds no Lua twins" in said and "pip install ./clients/python" in said and "sdist" in said, said


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_string_where_keys_belong_is_one_key_not_its_characters_in_the_twins(bare_server, mode, tag):
    from test_calls import check_a_string_where_keys_belong_is_one_key

    scripted, close = make_limiter("standalone", mode, False, 2, bare_server.port, twins=True)
    raw = redis.Redis(port=bare_server.port)
    try:
        check_a_string_where_keys_belong_is_one_key(scripted, raw, tag)
    finally:
        raw.close()
        close()


def _calls(client, command):
    """How many times the server ran `command` (INFO commandstats)."""
    stats = client.info("commandstats")
    return stats.get("cmdstat_" + command, {}).get("calls", 0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_twins_call_the_function_when_the_library_is_loaded(server, bare_server, mode, tag):
    """With the library loaded the twins run as FCALL; without it (or once it is
    flushed) as EVALSHA of the scripts; the results are the module's either way."""
    plain = redis.Redis(port=bare_server.port)
    plain.function_flush()
    twins.load_library(plain)
    twins.load_library(plain)  # REPLACE: loading again is the upgrade
    native, close_native = make_limiter("standalone", mode, False, 2, server.port)
    scripted, close_scripted = make_limiter("standalone", mode, False, 3, bare_server.port, twins=True)
    try:
        plain.config_resetstat()
        expected = workload(native, tag)
        assert workload(scripted, tag) == expected
        assert _calls(plain, "fcall") == len(expected)
        assert _calls(plain, "evalsha") == 0
        # The library goes away: the same limiter falls back to the scripts.
        plain.function_flush()
        plain.config_resetstat()
        assert workload(scripted, tag + "2") == workload(native, tag + "2")
        assert _calls(plain, "fcall") == 1  # the call that found no function
        assert _calls(plain, "evalsha") > 0
    finally:
        close_native()
        close_scripted()
        plain.function_flush()


def test_without_the_library_the_twins_run_the_scripts(bare_server, tag):
    plain = redis.Redis(port=bare_server.port)
    plain.function_flush()
    plain.config_resetstat()
    rl = RateLimiter(plain, twins=True)
    assert rl.gcra(tag + "g", 1, 1, "1s", at=T).allowed
    assert rl.fixed(tag + "f", 1, "1s", at=T).allowed
    assert _calls(plain, "fcall") == 1
    assert _calls(plain, "evalsha") + _calls(plain, "eval") == 2
    # An error of the twin itself is the command's, not a fallback.
    with pytest.raises(redis.exceptions.ResponseError, match="invalid limit"):
        rl.fixed(tag + "f", 0, "1s", at=T)


def test_an_error_from_the_function_is_the_commands(bare_server, tag):
    plain = redis.Redis(port=bare_server.port)
    twins.load_library(plain)
    try:
        rl = RateLimiter(plain, twins=True)
        with pytest.raises(redis.exceptions.ResponseError, match="invalid window"):
            rl.fixed(tag + "f", 1, "0s", at=T)
        assert rl.fixed(tag + "f", 1, "1s", at=T).allowed
    finally:
        plain.function_flush()
