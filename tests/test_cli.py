"""The command line's shared promises (``info``, ``cache``, ``ops``, ``demo``): one-line
errors with exit status 2, quiet under ``| head``, ``--json`` where output is a table;
and the package files a Python package is expected to have."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nbyoc

ROOT = Path(__file__).resolve().parents[1]


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "nbyoc", *args], capture_output=True, text=True, timeout=300,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_info_names_versions_cpu_threads_cache_and_compiler():
    done = run("info")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith(f"nbyoc {nbyoc.__version__} (Python ")
    for label in ("cpu ", "features ", "threads ", "cache ", "C compiler "):
        assert label in text
    data = json.loads(run("info", "--json").stdout)
    assert data["versions"]["nbyoc"] == nbyoc.__version__
    assert data["cpu"]["vector_bits"] in (128, 256, 512)


def test_show_config_prints_what_info_prints(capsys):
    nbyoc.show_config()
    shown = capsys.readouterr().out
    assert shown.splitlines()[0] == run("info").stdout.splitlines()[0]


def test_cache_prune_removes_whole_entries_unused_for_long_and_keeps_the_rest(tmp_path):
    env = {"NBYOC_CACHE_DIR": str(tmp_path / "cache")}
    root = tmp_path / "cache" / "csource"
    root.mkdir(parents=True, mode=0o700)
    os.chmod(tmp_path / "cache", 0o700)
    old = [root / "csource_0-old.so", root / "csource_0-old.c", root / "csource_0-old.so.blake2b"]
    new = [root / "csource_0-new.so", root / "csource_0-new.c"]
    for path in old + new:
        path.write_bytes(b"x" * 100)
    long_ago = time.time() - 40 * 86400
    for path in old:
        os.utime(path, (long_ago, long_ago))
    info = json.loads(run("cache", "info", "--json", env=env).stdout)
    assert info["entries"] == 2 and info["bytes"] == 500
    done = run("cache", "prune", "--older-than", "30", env=env)
    assert done.returncode == 0 and "removed 1 entries" in done.stdout
    assert not any(p.exists() for p in old) and all(p.exists() for p in new)
    assert "cleared" in run("cache", "clear", env=env).stdout
    assert not any(p.exists() for p in new)


@pytest.mark.parametrize(
    "args, message",
    [
        (["demo", "--backend", "nosuch"], "unknown backend 'nosuch'"),
        (["demo", "--sizes", "0"], "sizes must be positive"),
        (["cache", "prune", "--older-than", "soon"], "a number of days >= 0"),
    ],
)
def test_errors_are_one_line_with_status_2(args, message):
    done = run(*args)
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr


def test_ops_piped_into_head_ends_quietly():
    done = subprocess.run(
        f"{sys.executable} -m nbyoc ops | head -c 10", shell=True, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == ""


def test_the_package_files_are_there():
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog and f"## [{nbyoc.__version__}]" in changelog
    assert (Path(nbyoc.__file__).parent / "py.typed").exists()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()
