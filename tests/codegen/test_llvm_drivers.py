"""The table driver (``codegen.llvm.drivers``): every parallel run of stages is one call
of one compiled driver, the kernel keeps no parallel loop of its own, and the numbers
are the host's, through contiguous arrays, strided views, column reductions and
stage ops outlined as tasks."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

import nbyoc
from nbyoc.runtime.llvm import jit_address
from nbyoc.runtime.llvm.stage_table import strided_view, table_of

from ..helpers import FLOAT_DTYPES, assert_close_to_host, kernel_source, parallel_runs

pytestmark = pytest.mark.skipif(
    not jit_address.supported(), reason="this Numba calls no stage by address"
)
PARALLEL = {"llvm": {"parallel_threshold": 1}}


def drive_modules(fn) -> tuple[set[str], set[str]]:
    """(the table drivers', the stage entries') module sources of ``fn``'s kernel."""
    (module,) = fn.runtime_modules.values()
    sources = [s.module for s in module.lowered.addressed if s.module]
    return (
        {s for s in sources if "\nENTRY_TYPE = " in s},
        {s for s in sources if "\nINNER_TYPE = " in s},
    )


# (no float16: a kernel holds float16 arrays as their uint16 storage)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8", "bool", "uint16"])
def test_a_table_carries_arrays_views_and_sizes_exactly(dtype):
    @njit
    def round_trip(whole, sizes):
        view = whole[::-1, 1::2]  # negative and non-unit strides
        table = table_of("a2 s2 t2 v", (whole, view, sizes, 7))
        rebuilt = strided_view(
            table[3], (table[4], table[5]), (table[6], table[7]), whole.dtype.type
        )
        return table, rebuilt.copy()

    whole = (np.arange(24) % 5).reshape(4, 6).astype(dtype)
    table, rebuilt = round_trip(whole, (3, 9))
    assert table[0] == whole.ctypes.data and table[1:3].tolist() == [4, 6]
    assert table[4:8].tolist() == [4, 3, -6 * whole.itemsize, 2 * whole.itemsize]
    assert table[8:].tolist() == [3, 9, 7]
    np.testing.assert_array_equal(rebuilt, whole[::-1, 1::2])


def test_a_table_refuses_at_compile_an_item_its_layout_does_not_state():
    """A strided view where the layout says contiguous, or an array of another rank,
    would make an entry rebuild the wrong array: the kernel does not compile."""

    @njit
    def strided_as_contiguous(x):
        return table_of("a2", (x[:, ::2],))

    @njit
    def wrong_rank(x):
        return table_of("a3", (x,))

    for bad in (strided_as_contiguous, wrong_rank):
        with pytest.raises(TypingError):
            bad(np.zeros((4, 4)))


def test_runs_of_different_stages_share_one_driver_and_entries_by_signature():
    """Two graphs of different ops and shapes: one driver module, the same text in both,
    and an entry per stage signature (stages of one signature share it)."""
    fns = []
    for seed, shape in enumerate([(2, 8, 24, 24), (3, 4, 10, 30)]):
        x = nbyoc.var("x", shape)
        y = nbyoc.tanh(x) * 2.0 + 1.0
        z = nbyoc.sum(y * y, axis=1, keepdims=True)  # a column reduction
        func = nbyoc.function([x], [nbyoc.max_pool(y, (2, 2)), z + 1.0])
        fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
        data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        assert_close_to_host(fn, func, [data], rtol=1e-5, atol=1e-5)
        assert "prange(" not in kernel_source(fn.get_source()) and parallel_runs(fn.get_source())
        fns.append(fn)
    (first, entries), (second, _) = map(drive_modules, fns)
    assert len(first) == 1 and first == second
    signatures = [e.split("\nINNER = ")[1].split("\n")[0] for e in entries]
    assert len(set(signatures)) == len(signatures)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", [*FLOAT_DTYPES, pytest.param("int32", marks=pytest.mark.slow),
                                   "float16"])  # fmt: skip
@pytest.mark.parametrize("shape, axis", [((2, 3, 600), 1), ((700, 3), 0), ((2, 5, 4, 300), (1, 2))])
def test_parallel_column_reductions_are_driven_stages_matching_the_host(op, dtype, shape, axis):
    x = nbyoc.var("x", shape, dtype)
    func = nbyoc.function([x], nbyoc.call_op(op, x * 1, axis=axis, keepdims=False) * 1)
    fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
    assert "prange(" not in kernel_source(fn.get_source())
    # Values near 1, so that a product of hundreds stays finite in float16.
    data = np.random.default_rng(0).uniform(0.99, 1.01, shape).astype(dtype)
    if dtype == "int32":
        data = np.random.default_rng(0).integers(-3, 4, shape).astype(dtype)
        data[data == 0] = 1
    got, want = fn(data), nbyoc.compile(func, backend="host")(data)
    if dtype == "float16":  # NumPy accumulates in float16 (a product of 700: 4% off); the
        # kernel in float64, rounding once: the float64 truth within one float16 rounding.
        want = getattr(np, op)(data.astype(np.float64), axis=axis)
    rtol = {"float16": 2**-10, "float32": 1e-5, "float64": 1e-12, "int32": 0}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_stage_ops_outlined_as_tasks_match_the_host_at_batch_two(mode):
    """resize, gather and argmax in parallel are stage functions of tasks run by the
    driver (their loops outlined as emitted), reading strided views of a concatenate."""
    x = nbyoc.var("x", (2, 6, 12, 10))
    both = nbyoc.concatenate([nbyoc.sigmoid(x), x * 3.0], axis=1)
    half = nbyoc.slice(both, starts=(0, 3, 0, 0), ends=(2, 9, 12, 10))  # a strided view
    up = nbyoc.resize(half, scales=(1.0, 1.0, 2.0, 2.0), mode=mode)
    picked = nbyoc.gather(up, np.array([5, 0, 3]), axis=1)
    best = nbyoc.call_op("argmax", picked, axis=2, keepdims=False)
    func = nbyoc.function([x], [up * 1.0, picked + 1.0, best])
    fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
    assert "prange(" not in kernel_source(fn.get_source())
    data = np.random.default_rng(3).standard_normal((2, 6, 12, 10)).astype(np.float32)
    assert_close_to_host(fn, func, [data], rtol=1e-6, atol=1e-6)
