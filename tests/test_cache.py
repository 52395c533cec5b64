"""A cache directory others can write never runs their code.

nbyoc refuses a cache directory (or a file it would load code from) that is not
owned by the user or that group or others can write, and a cache under a parent
anyone may write without the sticky bit; it creates its directories mode 0700.
Files planted in a private cache never run: a ``.pyc`` beside a kernel module
(with the source's time stamp and size, so Python's own check would pass), a
pickle in Numba's index (``.nbi``) or data (``.nbc``) file, a swapped csource
library. Each is ignored and rebuilt (the sentinel file it would create must not
appear, and the results stay right), since nbyoc loads kernels from their source
text, lets Numba read only files whose digests it recorded, and loads a library
only with the digest it recorded when it built it.
"""

import importlib.util
import os
import pickle
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest

import nbyoc
from nbyoc import cache
from nbyoc.errors import CacheSecurityError

from .helpers import run_fresh

COMPILE = """
import json, sys
import numpy as np, nbyoc
x = nbyoc.var("x", (5, 3))
fn = nbyoc.compile(nbyoc.function([x], nbyoc.exp(x) * 2.0 - x), backend=sys.argv[1])
data = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
want = np.exp(data) * np.float32(2) - data
print(json.dumps({"right": bool(np.allclose(fn(data), want, rtol=1e-6))}))
"""


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """A fresh cache directory for this test (nbyoc creates it), in this process too."""
    path = tmp_path / "cache"
    monkeypatch.setenv("NBYOC_CACHE_DIR", str(path))
    return path


def compile_in_a_fresh_process(backend: str, cache_dir: Path, cwd: Path) -> None:
    done = run_fresh(COMPILE, cwd, backend, env={"NBYOC_CACHE_DIR": str(cache_dir)})
    assert done == {"right": True}


def test_the_cache_and_its_directories_are_created_private(private_cache, tmp_path):
    compile_in_a_fresh_process("llvm", private_cache, tmp_path)
    compile_in_a_fresh_process("csource", private_cache, tmp_path)
    for path in (private_cache, private_cache / "kernels", private_cache / "csource",
                 private_cache / "kernels" / "__pycache__"):  # fmt: skip
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


@pytest.mark.parametrize("mode,who", [(0o777, "anyone"), (0o770, "its group")])
def test_a_cache_directory_others_can_write_is_refused(tmp_path, monkeypatch, mode, who):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    monkeypatch.setenv("NBYOC_CACHE_DIR", str(shared))
    x = nbyoc.var("x", (4,))
    with pytest.raises(CacheSecurityError) as info:
        nbyoc.compile(nbyoc.function([x], x * 3.0 + 2.0), backend="csource")
    message = str(info.value)
    assert f"nbyoc cache directory {shared} can be written by {who} (mode {mode:o})" in message
    assert f"chmod go-w {shared}" in message and "NBYOC_CACHE_DIR" in message
    assert not (shared / "csource").exists()


def test_a_subdirectory_others_can_write_is_refused(private_cache):
    (private_cache / "csource").mkdir(parents=True)
    (private_cache / "csource").chmod(0o777)
    x = nbyoc.var("x", (4,))
    with pytest.raises(CacheSecurityError, match=r"csource can be written by anyone"):
        nbyoc.compile(nbyoc.function([x], x * 3.0 + 4.0), backend="csource")


def test_a_cache_directory_owned_by_someone_else_is_refused(private_cache, monkeypatch):
    private_cache.mkdir()
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 1)  # the directory is now another's
    x = nbyoc.var("x", (4,))
    with pytest.raises(CacheSecurityError) as info:
        nbyoc.compile(nbyoc.function([x], x * 3.0 + 5.0), backend="csource")
    assert f"{private_cache} is owned by " in str(info.value)
    assert f"and you are {nbyoc.cache._user(me + 1)}, so nbyoc will not" in str(info.value)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_a_cache_directory_really_owned_by_another_user_is_refused(private_cache):
    private_cache.mkdir()
    os.chown(private_cache, 12345, 12345)
    x = nbyoc.var("x", (4,))
    with pytest.raises(CacheSecurityError, match=r"is owned by uid 12345, and you are "):
        nbyoc.compile(nbyoc.function([x], x * 3.0 + 6.0), backend="csource")


@pytest.mark.parametrize("sticky", [False, True])
def test_a_parent_anyone_can_write_needs_the_sticky_bit(tmp_path, monkeypatch, sticky):
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o1777 if sticky else 0o777)
    monkeypatch.setenv("NBYOC_CACHE_DIR", str(parent / "cache"))
    x = nbyoc.var("x", (4,))
    f = nbyoc.function([x], x * 3.0 + 7.0)
    if sticky:  # like /tmp: others cannot move our directory
        np.testing.assert_array_equal(
            nbyoc.compile(f, backend="csource")(np.ones(4, np.float32)), 10
        )
    else:
        with pytest.raises(CacheSecurityError, match=rf"{parent}, a parent of the nbyoc cache"):
            nbyoc.compile(f, backend="csource")


# -- planted files ----------------------------------------------------------------------


def the_only(pattern: str, folder: Path) -> Path:
    (found,) = folder.glob(pattern)
    return found


def test_a_planted_pyc_beside_a_kernel_never_runs(private_cache, tmp_path):
    compile_in_a_fresh_process("llvm", private_cache, tmp_path)
    source = the_only("k*.py", private_cache / "kernels")
    sentinel = tmp_path / "pyc-ran"
    code = compile(f"open({str(sentinel)!r}, 'w').close()\n", str(source), "exec")
    info = source.stat()
    # What Python's import system would accept as this source's bytecode.
    pyc = importlib.util.cache_from_source(str(source))
    data = importlib._bootstrap_external._code_to_timestamp_pyc(code, info.st_mtime, info.st_size)
    Path(pyc).write_bytes(bytes(data))
    compile_in_a_fresh_process("llvm", private_cache, tmp_path)
    assert not sentinel.exists()


class Planted:
    """Unpickling this creates a file: what a pickle others wrote could do."""

    def __init__(self, sentinel: Path):
        self.sentinel = str(sentinel)

    def __reduce__(self):
        return (open, (self.sentinel, "w"))


@pytest.mark.parametrize("numba_file", ["index (.nbi)", "data (.nbc)"])
def test_a_tampered_numba_cache_file_is_never_unpickled(private_cache, tmp_path, numba_file):
    import numba

    compile_in_a_fresh_process("llvm", private_cache, tmp_path)
    folder = private_cache / "kernels" / "__pycache__"
    sentinel = tmp_path / "pickle-ran"
    if numba_file.startswith("index"):
        # Numba reads its version, then unpickles the rest.
        planted = pickle.dumps(numba.__version__) + pickle.dumps(Planted(sentinel))
        the_only("k*.nbi", folder).write_bytes(planted)
    else:
        the_only("k*.nbc", folder).write_bytes(pickle.dumps(Planted(sentinel)))
    compile_in_a_fresh_process("llvm", private_cache, tmp_path)
    assert not sentinel.exists()
    # ... and what Numba wrote instead is recorded: a third process loads it from the cache.
    compile_in_a_fresh_process("llvm", private_cache, tmp_path)
    assert not sentinel.exists()


def build_planted_library(path: Path, sentinel: Path) -> None:
    source = path.with_suffix(".c")
    source.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void planted(void) {\n"
        f'  FILE* f = fopen("{sentinel}", "w"); if (f) fclose(f);\n'
        "}\n"
    )
    subprocess.run(["cc", "-shared", "-fPIC", str(source), "-o", str(path)], check=True)


def test_a_swapped_csource_library_is_never_loaded(private_cache, tmp_path):
    compile_in_a_fresh_process("csource", private_cache, tmp_path)
    library = the_only("*.so", private_cache / "csource")
    sentinel = tmp_path / "library-ran"
    build_planted_library(tmp_path / "planted.so", sentinel)
    os.replace(tmp_path / "planted.so", library)
    compile_in_a_fresh_process("csource", private_cache, tmp_path)
    assert not sentinel.exists()
    assert cache.recorded(library)  # rebuilt, and recorded again


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_a_library_owned_by_someone_else_is_refused(private_cache, tmp_path):
    compile_in_a_fresh_process("csource", private_cache, tmp_path)
    library = the_only("*.so", private_cache / "csource")
    os.chown(library, 12345, 12345)
    x = nbyoc.var("x", (5, 3))
    with pytest.raises(CacheSecurityError, match=rf"{library} is owned by uid 12345"):
        nbyoc.compile(nbyoc.function([x], nbyoc.exp(x) * 2.0 - x), backend="csource")


def test_the_disk_cache_still_serves_a_second_process(private_cache, tmp_path):
    code = (
        "import json, numpy as np, nbyoc\n"
        "x = nbyoc.var('x', (6,))\n"
        "fn = nbyoc.compile(nbyoc.function([x], nbyoc.exp(x) + x), backend='llvm')\n"
        "fn(np.ones(6, np.float32))\n"
        "stats = fn.runtime_modules['llvm_0'].kernel.stats\n"
        "print(json.dumps([sum(stats.cache_hits.values()), sum(stats.cache_misses.values())]))\n"
    )
    env = {"NBYOC_CACHE_DIR": str(private_cache)}
    assert run_fresh(code, tmp_path, env=env) == [0, 1]
    assert run_fresh(code, tmp_path, env=env) == [1, 0]
