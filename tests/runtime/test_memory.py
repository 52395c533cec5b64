"""glibc's malloc tuned once as the llvm kernels load (``nbyoc.runtime.memory``): the
thresholds set, never over the user's choice, and a kernel whose stages allocate
their working arrays per call no longer page-faults them in at every call."""

from __future__ import annotations

import ctypes
import platform

import pytest

from nbyoc.runtime import memory

from ..helpers import run_fresh


class _FakeLibc:
    def __init__(self, result=1):
        self.calls = []
        self.result = result

        def mallopt(parameter, value):
            self.calls.append((parameter, value))
            return self.result

        self.mallopt = mallopt


@pytest.fixture
def libc(monkeypatch):
    """A C library that records mallopt calls; the process not tuned yet, on glibc."""
    fake = _FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(memory, "_tuned", None)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
    for name in (memory.ENV, *memory._USER_CHOICES):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_the_thresholds_are_set_once(libc):
    assert memory.tune_malloc() and memory.tune_malloc()
    assert libc.calls == [
        (memory.M_MMAP_THRESHOLD, 32 << 20),
        (memory.M_TRIM_THRESHOLD, 64 << 20),
    ]


@pytest.mark.parametrize(
    "name,value",
    [("NBYOC_MALLOC_TUNING", "0"), ("MALLOC_MMAP_THRESHOLD_", "65536"),
     ("MALLOC_TRIM_THRESHOLD_", "0")],
)  # fmt: skip
def test_the_users_choice_leaves_malloc_alone(libc, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    assert memory.tune_malloc() is False and libc.calls == []


def test_other_c_libraries_are_left_alone(libc, monkeypatch):
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert memory.tune_malloc() is False and libc.calls == []


def test_a_refused_setting_is_reported(libc):
    libc.result = 0
    assert memory.tune_malloc() is False


_FAULTS_PER_CALL = """
import resource, numpy as np, nbyoc
from nbyoc.runtime import memory
# A wide conv: each task's phase planes and wide rows are about 1 MiB, allocated per call.
x = nbyoc.var("x", (1, 32, 900, 161))
w = nbyoc.const(np.random.default_rng(0).standard_normal((32, 32, 3, 3)).astype(np.float32))
fn = nbyoc.compile(nbyoc.function([x], nbyoc.relu(nbyoc.conv(x, w, pads=(1, 1, 1, 1)))),
                   backend="llvm")
data = np.ones((1, 32, 900, 161), np.float32)
for _ in range(3):
    fn(data)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    fn(data)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10
import json
print(json.dumps({"faults": faults, "tuned": memory.tune_malloc()}))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="tunes glibc's malloc only")
def test_a_kernels_per_call_arrays_are_not_faulted_in_at_every_call(tmp_path):
    """Across processes: in a fresh process, the first kernel's calls page-fault no
    fresh memory; with the tuning off (glibc left at its start) they fault its per-call
    arrays in every time (this test's own proof that it measures something)."""
    tuned = run_fresh(_FAULTS_PER_CALL, tmp_path)
    untuned = run_fresh(_FAULTS_PER_CALL, tmp_path, env={memory.ENV: "0"})
    assert tuned["tuned"] and not untuned["tuned"]
    # (4 KiB pages: one task's 1 MiB is 256 faults; a few stray ones are Python's own)
    assert tuned["faults"] < 20 <= 128 <= untuned["faults"], (tuned, untuned)
