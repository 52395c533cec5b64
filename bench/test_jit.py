"""``nbyoc.jit`` against what a user would otherwise run on the same NumPy function:
NumPy itself, the function written out as loops under ``numba.njit(parallel=True)``,
and numexpr (for the elementwise ones), at 10x10, 1024x1024 and 4096x4096 float32.

Each benchmark's ``extra_info`` has kind "jit", the function, the shape and the case;
``bench/report.py`` makes the README's table of them.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from graphs import numexpr

import nbyoc

#: The n x n sizes measured (of those the run's --bench-sizes give).
JIT_SIZES = (10, 1024, 4096)
CASES = ["numpy", "nbyoc.jit", "numba.njit", "numexpr"]


# -- the functions, as a user writes them in NumPy ---------------------------------


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm(x, gain, bias):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gain + bias


def axpby(x, y, alpha, beta):
    return alpha * x + beta * y


# -- the same, written out as loops for Numba ----------------------------------------


@numba.njit(parallel=True)
def gelu_numba(x):
    flat = x.ravel()
    out = np.empty_like(flat)
    for i in numba.prange(flat.size):
        v = flat[i]
        out[i] = 0.5 * v * (1.0 + math.tanh(0.7978845608 * (v + 0.044715 * v * v * v)))
    return out.reshape(x.shape)


@numba.njit(parallel=True)
def softmax_numba(x):
    out = np.empty_like(x)
    for r in numba.prange(x.shape[0]):
        m = x[r, 0]
        for j in range(x.shape[1]):
            m = max(m, x[r, j])
        s = 0.0
        for j in range(x.shape[1]):
            e = math.exp(x[r, j] - m)
            out[r, j] = e
            s += e
        for j in range(x.shape[1]):
            out[r, j] /= s
    return out


@numba.njit(parallel=True)
def layer_norm_numba(x, gain, bias):
    out = np.empty_like(x)
    n = x.shape[1]
    for r in numba.prange(x.shape[0]):
        mean = 0.0
        for j in range(n):
            mean += x[r, j]
        mean /= n
        var = 0.0
        for j in range(n):
            var += (x[r, j] - mean) ** 2
        scale = 1.0 / math.sqrt(var / n + 1e-5)
        for j in range(n):
            out[r, j] = (x[r, j] - mean) * scale * gain[j] + bias[j]
    return out


@numba.njit(parallel=True)
def axpby_numba(x, y, alpha, beta):
    a, b = np.float32(alpha), np.float32(beta)  # NumPy keeps float32 for Python floats
    fx, fy = x.ravel(), y.ravel()
    out = np.empty_like(fx)
    for i in numba.prange(fx.size):
        out[i] = a * fx[i] + b * fy[i]
    return out.reshape(x.shape)


def _numexpr(expression: str, names: list[str]):
    if numexpr is None:
        return None

    def run(*args):
        return numexpr.evaluate(expression, local_dict=dict(zip(names, args)))

    return run


def _inputs(name: str, shape) -> list:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    if name == "layer_norm":
        return [x, rng.standard_normal(shape[-1:]).astype(np.float32),
                rng.standard_normal(shape[-1:]).astype(np.float32)]  # fmt: skip
    if name == "axpby":
        return [x, rng.standard_normal(shape).astype(np.float32), 0.5, 2.0]
    return [x]


#: function name -> (NumPy function, Numba loops, numexpr version or None)
FUNCTIONS = {
    "gelu": (gelu, gelu_numba, _numexpr(
        "0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x**3)))", ["x"])),
    "softmax": (softmax, softmax_numba, None),
    "layer_norm": (layer_norm, layer_norm_numba, None),
    "axpby": (axpby, axpby_numba, _numexpr("alpha * x + beta * y", ["x", "y", "alpha", "beta"])),
}  # fmt: skip


def _candidate(name: str, case: str):
    numpy_fn, numba_fn, numexpr_fn = FUNCTIONS[name]
    return {
        "numpy": numpy_fn,
        "nbyoc.jit": nbyoc.jit(numpy_fn),
        "numba.njit": numba_fn,
        "numexpr": numexpr_fn,
    }[case]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_jit(benchmark, warm, name, size, case):
    if size not in JIT_SIZES:
        pytest.skip(f"nbyoc.jit is measured at {JIT_SIZES}")
    shape = (size, size)
    fn = _candidate(name, case)
    if fn is None:
        pytest.skip(f"{case} has no version of {name} (or is not installed)")
    args = _inputs(name, shape)
    expected = FUNCTIONS[name][0](*args)
    got = fn(*args)
    assert got.dtype == expected.dtype or case in ("numba.njit", "numexpr")
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    benchmark.group = f"jit {name} {'x'.join(map(str, shape))}"
    benchmark.extra_info.update(kind="jit", graph=name, shape="x".join(map(str, shape)), case=case)
    warm(fn, *args)
    benchmark(fn, *args)


def reference(a, b, c, d):
    return ((a + b) - c) * d


@pytest.mark.parametrize("case", ["bare", "jit"])
def test_jit_call_overhead(benchmark, warm, case):
    """What nbyoc.jit adds to a call: the function through nbyoc.jit against its compiled
    Executable called directly ("bare"), on the reference graph at 10x10."""
    jitted = nbyoc.jit(reference)
    args = [np.full((10, 10), k, np.float32) for k in range(1, 5)]
    np.testing.assert_array_equal(jitted(*args), reference(*args))
    ((_, _, executable),) = jitted._compiled.values()
    fn = executable if case == "bare" else jitted
    benchmark.group = "nbyoc.jit per-call cost, reference graph 10x10"
    warm(fn, *args)
    benchmark(fn, *args)
