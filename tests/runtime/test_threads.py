"""Numba's threads start with OpenMP's passive wait policy, set only for that moment,
and never over the user's own choice."""

import os

import numba
import numpy as np
import pytest

import nbyoc
from nbyoc.runtime import threads


@pytest.fixture
def launches(monkeypatch):
    """Pretend the threads are not running yet; record OMP_WAIT_POLICY at each launch."""
    seen = []

    def get_num_threads():
        seen.append(os.environ.get("OMP_WAIT_POLICY"))
        return 2

    monkeypatch.setattr(threads, "_started", False)
    monkeypatch.setattr(numba, "get_num_threads", get_num_threads)
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    return seen


def test_the_wait_policy_is_set_while_the_threads_start_and_removed_after(launches):
    assert threads.start_threads() == 2
    assert launches == ["passive"]
    assert "OMP_WAIT_POLICY" not in os.environ


def test_a_second_start_does_not_touch_the_environment(launches):
    threads.start_threads()
    threads.start_threads()
    assert launches == ["passive", None]


@pytest.mark.parametrize(
    "name,value", [("GOMP_SPINCOUNT", "infinite"), ("OMP_WAIT_POLICY", "active")]
)
def test_the_users_choice_wins(launches, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    threads.start_threads()
    assert os.environ[name] == value
    assert launches == ([value] if name == "OMP_WAIT_POLICY" else [None])


def test_compiling_a_parallel_kernel_starts_the_threads(launches):
    x = nbyoc.var("x", (64,))
    # A graph no other test compiles, so the kernel is not in the in-memory cache.
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.sqrt(x) * 3.25 + 0.125), backend="llvm",
                       options={"llvm": {"parallel_threshold": 1}})  # fmt: skip
    assert launches == ["passive"]
    np.testing.assert_allclose(fn(np.full(64, 4, np.float32)), np.full(64, 6.625))


def test_passive_openmp_sets_the_policy_for_the_block_only(launches):
    with threads.passive_openmp():
        assert os.environ["OMP_WAIT_POLICY"] == "passive"
    assert "OMP_WAIT_POLICY" not in os.environ


def test_passive_openmp_leaves_the_users_choice(launches, monkeypatch):
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    with threads.passive_openmp():
        assert "OMP_WAIT_POLICY" not in os.environ
