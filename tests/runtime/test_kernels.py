"""Compiled kernels in memory: kept while used, bounded when not, released on request."""

import sys

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.llvm import module as llvm
from nbyoc.errors import ConfigurationError
from nbyoc.runtime.llvm import kernels


def distinct(k: int):
    """A function whose kernel no other test compiles (its shape is its own)."""
    x = nbyoc.var("x", (k, 97))
    return nbyoc.function([x], nbyoc.exp(x) * 3.0 - x)


def module_of(fn) -> str:
    (module,) = fn.runtime_modules.values()
    return f"nbyoc_kernel_{module.compiled.key}"


def test_kernels_no_executable_uses_are_bounded(monkeypatch):
    monkeypatch.setenv("NBYOC_KERNELS_KEPT", "2")
    names = []
    for k in range(1001, 1006):
        fn = nbyoc.compile(distinct(k), backend="llvm")
        names.append(module_of(fn))
        del fn
    loaded = [name for name in names if name in sys.modules]
    assert loaded == names[-2:]  # the two most recently used stay, the others are let go


def test_an_executable_keeps_its_kernel_loaded(monkeypatch):
    monkeypatch.setenv("NBYOC_KERNELS_KEPT", "0")
    kept = nbyoc.compile(distinct(1011), backend="llvm")
    for k in range(1012, 1015):
        nbyoc.compile(distinct(k), backend="llvm")
    assert module_of(kept) in sys.modules
    x = np.full((1011, 97), 0.5, np.float32)
    np.testing.assert_allclose(kept(x), np.exp(x) * 3 - x, rtol=1e-6)


def test_release_lets_go_of_unused_kernels_and_they_load_again(monkeypatch):
    monkeypatch.setenv("NBYOC_KERNELS_KEPT", "64")
    kept = nbyoc.compile(distinct(1021), backend="llvm")
    dropped = nbyoc.compile(distinct(1022), backend="llvm")
    name = module_of(dropped)
    del dropped
    assert name in sys.modules  # (one of the recently used)
    assert nbyoc.cache.release() >= 1
    assert name not in sys.modules and module_of(kept) in sys.modules
    assert all(key in {k for e in llvm._LIVE.values() for k in e.keys} for key in kernels._KERNELS)
    again = nbyoc.compile(distinct(1022), backend="llvm")  # from the disk cache
    assert sum(again.runtime_modules["llvm_0"].kernel.stats.cache_hits.values()) == 1
    x = np.full((1022, 97), 0.25, np.float32)
    np.testing.assert_allclose(again(x), np.exp(x) * 3 - x, rtol=1e-6)


def test_examplejson_programs_keep_their_op_kernels(monkeypatch):
    monkeypatch.setenv("NBYOC_KERNELS_KEPT", "0")
    fn = nbyoc.compile(distinct(1031), backend="examplejson")
    nbyoc.cache.release()
    x = np.full((1031, 97), 2.0, np.float32)
    np.testing.assert_allclose(fn(x), np.exp(x) * 3 - x, rtol=1e-6)


def test_a_bad_kernels_kept_setting_is_refused(monkeypatch):
    monkeypatch.setenv("NBYOC_KERNELS_KEPT", "many")
    with pytest.raises(ConfigurationError, match="NBYOC_KERNELS_KEPT must be a number"):
        nbyoc.cache.kernels_kept()


def test_a_kernel_someone_still_holds_is_not_released(monkeypatch):
    monkeypatch.setenv("NBYOC_KERNELS_KEPT", "0")
    fn = nbyoc.compile(distinct(1041), backend="llvm")
    # (What a caller holds is the CompiledKernel: its kernel, and the addresses of the
    # stage functions it calls, whose modules it keeps loaded.)
    name, compiled = module_of(fn), fn.runtime_modules["llvm_0"].compiled
    del fn
    nbyoc.cache.release()
    assert name in sys.modules  # (its kernel is held here)
    x = np.full((1041, 97), 1.5, np.float32)
    out = np.empty_like(x)
    compiled.kernel(x, out, *compiled.trailing)
    np.testing.assert_allclose(out, np.exp(x) * 3 - x, rtol=1e-6)
    del compiled
    assert nbyoc.cache.release() >= 1 and name not in sys.modules
