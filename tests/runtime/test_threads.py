"""Numba's threads start with OpenMP told how idle workers wait (a short spin on Intel,
passive elsewhere), set only for that moment, and never over the user's own choice."""

import os

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
