"""Parallel loops outlined into group functions (nbyoc/codegen/llvm/outline.py): the
numbers stay the host's, and a loop that cannot be outlined stays in the kernel."""

import numpy as np

import nbyoc
from nbyoc.codegen.llvm.lower import lower


def _source(f, threshold):
    return lower(f.with_attrs(global_symbol="k"), True, threshold, True).source


def test_a_parallel_loop_over_views_becomes_a_group_function():
    # Without function pointers (with them, a driver runs the stages: no kernel loop).
    x = nbyoc.var("x", (64, 300))
    y = nbyoc.exp(x) @ nbyoc.transpose(x)
    z = nbyoc.exp(y - nbyoc.max(y, axis=1, keepdims=True))
    f = nbyoc.function([x], nbyoc.reshape(z / nbyoc.sum(z, axis=1, keepdims=True), (64, 64)))
    assert "def group0(" in lower(f.with_attrs(global_symbol="k"), True, 64, False).source
    data = np.random.default_rng(0).uniform(-1, 1, (64, 300)).astype(np.float32)
    fn = nbyoc.compile(f, backend="llvm", options={"llvm": {"parallel_threshold": 64}})
    want = nbyoc.compile(f, backend="host")(data)
    np.testing.assert_allclose(fn(data), want, rtol=1e-4, atol=1e-6)


def test_a_loop_writing_a_0d_output_stays_in_the_kernel():
    # Numba's parfor lowering refuses a 0-d array passed into a prange: the loop reads
    # the output through a view bound before it, and stays where it is.
    x = nbyoc.var("x", (4,))
    f = nbyoc.function([x], nbyoc.sum(x))
    assert "def group0(" not in _source(f, 4)
    fn = nbyoc.compile(f, backend="llvm", options={"llvm": {"parallel_threshold": 4}})
    assert float(fn(np.arange(4, dtype=np.float32))) == 6.0
