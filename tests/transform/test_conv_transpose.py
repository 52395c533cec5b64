"""``legalize_conv_transpose``: transposed convolutions as phase convs, checked against
the host's direct ``conv_transpose`` (the op's NumPy reference, an independent sum over
taps) for random parameters: ranks 1 to 3, strides 1 to 3, kernels 1 to 5, dilations,
pads, output padding, groups (depthwise among them), bias, float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import NbyocTypeError
from nbyoc.ir.specialize import specialize
from nbyoc.transform.conv_phases import plan_axis, plan_phases
from nbyoc.transform.conv_transpose import (
    MAX_PHASES,
    legalize_conv_transpose,
    phase_convs,
)
from nbyoc.transform.regions import is_op_call

from ..helpers import assert_close_to_host, examples, reload


def ops_of(func) -> list[str]:
    return [n.op.name for n in nbyoc.ir.post_order([func.body]) if is_op_call(n)]


@st.composite
def transposed_convs(draw, dtypes=("float32", "float64"), constants_only=False):
    """(function, arguments) of one random ``conv_transpose``: x a parameter, the weight
    a constant or a parameter, a bias or none (``constants_only``: weight and bias
    constants, as a batch norm folds into)."""
    k = draw(st.integers(1, 3))
    group = draw(st.sampled_from([1, 1, 2, 3]))
    per_in, per_out = draw(st.integers(1, 2)), draw(st.integers(1, 2))  # (1, 1): depthwise
    sizes = draw(st.lists(st.integers(1, 6 - k), min_size=k, max_size=k))
    kernel = draw(st.lists(st.integers(1, 5), min_size=k, max_size=k))
    strides = draw(st.lists(st.integers(1, 3), min_size=k, max_size=k))
    dilations = draw(st.lists(st.integers(1, 2), min_size=k, max_size=k))
    extra = [draw(st.integers(0, max(s, d) - 1)) for s, d in zip(strides, dilations)]
    pads = draw(st.lists(st.integers(0, 3), min_size=2 * k, max_size=2 * k))
    dtype = draw(st.sampled_from(dtypes))
    bias, constant = draw(st.booleans()), constants_only or draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x_shape = (draw(st.integers(1, 2)), per_in * group, *sizes)
    w_shape = (per_in * group, per_out, *kernel)
    x = nbyoc.var("x", x_shape, dtype)
    weights = rng.standard_normal(w_shape).astype(dtype)
    w = nbyoc.const(weights) if constant else nbyoc.var("w", w_shape, dtype)
    b = nbyoc.var("b", (per_out * group,), dtype) if bias else None
    if bias and constants_only:
        b = nbyoc.const(rng.standard_normal(per_out * group).astype(dtype))
    try:
        y = nbyoc.conv_transpose(x, w, b, strides=strides, pads=pads, dilations=dilations,
                                 group=group, output_padding=extra)  # fmt: skip
    except NbyocTypeError:  # (pads that leave no output)
        assume(False)
    params = [x] + ([] if constant else [w]) + ([b] if bias and not constants_only else [])
    args = [rng.standard_normal(p.type.shape).astype(dtype) for p in params]
    if not constant:
        args[1] = weights
    return nbyoc.function(params, y), args


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=transposed_convs(dtypes=("float64",)))
def test_the_phase_convs_are_the_transposed_conv(case):
    """The rewritten graph, run on the host (its convs by conv's own reference), equals
    the direct conv_transpose up to the rounding of float64 sums."""
    f, args = case
    phased = phase_convs(f.body)
    if isinstance(phased, str):  # (left whole: only when no tap lands on the output)
        assert phased.startswith("no weight tap lands")
        return
    assert "conv_transpose" not in ops_of(nbyoc.function(f.params, phased.value))
    rewritten = nbyoc.function(f.params, phased.value)
    assert_close_to_host(nbyoc.compile(rewritten, backend="host"), f, args, rtol=1e-12,
                         atol=1e-12)  # fmt: skip


@settings(max_examples=examples(16, 6), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(case=transposed_convs())
def test_llvm_runs_conv_transpose_as_phase_convs(case):
    f, args = case
    fn = reload(nbyoc.compile(f, backend="llvm"))
    if not isinstance(phase_convs(f.body), str):
        assert "conv_transpose" not in ops_of(fn.module["main"])
    assert_close_to_host(fn, f, args, rtol=0, atol=0)  # (the bound of the computation)


@settings(max_examples=examples(8, 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(case=transposed_convs())
def test_csource_leaves_conv_transpose_to_the_host_it_lowers_no_conv(case):
    f, args = case
    fn = reload(nbyoc.compile(f, backend="csource"))
    assert ops_of(fn.module["main"]).count("conv_transpose") == 1
    (row,) = [r for r in nbyoc.explain(f, backend="csource").ops if r.op == "conv_transpose"]
    (reason,) = [why for _, why in row.asked]
    assert reason.startswith("no rule for op conv_transpose, and ")
    assert_close_to_host(fn, f, args, rtol=0, atol=0)


def test_the_db_head_is_one_pointwise_conv_and_a_depth_to_space():
    """PP-OCR's 2x2, stride-2 upsampling: four 1x1 phases, one conv of four times the
    channels, its weight computed at compile time (a constant in the kernel)."""
    x = nbyoc.var("x", (1, 24, 20, 20))
    rng = np.random.default_rng(0)
    w = nbyoc.const(rng.standard_normal((24, 6, 2, 2)).astype(np.float32))
    b = nbyoc.const(rng.standard_normal(6).astype(np.float32))
    f = nbyoc.function([x], nbyoc.relu(nbyoc.conv_transpose(x, w, b, strides=(2, 2))))
    fn = nbyoc.compile(f, backend="llvm")
    assert list(fn.runtime_modules) == ["llvm_0"]
    region = fn.module["llvm_0"]
    (conv,) = [n for n in nbyoc.ir.post_order([region.body])
               if isinstance(n, nbyoc.ir.Call) and n.op.name == "conv"]  # fmt: skip
    assert conv.args[1].type.shape == (24, 24, 1, 1)
    assert all(isinstance(a, nbyoc.ir.Constant) for a in conv.args[1:])  # folded
    assert sorted(ops_of(region)) == ["conv", "relu", "reshape", "reshape", "reshape",
                                      "transpose"]  # fmt: skip
    assert_close_to_host(fn, f, [rng.standard_normal((1, 24, 20, 20)).astype(np.float32)],
                         rtol=0, atol=0)  # fmt: skip


def test_a_computed_weight_is_laid_out_by_graph_ops():
    x, w = nbyoc.var("x", (1, 4, 5, 5)), nbyoc.var("w", (4, 2, 3, 3))
    f = nbyoc.function([x, w], nbyoc.conv_transpose(x, w * 2.0, strides=(2, 2), pads=(1,) * 4))
    out = legalize_conv_transpose(f, ["llvm"])
    assert ops_of(out).count("conv") == 4 and "slice" in ops_of(out)  # 2x2, 2x1, 1x2, 1x1
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(p.type.shape).astype(np.float32) for p in f.params]
    assert_close_to_host(nbyoc.compile(f, backend="llvm"), f, args, rtol=0, atol=0)


def test_a_symbolic_batch_is_rewritten_symbolic_spatial_sizes_are_not():
    w = nbyoc.const(np.ones((4, 2, 3, 3), np.float32))
    x = nbyoc.var("x", ("n", 4, 5, 5))
    f = nbyoc.function([x], nbyoc.conv_transpose(x, w, strides=(2, 2)))
    assert "conv_transpose" not in ops_of(legalize_conv_transpose(f, ["llvm"]))
    fn = nbyoc.compile(f, backend="llvm")
    for n in (1, 3):
        a = np.random.default_rng(n).standard_normal((n, 4, 5, 5)).astype(np.float32)
        assert_close_to_host(fn, specialize(f, {"n": n}), [a], rtol=0, atol=0)
    x = nbyoc.var("x", (1, 4, "h", "w"))
    g = nbyoc.function([x], nbyoc.conv_transpose(x, w, strides=(2, 2)))
    assert legalize_conv_transpose(g, ["llvm"]) is g
    (row,) = nbyoc.explain(g).ops
    assert row.target == "host"
    assert row.asked == (("llvm", "no rule for op conv_transpose, and the phase rewrite "
                                  "leaves it whole: its phases depend on its symbolic channel "
                                  "or spatial sizes"),)  # fmt: skip


def test_too_many_phases_stay_on_the_host_with_the_reason():
    x, w = nbyoc.var("x", (1, 1, 3)), nbyoc.var("w", (1, 1, 3))
    stride = 2**40  # (the fuzzer's: cropped back by pads to seven outputs)
    y = nbyoc.conv_transpose(x, w, strides=(stride,), pads=(1, 2 * stride - 5))
    f = nbyoc.function([x, w], y)
    assert legalize_conv_transpose(f, ["llvm"]) is f
    (row,) = nbyoc.explain(f).ops
    assert f"more than {MAX_PHASES}" in row.asked[0][1]
    got = nbyoc.compile(f, backend="llvm")(np.ones((1, 1, 3), np.float32),
                                           np.array([[[1, 2, 3]]], np.float32))  # fmt: skip
    np.testing.assert_array_equal(got, [[[2, 3, 0, 0, 0, 0, 0]]])


def test_a_backend_without_conv_keeps_the_call_whole():
    x = nbyoc.var("x", (1, 2, 4))
    f = nbyoc.function([x], nbyoc.conv_transpose(x, nbyoc.const(np.ones((2, 2, 3), np.float32))))
    assert legalize_conv_transpose(f, ["csource"]) is f
    assert legalize_conv_transpose(f, ["host"]) is f
    assert legalize_conv_transpose(f, ["csource", "llvm"]) is not f


@pytest.mark.parametrize(
    "size, kernel, stride, dilation, pad, length, want",
    [
        # 2x2 at stride 2: each phase one tap, reading input m
        (80, 2, 2, 1, 0, 160, [((0,), 0), ((1,), 0)]),
        # 3 taps at stride 2, pad 1: phase 0 is tap 1 (input m), phase 1 taps 0 and 2
        (5, 3, 2, 1, 1, 10, [((1,), 0), ((0, 2), 0)]),
        # a kernel of 1 at stride 3: phases 1 and 2 get no tap
        (4, 1, 3, 1, 0, 12, [((0,), 0), None, None]),
        # dilation 2 at stride 2: every tap lands on phase 0, one input apart
        (4, 3, 2, 2, 0, 11, [((0, 1, 2), -2), None]),
    ],
)  # fmt: skip
def test_the_phases_of_one_axis(size, kernel, stride, dilation, pad, length, want):
    axis = plan_axis(size, kernel, stride, dilation, pad, length)
    assert [None if p is None else (p.taps, p.begin) for p in axis.phases] == want
    assert axis.rows == -(-length // stride)


def test_phases_of_one_sub_kernel_shape_share_a_conv():
    # 4x4 at stride 2, pad 1 (the GAN upsampler): four 2x2 phases, shifted by one row
    plan = plan_phases((8, 8), (4, 4), (2, 2), (1, 1), (1, 1, 1, 1), (16, 16))
    (conv,) = plan.convs
    assert conv.kernel == (2, 2) and len(conv.members) == 4
    assert conv.out_rows == (9, 9) and set(conv.offsets) == {(0, 0), (0, 1), (1, 0), (1, 1)}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=transposed_convs(constants_only=True), seed=st.integers(0, 2**16))
def test_a_batch_norm_folds_into_a_constant_transposed_conv(case, seed):
    """Folded (each output channel's factor on its column of every group's rows), the
    transposed conv computes the conv then the norm, up to rounding: each weight is
    rounded once more, so the difference is within a few ulps of the sum of the
    magnitudes of the terms (the same transposed conv over |x| and |w * factor|)."""
    from nbyoc.transform import fold_batch_norm

    f, args = case
    y = f.body
    rng = np.random.default_rng(seed)
    dtype, channels = y.type.dtype, y.type.shape[1]
    scale, shift, mean = (nbyoc.const(rng.standard_normal(channels).astype(dtype))
                          for _ in range(3))  # fmt: skip
    var = nbyoc.const(rng.uniform(0.1, 2.0, channels).astype(dtype))
    normed = nbyoc.function(f.params, nbyoc.batch_norm(y, scale, shift, mean, var))
    folded = fold_batch_norm(normed)
    assert ops_of(folded) == ["conv_transpose"]
    want = nbyoc.compile(normed, backend="host")(*args)
    got = nbyoc.compile(folded, backend="host")(*args)
    weight, bias = folded.body.args[1].data, folded.body.args[2].data
    magnitudes = nbyoc.function(
        f.params,
        nbyoc.conv_transpose(
            f.params[0], nbyoc.const(np.abs(weight)), nbyoc.const(np.abs(bias)), **y.attrs
        ),
    )
    terms = nbyoc.compile(magnitudes, backend="host")(np.abs(args[0]), *args[1:])
    taps = weight.shape[0] * int(np.prod(weight.shape[2:])) + 3
    bound = 4 * taps * np.finfo(dtype).eps * (terms + np.abs(want))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)
