"""Depthwise convs in llvm kernels (``codegen/llvm/depthwise.py``) and the vector code
they run on (``runtime/llvm/window_rows.py``), against the host executor and NumPy.

Tolerances: the forward error bound of each computation (``assert_close_to_host``
with no fixed tolerance of its own), a sum of ``k0 * k1`` products per output in
the conv's dtype."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.llvm import conv as llvm_conv
from nbyoc.codegen.llvm import depthwise
from nbyoc.runtime.llvm import window_rows
from nbyoc.runtime.llvm.target import deal_row_name, vector_lanes, window_rows_name

from ..helpers import FLOAT_DTYPES, assert_close_to_host, examples


def normal(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def out_extent(n, k, s, d, begin, end) -> int:
    return (n + begin + end - (k - 1) * d - 1) // s + 1


#: The epilogues a conv may carry: none, a per-channel shift and relu, a residual and
#: tanh, a scale per column (not constant over a plane: its epilogue walks positions
#: as indices, not flat) (each ``(y, extra, shift) -> result``, ``extra`` of the
#: conv's shape where used).
EPILOGUES = {
    "none": lambda y, extra, shift: y,
    "shift+relu": lambda y, extra, shift: nbyoc.relu(y + shift),
    "residual+tanh": lambda y, extra, shift: nbyoc.tanh(y) + extra,
    "column scale": lambda y, extra, shift: (
        y * nbyoc.const(normal((1, 1, 1, y.type.shape[3]), y.type.dtype, seed=5))
    ),
}


def depthwise_function(x_shape, multiplier, kernel, strides, dilations, pads, dtype, bias,
                       epilogue):  # fmt: skip
    """A depthwise conv (``group`` = channels, ``multiplier`` outputs each) with weights
    as constants, and its epilogue; the function and its arguments."""
    channels = x_shape[1]
    x = nbyoc.var("x", x_shape, dtype)
    w = nbyoc.const(normal((channels * multiplier, 1, *kernel), dtype, seed=1))
    b = nbyoc.const(normal(channels * multiplier, dtype, seed=2)) if bias else None
    y = nbyoc.conv(x, w, b, strides=strides, dilations=dilations, pads=pads, group=channels)
    assert depthwise.runs_depthwise(y) and not llvm_conv.uses_tiles(y)
    extra = nbyoc.var("r", y.type.shape, dtype)
    shift = nbyoc.const(normal((1, y.type.shape[1], 1, 1), dtype, seed=3))
    out = EPILOGUES[epilogue](y, extra, shift)
    params = [x, extra] if epilogue == "residual+tanh" else [x]
    args = [normal(p.type.shape, dtype, seed=4 + k) for k, p in enumerate(params)]
    return nbyoc.function(params, out), args


def compiled(func):
    fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
    assert "window_rows_" in fn.get_source()  # (the depthwise kernel, not the direct conv)
    return fn


@settings(max_examples=examples(30, 12), deadline=None)
@given(
    images=st.integers(1, 2),
    channels=st.integers(1, 5),
    multiplier=st.integers(1, 3),
    height=st.integers(1, 12),
    width=st.integers(1, 41),
    kernel=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    dilations=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    pads=st.tuples(*[st.integers(0, 3)] * 4),
    dtype=st.sampled_from(["float32", "float64"]),
    bias=st.booleans(),
    epilogue=st.sampled_from(sorted(EPILOGUES)),
)
def test_depthwise_convs_of_any_geometry_match_the_host(
    images, channels, multiplier, height, width, kernel, strides, dilations, pads, dtype, bias,
    epilogue,
):  # fmt: skip
    """Strides 1 to 3 (3: the phases dealt by a loop), dilations, asymmetric pads (wider
    than the window too), channel multipliers, odd widths, both row forms (flat below a
    vector's lanes, row by row above), both dtypes, with and without their epilogue."""
    extents = [out_extent(n, k, s, d, pads[i], pads[i + 2])
               for i, (n, k, s, d) in enumerate(zip((height, width), kernel, strides, dilations))]  # fmt: skip
    assume(min(extents) >= 1)
    func, args = depthwise_function(
        (images, channels, height, width), multiplier, kernel, strides, dilations, pads, dtype,
        bias, epilogue,
    )  # fmt: skip
    assert_close_to_host(compiled(func), func, args, rtol=0, atol=0)


@pytest.mark.parametrize(
    "x_shape,kernel,strides,pads,flat",
    [  # (flat: whether float32's and float64's rows are computed flat)
        ((1, 3, 9, 7), (3, 3), (1, 1), (1, 1, 1, 1), (True, False)),  # 7 of 16 or of 8 lanes
        ((1, 3, 9, 10), (3, 3), (1, 1), (1, 1, 1, 1), (True, True)),
        ((2, 2, 6, 32), (3, 3), (1, 1), (1, 1, 1, 1), (False, False)),
        ((1, 4, 20, 64), (3, 3), (2, 2), (1, 1, 1, 1), (False, False)),
        ((1, 2, 11, 13), (5, 5), (1, 2), (2, 2, 2, 2), (True, False)),
    ],
    ids=["7 wide", "10 wide", "32 wide", "stride 2", "5x5 stride 2"],
)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_convs_in_the_smallest_chunks_and_most_tasks_match_the_host(
    monkeypatch, x_shape, kernel, strides, pads, flat, dtype
):
    """A buffer budget of one byte (chunks of ``depthwise.ROWS`` rows, each copying
    its rows and their neighbours') and many tasks (blocks of one channel and few
    rows), called twice (the second call reuses nothing of the first's buffers); the
    form (flat or row by row) as ``flat_rows`` chooses it."""
    monkeypatch.setattr(depthwise, "BUFFER_BYTES", 1)
    monkeypatch.setattr(depthwise, "TASKS", 64)
    func, args = depthwise_function(
        x_shape, 2, kernel, strides, (1, 1), pads, dtype, True, "shift+relu"
    )
    out = [out_extent(n, k, s, 1, b, e) for n, k, s, b, e in
           zip(x_shape[2:], kernel, strides, pads[:2], pads[2:])]  # fmt: skip
    reach = -(-(kernel[1] - 1) // strides[1])
    assert depthwise.flat_rows(out[1], out[1] + reach, dtype) == flat[dtype == "float64"]
    fn = compiled(func)
    for seed in range(2):
        args = [normal(a.shape, dtype, seed=10 + seed) for a in args]
        assert_close_to_host(fn, func, args, rtol=0, atol=0)


def test_depthwise_convs_of_one_structure_share_their_stage_function():
    """Sizes are read at run time: two depthwise convs differing in images, channels,
    multiplier and extents are one stage function (of one form: both rows of whole
    vectors, see ``flat_rows``)."""
    from .test_llvm_structure import stage_modules

    fns = []
    for x_shape, multiplier in (((1, 4, 14, 30), 1), ((2, 6, 9, 64), 2)):
        func, args = depthwise_function(
            x_shape, multiplier, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "float32", True, "none"
        )
        fn = compiled(func)
        assert_close_to_host(fn, func, args, rtol=0, atol=0)
        fns.append(fn)
    assert stage_modules(fns[0]) and stage_modules(fns[0]) == stage_modules(fns[1])


def test_only_2d_convs_of_one_input_channel_per_output_run_depthwise():
    x = nbyoc.var("x", (1, 6, 10, 10))
    grouped = nbyoc.conv(x, nbyoc.var("w", (6, 2, 3, 3)), group=3)
    one_channel = nbyoc.conv(nbyoc.var("x1", (1, 1, 10, 10)), nbyoc.var("w1", (4, 1, 3, 3)))
    one_d = nbyoc.conv(nbyoc.var("x2", (1, 6, 10)), nbyoc.var("w2", (6, 1, 3)), group=6)
    assert not depthwise.runs_depthwise(grouped)
    assert depthwise.runs_depthwise(one_channel)  # (each output reads the one input channel)
    assert not depthwise.runs_depthwise(one_d)


# -- the vector code ----------------------------------------------------------------


def reference_rows(x, w, start, kernel, strides, dilations, rows, n, x_pitch, x_phase):
    """``window_rows``' definition (its module docstring), in NumPy, from offset 0."""
    (k0, k1), (s0, s1), (d0, d1) = kernel, strides, dilations
    y = np.zeros((rows, n))
    for j in range(rows):
        for q0 in range(k0):
            for q1 in range(k1):
                phase = (q0 * d0) % s0 * s1 + (q1 * d1) % s1
                at = phase * x_phase + (j + q0 * d0 // s0) * x_pitch + q1 * d1 // s1
                y[j] += w[q0 * k1 + q1] * x[at : at + n].astype(np.float64)
    return y + start


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "kernel,strides,dilations,rows",
    [((3, 3), (1, 1), (1, 1), 4), ((3, 3), (2, 2), (1, 1), 1), ((5, 2), (1, 3), (2, 1), 3),
     ((1, 1), (1, 1), (1, 1), 2), ((2, 7), (2, 1), (1, 2), 4)],
)  # fmt: skip
def test_window_rows_match_their_definition_at_every_length(kernel, strides, dilations, rows,
                                                             dtype):  # fmt: skip
    """Lengths from 0 to past a block of vectors (whole blocks, single vectors, a
    masked tail of each size), rows ``y_pitch`` apart, inputs at an offset; nothing
    past the rows is written."""
    from numba import njit

    lanes = vector_lanes(dtype)
    name = window_rows_name(dtype, kernel, strides, dilations, rows)
    intrinsic = getattr(window_rows, name)

    @njit
    def run(y, y_at, y_pitch, x, x_at, x_pitch, x_phase, w, start, n):
        intrinsic(y, y_at, y_pitch, x, x_at, x_pitch, x_phase, w, 1, start, n)

    (k0, k1), (s0, s1), (d0, d1) = kernel, strides, dilations
    w = normal(k0 * k1 + 1, dtype, seed=1)
    longest = window_rows.ACCUMULATORS * lanes + 2 * lanes + 3
    for n in [*range(0, 2 * lanes + 2), longest]:
        x_pitch = n + (k1 - 1) * d1 // s1 + 2
        x_phase = (rows + (k0 - 1) * d0 // s0 + 1) * x_pitch
        x = normal(3 + s0 * s1 * x_phase, dtype, seed=n)
        y = np.full(5 + rows * (n + 4), -9.0, dtype)
        start = 0.5 if dtype == "float32" else 0.25
        run(y, 5, n + 4, x, 3, x_pitch, x_phase, w, start, n)
        want = reference_rows(x[3:], w[1:], start, kernel, strides, dilations, rows, n, x_pitch,
                              x_phase)  # fmt: skip
        got = y[5:].reshape(rows, n + 4)
        eps = np.finfo(dtype).eps
        # (a sum of k0 * k1 products and the start, each rounding once at most)
        bound = (k0 * k1 + 1) * eps * (np.abs(w[1:]).sum() * np.abs(x).max() + 1)
        np.testing.assert_allclose(got[:, :n], want, rtol=0, atol=bound)
        assert (got[:, n:] == -9).all() and (y[:5] == -9).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("stride", window_rows.DEAL_STRIDES)
def test_deal_row_sends_each_element_to_its_phase(stride, dtype):
    from numba import njit

    lanes = vector_lanes(dtype)
    deal = getattr(window_rows, deal_row_name(dtype, stride))
    if stride == 1:

        @njit
        def run(dst, ats, src, src_at, count):
            deal(dst, ats[0], src, src_at, count)
    else:

        @njit
        def run(dst, ats, src, src_at, count):
            deal(dst, ats[0], ats[1], src, src_at, count)

    for count in range(0, 3 * stride * lanes + 2):
        src = normal(count + 7, dtype, seed=count)
        dst = np.full(2 + stride * (count + 9), -9.0, dtype)
        ats = np.array([2 + a * (count + 9) + a for a in range(stride)])  # (phases unaligned)
        run(dst, ats, src, 7, count)
        want = np.full_like(dst, -9.0)
        for k in range(count):
            want[ats[k % stride] + k // stride] = src[7 + k]
        np.testing.assert_array_equal(dst, want)
