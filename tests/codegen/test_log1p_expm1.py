"""log1p and expm1 are accurate near 0 on every backend: measured against float64 (the
reference for float32) and against exact values (for float64), relative errors stay
within a few ulps where ``log(1 + x)`` and ``exp(x) - 1`` lose every digit."""

import math

import numpy as np
import pytest

import nbyoc

from ..helpers import reload

BACKENDS = ["host", "llvm", "csource", "examplejson"]
#: 1e-10 .. 1e-3 on both sides of 0, where the naive forms cancel.
NEAR_ZERO = np.concatenate([np.logspace(-10, -3, 57), -np.logspace(-10, -3, 57)])
EXACT = {"log1p": math.log1p, "expm1": math.expm1}  # Python's: correctly rounded doubles


def offloaded_ops(fn) -> set[str]:
    return {
        node.op.name
        for name in fn.runtime_modules
        for node in nbyoc.ir.post_order([fn.module[name].body])
        if isinstance(node, nbyoc.ir.Call)
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["log1p", "expm1"])
def test_accurate_near_zero(backend, dtype, op):
    x = nbyoc.var("x", NEAR_ZERO.shape, dtype)
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.call_op(op, x)), backend=backend)
    if backend != "host":
        assert op in offloaded_ops(fn), f"{backend} should run {op} itself"
        fn = reload(fn)
    data = NEAR_ZERO.astype(dtype)
    got = fn(data)
    assert got.dtype == np.dtype(dtype)
    exact = np.array([EXACT[op](float(v)) for v in data])  # of the rounded input
    relative = np.abs(got.astype(np.float64) - exact) / np.abs(exact)
    ulps = relative / np.finfo(dtype).eps
    assert ulps.max() <= 2, f"{op} on {backend} in {dtype}: {ulps.max():.1f} ulps"
    naive = np.log(1 + data) if op == "log1p" else np.exp(data) - 1
    naive_ulps = np.abs(naive - exact) / np.abs(exact) / np.finfo(dtype).eps
    assert naive_ulps.max() > 1000  # (what the op avoids)


@pytest.mark.parametrize("backend", ["llvm", "csource"])
def test_away_from_zero_and_at_the_edges_as_numpy(backend):
    values = np.array([-1.0, -0.5, 0.0, -0.0, 0.5, 3.0, 700.0, np.inf, -np.inf, np.nan, -2.0])
    x = nbyoc.var("x", values.shape, "float64")
    f = nbyoc.function([x], [nbyoc.log1p(x), nbyoc.expm1(x)])
    with np.errstate(all="ignore"):
        got = nbyoc.compile(f, backend=backend)(values)
        want = (np.log1p(values), np.expm1(values))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-15)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))  # (-0.0 stays -0.0)


def test_jit_takes_numpy_log1p_and_expm1():
    @nbyoc.jit
    def f(x):
        return np.log1p(x) + np.expm1(x)

    data = np.linspace(-0.5, 0.5, 11)
    np.testing.assert_allclose(f(data), np.log1p(data) + np.expm1(data), rtol=1e-15)
