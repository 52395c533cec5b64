"""Numba's threads start on TBB where the ``tbb`` wheel is installed, else on OpenMP
told how idle workers wait (a short spin on Intel, passive elsewhere), set only for
that moment, and never over the user's own choice."""

import ctypes
import importlib.metadata
import os
import subprocess
import sys

import numba
import numpy as np
import pytest

import nbyoc
from nbyoc.runtime import threads


@pytest.fixture(params=["AuthenticAMD", "GenuineIntel"])
def vendor(request, monkeypatch):
    """Each test on both kinds of CPU: the policy sleeping at once, and the short spin."""
    monkeypatch.setattr(threads, "cpu_vendor", lambda: request.param)
    return request.param


@pytest.fixture
def launches(monkeypatch, vendor):
    """Pretend the threads are not running yet; record OMP_WAIT_POLICY at each launch
    (on Intel: GOMP_SPINCOUNT)."""
    seen = []
    name = "GOMP_SPINCOUNT" if vendor == "GenuineIntel" else "OMP_WAIT_POLICY"

    def get_num_threads():
        seen.append(os.environ.get(name))
        return 2

    monkeypatch.setattr(threads, "_started", False)
    monkeypatch.setattr(numba, "get_num_threads", get_num_threads)
    for variable in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(variable, raising=False)
    return seen


def _chosen(vendor):
    return str(threads.SPIN_COUNT) if vendor == "GenuineIntel" else "passive"


def test_the_wait_policy_is_set_while_the_threads_start_and_removed_after(launches, vendor):
    assert threads.start_threads() == 2
    assert launches == [_chosen(vendor)]
    assert "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ


def test_intel_spins_a_little_and_other_cpus_sleep_at_once(vendor):
    want = (
        {"GOMP_SPINCOUNT": "3000"} if vendor == "GenuineIntel" else {"OMP_WAIT_POLICY": "passive"}
    )
    assert threads.wait_environment() == want


def test_the_cpu_vendor_is_read_from_proc_cpuinfo():
    vendor = threads.cpu_vendor()
    assert vendor in ("GenuineIntel", "AuthenticAMD", "") or vendor.isprintable()


def test_a_second_start_does_not_touch_the_environment(launches, vendor):
    threads.start_threads()
    threads.start_threads()
    assert launches == [_chosen(vendor), None]


@pytest.mark.parametrize(
    "name,value", [("GOMP_SPINCOUNT", "infinite"), ("OMP_WAIT_POLICY", "active")]
)
def test_the_users_choice_wins(launches, monkeypatch, vendor, name, value):
    monkeypatch.setenv(name, value)
    threads.start_threads()
    assert os.environ[name] == value
    other = "OMP_WAIT_POLICY" if name == "GOMP_SPINCOUNT" else "GOMP_SPINCOUNT"
    assert other not in os.environ
    recorded = "GOMP_SPINCOUNT" if vendor == "GenuineIntel" else "OMP_WAIT_POLICY"
    assert launches == ([value] if name == recorded else [None])


def test_compiling_a_parallel_kernel_starts_the_threads(launches, vendor):
    x = nbyoc.var("x", (64,))
    # A graph no other test (or vendor) compiles: the kernel is not in the in-memory cache.
    shift = {"GenuineIntel": 0.125, "AuthenticAMD": 0.375}[vendor]
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.sqrt(x) * 3.25 + shift), backend="llvm",
                       options={"llvm": {"parallel_threshold": 1}})  # fmt: skip
    assert launches == [_chosen(vendor)]
    np.testing.assert_allclose(fn(np.full(64, 4, np.float32)), np.full(64, 6.5 + shift))


def test_quiet_openmp_sets_the_policy_for_the_block_only(launches, vendor):
    with threads.quiet_openmp():
        assert os.environ == {**os.environ, **threads.wait_environment()}
    assert "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ


def test_quiet_openmp_leaves_the_users_choice(launches, monkeypatch):
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    with threads.quiet_openmp():
        assert "OMP_WAIT_POLICY" not in os.environ and os.environ["GOMP_SPINCOUNT"] == "1000"


@pytest.fixture
def fresh_layer(monkeypatch):
    """Pretend Numba's threads have not started; record the libraries load_tbb loads."""
    from numba.np.ufunc import parallel

    loaded = []
    monkeypatch.setattr(parallel, "_is_initialized", False)
    monkeypatch.setattr(ctypes, "CDLL", lambda path, mode=0: loaded.append((path, mode)))
    monkeypatch.setattr(numba.config, "THREADING_LAYER", "default")
    threads._tbb_library_path.cache_clear()
    yield loaded
    threads._tbb_library_path.cache_clear()


def _wheel_files(monkeypatch, files):
    def fake_files(name):
        assert name == "tbb"
        if files is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return files

    monkeypatch.setattr(importlib.metadata, "files", fake_files)


def test_load_tbb_loads_the_wheels_library_with_global_symbols(fresh_layer, monkeypatch, tmp_path):
    library = tmp_path / "lib" / "libtbb.so.12"
    library.parent.mkdir()
    library.write_bytes(b"")
    other = importlib.metadata.PackagePath("../../lib/libtbbmalloc.so.2")
    wanted = importlib.metadata.PackagePath("../../lib/libtbb.so.12")
    for entry in (other, wanted):
        entry.locate = lambda entry=entry: tmp_path / "lib" / entry.name
    _wheel_files(monkeypatch, [other, wanted])
    assert threads.load_tbb() == str(library)
    assert fresh_layer == [(str(library), ctypes.RTLD_GLOBAL)]


@pytest.mark.parametrize("layer", ["omp", "workqueue", "OMP"])
def test_load_tbb_loads_nothing_when_the_user_chose_another_layer(fresh_layer, monkeypatch, layer):
    monkeypatch.setattr(numba.config, "THREADING_LAYER", layer)
    assert threads.load_tbb() is None and fresh_layer == []


def test_load_tbb_loads_nothing_once_numbas_threads_run(fresh_layer, monkeypatch):
    from numba.np.ufunc import parallel

    monkeypatch.setattr(parallel, "_is_initialized", True)
    assert threads.load_tbb() is None and fresh_layer == []


def test_without_the_tbb_wheel_numba_keeps_openmp(fresh_layer, monkeypatch):
    _wheel_files(monkeypatch, None)
    assert threads.load_tbb() is None and fresh_layer == []


def test_a_library_that_does_not_load_leaves_numba_its_fallback(fresh_layer, monkeypatch, tmp_path):
    (tmp_path / "libtbb.so.12").write_bytes(b"not an ELF file")
    entry = importlib.metadata.PackagePath("../../lib/libtbb.so.12")
    entry.locate = lambda: tmp_path / "libtbb.so.12"
    _wheel_files(monkeypatch, [entry])

    def refuse(path, mode=0):
        raise OSError(f"{path}: invalid ELF header")

    monkeypatch.setattr(ctypes, "CDLL", refuse)
    assert threads.load_tbb() is None


_LAYER_OF_A_PARALLEL_KERNEL = """
import numpy as np, nbyoc, numba
x = nbyoc.var("x", (64,))
fn = nbyoc.compile(nbyoc.function([x], nbyoc.sqrt(x) + 1), backend="llvm",
                   options={"llvm": {"parallel_threshold": 1}})
assert float(fn(np.full(64, 4, np.float32))[0]) == 3.0
print(numba.threading_layer())
"""


@pytest.mark.parametrize("chosen", [None, "omp"])
def test_a_fresh_process_runs_parallel_kernels_on_tbb_unless_told_otherwise(chosen):
    """Across processes: TBB where the wheel is installed (as the package's dependency
    installs it on x86-64), and the user's NUMBA_THREADING_LAYER over it."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    if chosen:
        env["NUMBA_THREADING_LAYER"] = chosen
    run = subprocess.run([sys.executable, "-c", _LAYER_OF_A_PARALLEL_KERNEL], env=env,
                         capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    expected = chosen or ("tbb" if threads._tbb_library_path() else "omp")
    assert run.stdout.split()[-1] == expected, run.stderr
