"""The llvm backend: numbers equal to NumPy's for every op, dtype, rank and
broadcast; fusion (no intermediate arrays); buffer scheduling; caching in
memory and on disk; the checked call paths. Every module is saved and loaded
before its numbers are checked."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import nbyoc
from nbyoc.codegen.llvm.module import LLVMModule
from nbyoc.errors import (
    ArgumentError,
    DTypeMismatchError,
    ExecutionError,
    LoadError,
    ShapeMismatchError,
)
from nbyoc.ir.op import Op
from nbyoc.runtime import scratch
from nbyoc.runtime.llvm import jit_address, target, vecmath

from ..helpers import assert_close_to_host, assert_matches_host, external, kernel_source, reload
from ..strategies import graphs, random_inputs
from . import conformance
from .conformance import VECTORISED_OPS, assert_within_ulp, ulp_inputs

DTYPES = nbyoc.DTYPES
EXACT = conformance.EXACT | {"reshape", "transpose", "concatenate"}


def reloaded(func, **options) -> LLVMModule:
    return LLVMModule.load_from_bytes(LLVMModule(func, **options).save_to_bytes())


def run_module(func, inputs, **options):
    module = reloaded(func, **options)
    outs = [np.empty(t.shape, t.dtype) for t in nbyoc.ir.types.tensor_types(func.ret_type)]
    module.get_function(func.attrs["global_symbol"])(*inputs, *outs)
    return outs


RTOL = {"float16": 1e-3, "float32": 1e-5, "float64": 1e-12}


def check_against_numpy(func, inputs, exact_ops=EXACT, rtol=RTOL, **options):
    """Bitwise equal where only exactly rounded ops are involved, else close."""
    outputs = run_module(func, inputs, **options)
    assert_matches_host(func, outputs, inputs, exact_ops, rtol)


def values(shape, dtype, low=1, high=5, seed=0):
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if kind in "iu":
        return rng.integers(max(low, 0) if kind == "u" else low, high, size=shape).astype(dtype)
    return rng.uniform(low, high, shape).astype(dtype)


# -- numbers ----------------------------------------------------------------------


@pytest.mark.parametrize("da, db, fuse", conformance.dtype_pairs(DTYPES, (True, False)))
def test_binary_ops_every_dtype_pair_with_broadcasting(da, db, fuse):
    check_against_numpy(*conformance.binary_ops("llvm", da, db), fuse=fuse)


@pytest.mark.parametrize("dtype", conformance.per_dtype(DTYPES))
def test_unary_ops_every_dtype(dtype):
    with np.errstate(all="ignore"):
        check_against_numpy(*conformance.unary_ops("llvm", dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_special_values_follow_numpy(dtype):
    f, inputs = conformance.special_values("llvm", dtype, extra=lambda x, y: [nbyoc.max(x)])
    with np.errstate(all="ignore"):
        check_against_numpy(f, inputs, exact_ops=EXACT | {"max"})


def test_integer_overflow_wraps_like_numpy():
    with np.errstate(all="ignore"):  # NumPy warns of the divisions by zero it computes
        check_against_numpy(*conformance.integer_overflow("llvm"))


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize(
    "dtypes",
    [("bool", "float32", "int32"), ("uint8", "int8", "uint16"), ("int64", "uint64", "bool")],
)
def test_where_and_cast_like_numpy(dtypes, fuse):
    with np.errstate(all="ignore"):  # casts of large values to small dtypes wrap, as in NumPy
        check_against_numpy(*conformance.where_and_cast("llvm", dtypes), fuse=fuse)


def test_float16_computes_in_float32_and_rounds_every_op():
    """Numba has no float16 on the CPU: llvm takes float16 arrays as their bits and
    computes in float32, rounding each op's result to float16 as NumPy's float16 loops
    do, so a fused chain of exactly rounded ops equals NumPy bit for bit (rounding only
    at the end would not: 2049 + 1 - 1 is 2048 in float16, 2049 in float32)."""
    x = nbyoc.var("x", (4, 5), "float16")
    y = nbyoc.var("y", (5,), "int8")
    z = nbyoc.var("z", (4, 5), "float64")
    chain = (x * 2.0 + 1.0) - 1.0
    outs = [chain, nbyoc.exp(x) * 2.0, nbyoc.exp(y), y + y, nbyoc.cast(z, "float16"),
            nbyoc.sum(x, axis=1), nbyoc.max(x, axis=0), nbyoc.argmax(x, axis=1),
            nbyoc.concatenate([x, nbyoc.cast(z, "float16")], axis=0), x + z]  # fmt: skip
    f = nbyoc.function([x, y, z], outs)
    assert all(nbyoc.codegen.supports("llvm", o) for o in outs)
    fn = reload(nbyoc.compile(f, backend="llvm"))
    main = nbyoc.ir.post_order([fn.module["main"].body])
    assert not [n for n in main if isinstance(n, nbyoc.ir.Call) and isinstance(n.op, Op)]
    data = np.array([2049, 1024.5, -0.0, np.inf, np.nan, 65504, 6e-8, -3, 0.1, 1])
    data = np.resize(data, (4, 5)).astype(np.float16)
    small = np.arange(-2, 3, dtype=np.int8)
    # float64 values half-way between float16 neighbours and just beside: one rounding
    wide = np.resize([1 + 2**-11, 1 + 2**-11 + 2**-40, 65520.0, 1e-9, -2.5 * 2**-24], (4, 5))
    with np.errstate(all="ignore"):
        got = fn(data, small, wide)
        want = nbyoc.compile(f, backend="host")(data, small, wide)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, k
        if k in (1, 2, 5):  # exp (each side's float32 exp), sum (NumPy's pairwise order)
            np.testing.assert_allclose(g, w, rtol=1e-3, err_msg=str(k))
        else:
            np.testing.assert_array_equal(g, w, err_msg=str(k))
    assert "half_bits" in fn.get_source()


@pytest.mark.parametrize("dtype", conformance.per_dtype(DTYPES))
def test_reductions(dtype):
    x = nbyoc.var("in0", (3, 4, 5), dtype)
    outs = [
        nbyoc.call_op(op, x, axis=axis, keepdims=keep)
        for op in ("sum", "mean", "max", "min", "prod")
        for axis, keep in [(None, False), (1, False), ((0, 2), True), (-1, True)]
    ]
    outs += [
        nbyoc.call_op(op, x, axis=axis, keepdims=keep)
        for op in ("argmax", "argmin")
        for axis, keep in [(None, False), (1, False), (-1, True)]
    ]
    f = external([x], outs, "llvm_0", "llvm")
    exact = EXACT | {"max", "min", "argmax", "argmin"}
    data = values((3, 4, 5), dtype, low=-9, high=9)
    rtol = RTOL
    if dtype == "float16":
        # NumPy sums and multiplies float16 rows in float16, rounding every step, where
        # llvm accumulates in float64 and rounds once; on whole numbers the sums agree
        # exactly (so the tolerance only covers mean's and prod's last bits).
        data, rtol = np.round(data), {"float16": 1e-2}
    check_against_numpy(f, [data], exact_ops=exact, rtol=rtol)


@pytest.mark.parametrize(
    "dtypes", [("float32", "float32"), ("float64", "int32"), ("int64", "int64")]
)
def test_matmul_shapes(dtypes):
    da, db = dtypes
    cases = [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 2)),
        ((1, 3, 4), (2, 4, 2)),
        ((4,), (4, 3)),
        ((3, 4), (4,)),
        ((4,), (4,)),
    ]
    for k, (sa, sb) in enumerate(cases):
        a, b = nbyoc.var("in0", sa, da), nbyoc.var("in1", sb, db)
        f = external([a, b], [a @ b], f"llvm_mm{k}", "llvm")
        check_against_numpy(f, [values(sa, da, -3, 3), values(sb, db, -3, 3, seed=1)])


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_layout_ops_and_stage_boundaries(dtype):
    x = nbyoc.var("in0", (2, 3, 4), dtype)
    t = x * 2
    r = nbyoc.reshape(nbyoc.transpose(t, (2, 0, 1)), (4, 6))  # reshape of a strided view
    outs = [r + 1, nbyoc.concatenate([t, x, t], axis=1), nbyoc.transpose(x), nbyoc.reshape(x, (24,)),
            nbyoc.sum(nbyoc.exp(t * 0) + t, axis=2)]  # fmt: skip
    f = external([x], outs, "llvm_0", "llvm")
    check_against_numpy(f, [values((2, 3, 4), dtype, -5, 5)])


@settings(max_examples=8, deadline=None)
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
    dtypes=st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)),
)
def test_ranks_zero_to_four_with_broadcasting(shapes, dtypes):
    f, inputs = conformance.broadcast_ranks(
        "llvm", shapes.input_shapes, dtypes, extra=lambda t: [nbyoc.sum(t)]
    )
    check_against_numpy(f, inputs)


def test_constants_several_outputs_and_outputs_that_are_inputs():
    x, s = nbyoc.var("in0", (2, 3), "float64"), nbyoc.var("in1", (), "float32")
    k = nbyoc.const(np.array([1.5, np.nan, -np.inf], np.float64))
    i = nbyoc.const(np.array([-(2**62), 2**62 - 1, 0], np.int64))
    t = x * k
    f = external(
        [x, s], [t, x, k, t + i, nbyoc.const(np.float32(0.1)) * s, t, -x], "llvm_0", "llvm"
    )
    check_against_numpy(f, [np.arange(6.0).reshape(2, 3), np.asarray(3, np.float32)])


def test_parallel_kernels_give_the_same_numbers():
    x, y = nbyoc.var("in0", (64, 33)), nbyoc.var("in1", (33,))
    t = x * y
    f = external(
        [x, y],
        [(t + x) * (t - y), nbyoc.sum(t, axis=1), nbyoc.concatenate([t, x])],
        "llvm_par",
        "llvm",
    )
    module = LLVMModule(f, parallel_threshold=16)
    assert module.lowered.parallel and "prange" in module.get_source()
    check_against_numpy(
        f, [values((64, 33), "float32"), values((33,), "float32", seed=2)], parallel_threshold=16
    )


def test_parallel_stage_reading_a_scratch_view_sees_what_the_stage_before_wrote():
    """Found by the property test below in CI: Numba fused the multiply's prange
    (writing scratch through a flat view) with the sum's (reading it through a 2-d
    view) and the sum read the scratch before it was written. Now the multiply is a
    stage run by a driver and the one-task sum a serial loop: no prange of the kernel's
    is left to fuse."""
    x = nbyoc.var("in0", (1, 3), "int64")
    f = external([x], [nbyoc.sum(x * 2, axis=0, keepdims=True)], "llvm_0", "llvm")
    module = LLVMModule(f, parallel_threshold=1)
    if jit_address.supported():
        assert "prange(" not in kernel_source(module.get_source())
    check_against_numpy(f, [np.array([[0, 1, 5]])], parallel_threshold=1)


@settings(max_examples=15, deadline=None)
@given(graphs())
def test_random_graphs_in_parallel_kernels_match_the_host(f):
    """Every loop a prange (threshold 1): parallel lowering meets 0-d parameters,
    broadcasts, reductions and views of random graphs."""
    options = {"llvm": {"parallel_threshold": 1}}
    fn = reload(nbyoc.compile(f, backend="llvm", options=options))
    assert_close_to_host(fn, f, random_inputs(f))


@pytest.mark.parametrize("op", sorted(VECTORISED_OPS))
def test_float32_transcendentals_are_within_their_ulp_bound(op):
    """float32 exp, log, tanh, sigmoid and erf are nbyoc's own (nbyoc.runtime.llvm.vecmath):
    check them against float64 NumPy rounded to float32, over a dense range, every binade
    of positive numbers (subnormals included) and the special values. The exhaustive
    check over every float32 is bench/vecmath_accuracy.py."""
    data = ulp_inputs()
    x = nbyoc.var("in0", data.shape)
    f = external([x], [nbyoc.call_op(op, x)], "llvm_0", "llvm")
    assert_within_ulp(op, data, run_module(f, [data])[0], vecmath.MAX_ULP)


def _scalar(function, data: np.ndarray) -> np.ndarray:
    """``function`` of each float32 element of ``data`` (np.vectorize would pass floats)."""
    flat = [function(np.float32(v)) for v in data.ravel()]
    return np.array(flat, np.float32).reshape(data.shape)


def test_exp_nonpositive_is_exp_bit_for_bit_where_it_applies():
    data = ulp_inputs()
    data = np.concatenate([-np.abs(data), [np.nan, -np.inf, -0.0, -103.99, -87.4, -1e-30]])
    data = data.astype(np.float32)
    cheap, full = _scalar(vecmath.exp_nonpositive_f32, data), _scalar(vecmath.exp_f32, data)
    np.testing.assert_array_equal(cheap, full)
    assert np.array_equal(np.signbit(cheap), np.signbit(full))


def test_exp_of_a_value_never_positive_takes_the_cheaper_exp_with_the_same_results():
    """Softmax's exp(x - max(x)) and exp(-|x|) need no overflow handling (nbyoc.ir.signs):
    the kernel calls exp_nonpositive_f32, and its results are exp_f32's. exp of x less
    some other row's maximum, or of a maximum without keepdims, may be positive."""
    rng = np.random.default_rng(4)
    x = nbyoc.var("in0", (64, 40))
    rows = rng.standard_normal((64, 40)).astype(np.float32) * 40
    rows[0, :5] = [np.nan, 1.0, 2.0, 3.0, 4.0]
    rows[1, :3] = [-np.inf, 0.0, 1.0]
    rows[2, :] = -np.inf
    rows[3, :3] = [np.inf, 0.0, -np.inf]
    rows[4, :2] = [100.0, -10.0]  # exp(-110): subnormal
    shifted = x - nbyoc.max(x, axis=1, keepdims=True)
    outs = [nbyoc.exp(shifted), nbyoc.exp(-nbyoc.abs(x)), nbyoc.softmax(x, axis=0)]
    fn = nbyoc.compile(nbyoc.function([x], outs))
    assert fn.get_source().count("exp_nonpositive_f32(") >= 3
    with np.errstate(all="ignore"):
        expected_shifted = rows - rows.max(axis=1, keepdims=True)
        want = [_scalar(vecmath.exp_f32, v) for v in (expected_shifted, -np.abs(rows))]
        got = fn(rows)
    for g, w in zip(got[:2], want):
        np.testing.assert_array_equal(g, w)
    assert_close_to_host(fn, nbyoc.function([x], outs), [rows])
    square = nbyoc.var("in0", (40, 40))  # a maximum without keepdims lines up wrongly
    for other in (x - nbyoc.max(x + 1.0, axis=1, keepdims=True), square - nbyoc.max(square, 1)):
        f = nbyoc.function([other.args[0]], nbyoc.exp(other))
        assert "exp_nonpositive_f32(" not in nbyoc.compile(f).get_source()


def test_kernels_call_the_vectorisable_functions_and_their_loops_vectorise():
    """The point of nbyoc.runtime.llvm.vecmath: a loop of them runs on vector registers. The
    assembly of a kernel computing all of them in one loop has packed single-precision
    instructions (``ps`` forms; the scalar ``ss`` ones are the loop's remainder) for
    each function; before they were forced inline, this loop kept its calls and ran a
    scalar at a time (no packed instruction at all)."""
    x = nbyoc.var("in0", (4096,))
    outs = [nbyoc.call_op(op, x) for op in sorted(VECTORISED_OPS)]
    module = LLVMModule(external([x], outs, "llvm_0", "llvm"), parallel_threshold=1 << 30)
    assert all(f"{op}_f32" in module.get_source() for op in VECTORISED_OPS)
    assembly = "\n".join(
        function.inspect_asm(signature)
        for function in _stage_functions(module)
        for signature in function.signatures
    )
    packed = re.findall(r"\b(v?(?:mul|add|fmadd\w*|max|min)ps)\b", assembly)
    assert len(packed) >= 10 * len(VECTORISED_OPS), assembly[:2000]


def test_loops_vectorise_as_wide_as_the_machine_s_vectors():
    """On AVX-512, where LLVM would pick 256-bit vectors, every function and parallel
    loop body of a kernel asks for 512-bit ones (``nbyoc.runtime.llvm.vector_width``) and its
    packed instructions use the zmm registers; on narrower machines nothing is said."""
    bits = target.vector_bits()
    x = nbyoc.var("in0", (64, 64))
    source_of = {
        t: LLVMModule(external([x], [nbyoc.tanh(x) * x], "llvm_0", "llvm"), parallel_threshold=t)
        for t in (16, 1 << 30)
    }
    for module in source_of.values():
        source = module.get_source()
        if bits <= 256:
            assert "vector_width" not in source
            continue
        starts = source.count("\n    vector_width(512)") + source.count("\n        vector_width(")
        assert starts == source.count("def ") + source.count("prange(") > 0, source
    if bits > 256:
        serial = source_of[1 << 30]
        assembly = "\n".join(
            f.inspect_asm(s) for f in _stage_functions(serial) for s in f.signatures
        )
        assert re.search(r"\bv\w*ps\s[^\n]*%zmm", assembly), assembly[:2000]


def _stage_functions(module):
    """The Numba dispatchers of a compiled llvm module's kernel and of the stage functions
    it calls (a program's: ``nbyoc.codegen.llvm.program``), each module loaded once."""
    from nbyoc.runtime.llvm.kernels import load_kernel_module

    lowered = module.lowered
    sources = [a.module for a in lowered.addressed if a.module]
    if lowered.program is None:
        sources.append(lowered.source)
    found = []
    for source in dict.fromkeys(sources):
        loaded = load_kernel_module(source)  # (from memory: the module's compile loaded it)
        found += [f for f in vars(loaded).values() if hasattr(f, "inspect_asm")]
    return found


def test_an_identity_transpose_is_the_array_itself():
    # Numba's transpose of a 1-d array has layout "A", which the flat loop cannot reshape.
    x = nbyoc.var("in0", (5,))
    f = external([x], [nbyoc.transpose(x) * x], "llvm_0", "llvm")
    check_against_numpy(f, [values((5,), "float32")])


def test_a_0d_parameter_is_read_once_outside_a_parallel_loop():
    x, s = nbyoc.var("in0", (64, 64)), nbyoc.var("in1", ())
    f = external([x, s], [x * s + s], "llvm_0", "llvm")
    source = LLVMModule(f, parallel_threshold=16).get_source()
    assert "in1_scalar = in1[()]" in source and "prange" in source
    check_against_numpy(
        f, [values((64, 64), "float32"), values((), "float32")], parallel_threshold=16
    )


# -- fusion and scheduling -------------------------------------------------------


def diamond(shape=(256, 256)):
    a, b, c, d = (nbyoc.var(f"in{k}", shape) for k in range(4))
    t = a * b
    return external([a, b, c, d], [(t + c) * (t - d)], "llvm_0", "llvm")


def test_a_fusable_region_is_one_loop_reading_each_input_once():
    # Serial, so the few ops' loop stays in the kernel (a parallel one is a stage
    # function run by a driver: test_llvm_groups).
    serial = {"parallel_threshold": 1 << 30}
    source = LLVMModule(diamond(), **serial).get_source()
    assert source.count("for ") == 1 and source.count("v0 = ") == 1  # t is computed once
    for k in range(4):
        assert source.count(f"in{k}_flat[i0]") == 1
    assert "np.empty" not in source
    unfused = LLVMModule(diamond(), fuse=False, **serial).get_source()
    assert unfused.count("for ") == 4


def test_siblings_reading_the_same_inputs_share_one_loop_writing_both_outputs():
    """``[a + b, a - b]``: no path between the two, one loop (multi-output fusion)."""
    a, b = nbyoc.var("in0", (64, 64)), nbyoc.var("in1", (64, 64))
    f = external([a, b], [a + b, a - b, nbyoc.tanh(a) * b], "llvm_0", "llvm")
    source = LLVMModule(f).get_source()
    assert source.count("for ") == 1 and "# stage 0: add, subtract, tanh, multiply" in source
    assert all(source.count(f"out{k}_flat[i0] = ") == 1 for k in range(3))
    check_against_numpy(f, [values((64, 64), "float32"), values((64, 64), "float32")])


@pytest.mark.parametrize("fuse", [True, False])
def test_the_diamond_matches_numpy(fuse):
    f = diamond((33, 17))
    check_against_numpy(
        f, [values((33, 17), "float32", -3, 3, seed=k) for k in range(4)], fuse=fuse
    )


def peak_bytes_of_first_call(module, args) -> int:
    run = module.allocating_function("llvm_0")
    scratch.release()  # (so that the call allocates its scratch, if it needs any)
    tracemalloc.start()
    try:
        run(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_fusion_allocates_nothing_but_the_output():
    args = [values((256, 256), "float32", seed=k) for k in range(4)]
    out_bytes = 256 * 256 * 4
    fused = peak_bytes_of_first_call(reloaded(diamond()), args)
    unfused = peak_bytes_of_first_call(reloaded(diamond(), fuse=False), args)
    assert out_bytes <= fused < out_bytes * 1.1
    assert unfused >= out_bytes * 3  # the output, and scratch for the intermediates


def test_a_chain_reuses_two_scratch_buffers():
    x = nbyoc.var("in0", (1000,))
    y = x
    for op in ["exp", "negative", "tanh", "abs", "sqrt", "sigmoid"]:
        y = nbyoc.call_op(op, y)
    f = external([x], [y], "llvm_0", "llvm")
    module = LLVMModule(f, fuse=False)
    plan = module.lowered.schedule.plan
    assert [b.elements for b in plan.buffers] == [1000, 1000]
    assert module.lowered.scratch == [("float32", 1008 + 1000)]  # one arena, aligned
    check_against_numpy(f, [values((1000,), "float32")], fuse=False)


# -- through nbyoc.compile ---------------------------------------------------------


def test_reference_graph_through_compile():
    from nbyoc.demo import numpy_reference, reference_graph

    fn = reload(nbyoc.compile(reference_graph((10, 10)), backend="llvm"))
    args = random_inputs(reference_graph((10, 10)))
    np.testing.assert_array_equal(fn(*args), numpy_reference(*args))
    assert "@njit" in fn.get_source("llvm_0")


def test_llvm_is_the_default_backend():
    a = nbyoc.var("a", (3,))
    assert nbyoc.compile(nbyoc.function([a], a * 2.0)).backend == "llvm"


def _partitioned_ops(f) -> list[str]:
    mod = nbyoc.partition(f, "llvm")
    return [
        n.op.name
        for n in nbyoc.ir.post_order([mod["main"].body])
        if isinstance(n, nbyoc.ir.Call) and isinstance(n.op, nbyoc.ir.Op)
    ]


def test_large_float_matmuls_run_in_kernels_and_large_int_ones_on_numpy():
    a, b = nbyoc.var("a", (128, 128)), nbyoc.var("b", (128, 128))
    assert _partitioned_ops(nbyoc.function([a, b], nbyoc.relu(a @ b))) == []
    i, j = nbyoc.var("i", (128, 128), "int32"), nbyoc.var("j", (128, 128), "int32")
    # Integer products have no tiles: past gemm.LOOP_MAX_WORK they stay on NumPy.
    assert _partitioned_ops(nbyoc.function([i, j], nbyoc.relu(i @ j))) == ["matmul"]


# -- checking arguments ------------------------------------------------------------


@pytest.fixture(scope="module")
def reference_fn():
    from nbyoc.demo import reference_graph

    return reload(nbyoc.compile(reference_graph((10, 10)), backend="llvm"))


def good():
    return [values((10, 10), "float32", seed=k) for k in range(4)]


@pytest.mark.parametrize(
    "mutate,error,needle",
    [
        (lambda a: a[:3], ArgumentError, "main takes 4 argument(s)"),
        (lambda a: [a[0].astype(np.float64), *a[1:]], DTypeMismatchError, "argument 0 (a)"),
        (lambda a: [a[0][:, :5], *a[1:]], ShapeMismatchError, "got shape (10, 5)"),
        (lambda a: [a[0].tolist(), *a[1:]], ArgumentError, "should be a numpy.ndarray"),
    ],
)
def test_bad_arguments_get_clear_errors(reference_fn, mutate, error, needle):
    with pytest.raises(error) as info:
        reference_fn(*mutate(good()))
    assert needle in str(info.value)


def test_strided_read_only_and_scalar_inputs_work(reference_fn):
    args = good()
    expected = ((args[0] + args[1]) - args[2]) * args[3]
    args[0] = np.asfortranarray(args[0])
    args[1] = args[1].copy()
    args[1].flags.writeable = False
    np.testing.assert_array_equal(reference_fn(*args), expected)
    s = nbyoc.var("s", (), "float64")
    fn = nbyoc.compile(nbyoc.function([s], s * 2.0 + 1.0), backend="llvm")
    assert fn(np.float64(3.0)) == 7.0


def test_destination_passing_refuses_overlapping_outputs():
    x = nbyoc.var("in0", (4,))
    run = reloaded(external([x], [x * 2.0], "llvm_0", "llvm")).get_function("llvm_0")
    a = np.ones(4, np.float32)
    with pytest.raises(ArgumentError, match="overlaps"):
        run(a, a)
    with pytest.raises(ArgumentError, match="C-contiguous and writeable"):
        run(a, np.empty(8, np.float32)[::2])


def test_a_kernel_checks_every_shape_with_one_raise_and_the_error_names_the_argument():
    # Numba releases every live array at each raise: a raise per argument made a kernel
    # with N inputs grow as N squared (100 inputs took 57 s to compile).
    def kernel_source(n):
        xs = [nbyoc.var(f"x{k}", (1, 3)) for k in range(n)]
        f = external(xs, [nbyoc.concatenate(xs, axis=0)], "llvm_0", "llvm")
        return f, reloaded(f).get_source()

    raises = [kernel_source(n)[1].count("raise ValueError") for n in (10, 40)]
    assert raises[0] == raises[1]
    f, _ = kernel_source(4)
    run = reloaded(f).get_function("llvm_0")
    args = [np.full((1, 3), k, np.float32) for k in range(4)]
    out = np.empty((4, 3), np.float32)
    run(*args, out)
    np.testing.assert_array_equal(out, np.repeat(np.arange(4, dtype=np.float32), 3).reshape(4, 3))
    with pytest.raises(ShapeMismatchError, match="x2"):
        run(*args[:2], np.zeros((2, 3), np.float32), args[3], out)


def test_a_column_reduction_beside_a_constant_compiles_and_matches_the_host():
    # A column-blocked reduction bound a local c0, the name of the kernel's first constant
    # (a YOLO-style detector: Softmax over axis 1, then Sub from an initializer).
    w = np.random.default_rng(0).standard_normal((1, 16, 300)).astype(np.float32)
    x = nbyoc.var("x", (1, 16, 300))
    f = nbyoc.function([x], nbyoc.softmax(x, axis=1) - nbyoc.const(w))
    data = np.random.default_rng(1).standard_normal((1, 16, 300)).astype(np.float32)
    assert_close_to_host(nbyoc.compile(f, backend="llvm"), f, [data])


def test_negative_integer_power_raises_like_numpy():
    x, y = nbyoc.var("in0", (2,), "int64"), nbyoc.var("in1", (2,), "int64")
    fn = nbyoc.compile(nbyoc.function([x, y], x**y), backend="llvm")
    with pytest.raises(ExecutionError, match="Integers to negative integer powers are not allowed"):
        fn(np.array([2, 3]), np.array([1, -1]))


def test_zero_size_arrays():
    check_against_numpy(*conformance.zero_size("llvm", extra=lambda x: [nbyoc.sum(x, axis=0)]))


# -- caching ---------------------------------------------------------------------


def test_an_identical_compile_reuses_the_kernel_without_numba(monkeypatch):
    from nbyoc.codegen.llvm import lower as llvm_lower
    from nbyoc.runtime.llvm import kernels

    x = nbyoc.var("x", (5,))
    f = nbyoc.function([x], nbyoc.exp(x) * 3.0 - x)
    first = nbyoc.compile(f, backend="llvm")

    def refuse(*args, **kwargs):
        raise AssertionError("the second compile should not lower or load a kernel")

    monkeypatch.setattr(llvm_lower, "lower", refuse)
    monkeypatch.setattr(kernels, "load_kernel", refuse)
    second = nbyoc.compile(nbyoc.function([x], nbyoc.exp(x) * 3.0 - x), backend="llvm")
    assert second.runtime_modules["llvm_0"].kernel is first.runtime_modules["llvm_0"].kernel


def test_a_fresh_process_loads_kernels_from_the_disk_cache():
    code = (
        "import numpy as np, nbyoc\n"
        "from nbyoc.demo import reference_graph\n"
        "fn = nbyoc.compile(reference_graph((7, 7)), backend='llvm')\n"
        "fn(*[np.ones((7, 7), np.float32)] * 4)\n"
        "stats = fn.runtime_modules['llvm_0'].kernel.stats\n"
        "print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))\n"
    )
    env = dict(os.environ)
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert second.stdout.split() == ["1", "0"], "the second process should hit Numba's disk cache"


def test_a_changed_runtime_helper_changes_the_cache_key(tmp_path, monkeypatch):
    """Numba's disk cache checks only the kernel file's time stamp: a kernel inlining an
    old ``vecmath.exp_f32`` must not be found once vecmath (or its constants) changed."""
    from nbyoc.runtime.llvm import kernels

    source = "from nbyoc.runtime.llvm.vecmath import exp_f32\nfrom nbyoc.runtime.llvm.opaque import opaque\n"
    plain = "import numpy as np\n"
    before, before_plain = kernels.source_key(source), kernels.source_key(plain)
    # A copy of the package whose vecmath_constants differ by one byte.
    root = pathlib.Path(kernels.__file__).parent.parent.parent
    copy = tmp_path / "nbyoc"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    constants = copy / "runtime" / "vecmath_constants.py"
    constants.write_text(constants.read_text() + "\n# changed\n")
    monkeypatch.setattr(kernels, "__file__", str(copy / "runtime" / "llvm" / "kernels.py"))
    kernels._module_digest.cache_clear()
    try:
        assert kernels.source_key(source) != before
        assert kernels.source_key(plain) == before_plain  # imports nothing of ours
    finally:
        kernels._module_digest.cache_clear()


def test_a_tampered_cache_file_is_rewritten_not_imported(tmp_path, monkeypatch):
    from nbyoc.runtime.llvm import kernels

    monkeypatch.setenv("NBYOC_CACHE_DIR", str(tmp_path))
    x = nbyoc.var("in0", (3,))
    f = external([x], [x + 7.0], "llvm_tamper", "llvm")
    lowered = nbyoc.codegen.llvm.lower.lower(f)
    path = tmp_path / "kernels" / f"k{kernels.source_key(lowered.source)}.py"
    path.parent.mkdir(parents=True)
    path.write_text("raise SystemExit('tampered cache code ran')\n")
    module = LLVMModule(f)
    assert path.read_text() == lowered.source
    out = np.empty(3, np.float32)
    module.get_function("llvm_tamper")(np.zeros(3, np.float32), out)
    np.testing.assert_array_equal(out, [7, 7, 7])


@pytest.mark.parametrize("data,needle", conformance.malformed_saved_modules("llvm"))
def test_loading_malformed_bytes_raises_load_error(data, needle):
    with pytest.raises(LoadError, match=needle):
        LLVMModule.load_from_bytes(data)


@pytest.mark.parametrize(
    "old,new,needle",
    [
        (b'"fuse": true', b'"fuse": 1', "option 'fuse' must be"),
        (b'"parallel_threshold": 32768', b'"parallel_threshold": 0', "positive integer"),
    ],
)
def test_loading_bad_options_raises_load_error(old, new, needle):
    x = nbyoc.var("in0", (2,))
    saved = LLVMModule(external([x], [x + 1.0], "llvm_opt", "llvm")).save_to_bytes()
    assert old in saved
    with pytest.raises(LoadError, match=needle):
        LLVMModule.load_from_bytes(saved.replace(old, new))


def test_a_view_of_a_view_keeps_its_buffer_alive():
    """Attention's value heads are a transpose of a reshape of a matmul's buffer, read
    by the last matmul only: the buffer must not be reused by the softmax stages in
    between (found by the transformer model of the ONNX tests)."""
    x = nbyoc.var("x", (2, 8, 16))
    w = [nbyoc.const(np.random.default_rng(k).standard_normal((16, 16)).astype(np.float32))
         for k in range(3)]  # fmt: skip

    def heads(m):
        return nbyoc.transpose(nbyoc.reshape(x @ m, (2, 8, 2, 8)), (0, 2, 1, 3))

    q, k, v = (heads(m) for m in w)
    probs = nbyoc.softmax(q @ nbyoc.transpose(k, (0, 1, 3, 2)), axis=-1)
    f = nbyoc.function([x], probs @ v)
    data = np.random.default_rng(9).standard_normal((2, 8, 16)).astype(np.float32)
    got = reload(nbyoc.compile(f, backend="llvm"))(data)
    np.testing.assert_allclose(got, nbyoc.compile(f, backend="host")(data), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("side,releases", [(10, False), (256, True)])
def test_only_kernels_with_work_enough_release_the_gil(side, releases):
    """Releasing the GIL costs more than a tiny kernel's work (assemble.NOGIL_MIN_ELEMENTS)."""
    from nbyoc.demo import reference_graph

    fn = nbyoc.compile(reference_graph((side, side)), backend="llvm")
    (module,) = fn.runtime_modules.values()
    assert f"nogil={releases}" in module.lowered.source


@pytest.mark.parametrize("shape", [(3, 4, 5), (8, 256, 256)])  # (the second in a prange)
def test_a_gather_by_a_0d_constant_index_reads_it_once(shape):
    # A scalar constant is a literal in loops; a gather reads it as an array, which
    # the kernel views at its address (0-d: one element, reshaped) and reads before
    # its loops (a prange cannot index a 0-d array).
    x = nbyoc.var("x", shape)
    index = nbyoc.const(np.array(-2, np.int64))
    y = nbyoc.exp(nbyoc.call_op("gather", x, index, axis=0)) * 2.0 + nbyoc.const(np.float32(1.5))
    f = external([x], [y], "llvm_0", "llvm")
    check_against_numpy(f, [values(shape, "float32", seed=3)])
