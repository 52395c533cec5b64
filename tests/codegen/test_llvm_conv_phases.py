"""Tiled convs over wide rows of stride phases (codegen/llvm/phase_planes.py, the wide
way of codegen/llvm/conv.py) against NumPy on the host: strides 1 to 3 (3 gathers its
columns instead), pads up to past the kernel, dilations, widths from one position,
few input channels (the stems), both float dtypes and an epilogue."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.llvm import conv as llvm_conv
from nbyoc.codegen.llvm.phase_planes import PhasePlanes

from ..helpers import assert_close_to_host, examples


def normal(shape, dtype, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def way(y) -> str:
    if not llvm_conv.uses_tiles(y):
        return "direct"
    return "wide" if llvm_conv._runs_wide(llvm_conv._Geometry(y)) else "tiles"


EPILOGUES = {
    "none": lambda y, r: y,
    "relu+residual": lambda y, r: nbyoc.relu(y) + r,
}


@st.composite
def strided_convs(draw):
    """A 2-D conv that runs tiled: (x shape, w shape, attrs)."""
    channels = draw(st.sampled_from([1, 3, 16]))
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, k + 1)) for k in kernel * 2)
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    # the padded input holds the window at least once; widths from there
    spatial = tuple(
        max(1, r - pads[a] - pads[a + 2]) + draw(st.integers(0, 12)) for a, r in enumerate(reach)
    )
    if channels * kernel[0] * kernel[1] < llvm_conv.TILE_MIN_DEPTH:
        # too shallow to tile: widen the window (a stem's few channels, a row of taps)
        kernel = (kernel[0], -(-llvm_conv.TILE_MIN_DEPTH // (channels * kernel[0])))
        reach[1] = (kernel[1] - 1) * dilations[1] + 1
        spatial = (spatial[0], max(spatial[1], reach[1] - pads[1] - pads[3]))
    out_channels = draw(st.sampled_from([16, 29]))
    images = draw(st.integers(1, 2))
    attrs = {"strides": strides, "dilations": dilations, "pads": pads}
    return (images, channels, *spatial), (out_channels, channels, *kernel), attrs


@settings(max_examples=examples(30, 8), deadline=None)
@given(
    case=strided_convs(),
    dtype=st.sampled_from(["float32", "float64"]),
    epilogue=st.sampled_from(sorted(EPILOGUES)),
    bias=st.booleans(),
)
def test_strided_tiled_convs_match_numpy(case, dtype, epilogue, bias):
    """Every output within the forward error bound of the computation (its depth, its
    dtype, the magnitudes of its products) of the host's NumPy result."""
    x_shape, w_shape, attrs = case
    x = nbyoc.var("x", x_shape, dtype)
    w = nbyoc.const(normal(w_shape, dtype, 1))
    b = nbyoc.const(normal(w_shape[:1], dtype, 2)) if bias else None
    y = nbyoc.conv(x, w, b, **attrs)
    assert way(y) in ("wide", "tiles")
    if way(y) == "tiles":  # (only strides above 2, or a strided 1x1 conv, gather)
        assert any(s > llvm_conv.WRITTEN_STEP for s in attrs["strides"]) or w_shape[2:] == (1, 1)
    r = nbyoc.var("r", y.type.shape, dtype)
    f = nbyoc.function([x, r], EPILOGUES[epilogue](y, r))
    fn = nbyoc.compile(f, backend="llvm", strict=True)
    inputs = [normal(x_shape, dtype, 3), normal(y.type.shape, dtype, 4)]
    for _ in range(2):  # (a second call reads nothing left by the first)
        assert_close_to_host(fn, f, inputs, rtol=0.0, atol=0.0)


@pytest.mark.parametrize(
    "x_shape,w_shape,strides",
    [
        ((1, 3, 224, 224), (64, 3, 7, 7), (2, 2)),  # ResNet's stem
        ((1, 32, 900, 161), (64, 32, 3, 3), (2, 2)),  # the audio CNN's strided conv
        ((1, 16, 40), (16, 16, 5), (2,)),
    ],
    ids=["stem", "audio", "1-D"],
)
def test_strided_convs_run_over_stride_phases(x_shape, w_shape, strides):
    """Strides of 2 run over wide rows of stride phases: each tap's row of columns is
    a run of a phase plane, read there by the indirect tiles at its offset, not a
    gather per output row (``_im2col``)."""
    x = nbyoc.var("x", x_shape)
    k = len(strides)
    pads = tuple(n // 2 for n in w_shape[2:]) * 2
    y = nbyoc.conv(x, nbyoc.const(normal(w_shape, "float32", 1)), strides=strides, pads=pads)
    assert way(y) == "wide"
    source = nbyoc.compile(nbyoc.function([x], y), backend="llvm").get_source()
    assert "offsets[" in source and "_rows(" in source and "columns" not in source
    # (two phases along the last axis, copied in one loop; two along the first)
    assert "phase_plane1 = " in source and "input_row[first + u * np.uint64(2)" in source
    assert ("for ph0 in range(2):" in source) == (k > 1)


def test_phase_planes_keep_only_the_phases_a_tap_reads():
    """A 3x3 stride-2 conv reads 2 x 2 phases; a 1 x 3 window of stride 3 one phase
    along its first axis and three along its second; a dilation of 2 at stride 2, one;
    each phase plane's rows are the output's width and the reach of the taps."""
    assert PhasePlanes((3, 3), (2, 2), (1, 1), (1, 1), (9, 9), (5, 5)).counts == (2, 2)
    planes = PhasePlanes((1, 3), (3, 3), (1, 1), (0, 0), (9, 9), (3, 3))
    assert (planes.counts, planes.reach, planes.extents(2)) == ((1, 3), (0, 0), (2, 3))
    planes = PhasePlanes((3,), (2,), (2,), (2,), (20,), (10,))
    assert (planes.counts, planes.reach, planes.slack()) == ((1,), (2,), 0)
