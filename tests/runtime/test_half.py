"""float16 in llvm kernels (``nbyoc.runtime.llvm.half``): every conversion equals NumPy's,
for all 65536 float16 bit patterns, float32 and float64 values half-way between
float16 neighbours and just beside them, overflow, underflow, NaN and signed zeros,
on the hardware path and on the integer (software) one."""

import numpy as np
import pytest
from numba import njit

from nbyoc.runtime.llvm import half

ALL_BITS = np.arange(1 << 16, dtype=np.uint16)
HALVES = ALL_BITS.view(np.float16)
FINITE = HALVES[np.isfinite(HALVES)].astype(np.float64)
FINITE.sort()
MIDPOINTS = (FINITE[:-1] + FINITE[1:]) / 2  # exact in float64 and in float32


@njit
def _values(bits, out, software):
    for i in range(bits.size):
        out[i] = half.software_half_value(bits[i]) if software else half.half_value(bits[i])


@njit
def _bits32(x, out, software):
    for i in range(x.size):
        out[i] = half.software_half_bits(x[i]) if software else half.half_bits(x[i])


@njit
def _bits(x, out):
    for i in range(x.size):
        out[i] = half.half_bits(x[i])


@njit
def _rounded(x, out):
    for i in range(x.size):
        out[i] = half.round_half(x[i])


def _same(got_bits, want):
    """Bit for bit, NaN as any NaN."""
    want_bits = want.view(np.uint16)
    nan = np.isnan(want)
    assert np.array_equal(got_bits[~nan], want_bits[~nan])
    assert np.isnan(got_bits.view(np.float16)[nan]).all()


@pytest.mark.parametrize("software", [False, True])
def test_every_float16_converts_to_its_float32_exactly(software):
    got = np.empty(ALL_BITS.size, np.float32)
    _values(ALL_BITS, got, software)
    want = HALVES.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    assert np.isnan(got[nan]).all()


@pytest.mark.parametrize("software", [False, True])
def test_float32_rounds_to_float16_as_numpy(software):
    rng = np.random.default_rng(0)
    scales = np.float32(10) ** rng.integers(-9, 6, 200_000).astype(np.float32)
    x = np.concatenate([
        rng.standard_normal(200_000).astype(np.float32) * scales,
        MIDPOINTS.astype(np.float32),  # ties: to even
        np.nextafter(MIDPOINTS.astype(np.float32), np.float32(np.inf)),
        np.nextafter(MIDPOINTS.astype(np.float32), np.float32(-np.inf)),
        np.arange(0, 1 << 32, 65537, dtype=np.uint64).astype(np.uint32).view(np.float32),
        np.array([np.inf, -np.inf, np.nan, 65504, 65519.996, 65520, 2**-25, -(2**-25), 0, -0.0],
                 np.float32),
    ])  # fmt: skip
    got = np.empty(x.size, np.uint16)
    _bits32(x, got, software)
    with np.errstate(all="ignore"):
        _same(got, x.astype(np.float16))


def test_float64_rounds_once_to_float16():
    """float64 -> float16 is one rounding (NumPy's cast), not two through float32: the
    values just beside each half-way point would round the wrong way through float32."""
    rng = np.random.default_rng(1)
    x = np.concatenate([
        rng.standard_normal(200_000) * 10.0 ** rng.integers(-9, 6, 200_000),
        MIDPOINTS,
        np.nextafter(MIDPOINTS, np.inf),
        np.nextafter(MIDPOINTS, -np.inf),
        np.array([np.inf, -np.inf, np.nan, 65519.99999, 65520.0, 1e300, -1e-300, 0.0, -0.0]),
    ])  # fmt: skip
    got = np.empty(x.size, np.uint16)
    _bits(x, got)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    _same(got, want)
    through32 = x.astype(np.float32).astype(np.float16)
    assert (through32 != want).any()  # the test can tell one rounding from two
    held = np.empty(x.size, np.float32)
    _rounded(x, held)
    nan = np.isnan(want)
    assert np.array_equal(held[~nan], want[~nan].astype(np.float32))


def test_integers_and_bools_round_to_float16_as_numpy():
    x = np.arange(-70_000, 70_000, 7, dtype=np.int64)
    got = np.empty(x.size, np.uint16)
    _bits(x, got)
    with np.errstate(all="ignore"):
        _same(got, x.astype(np.float16))
    flags = np.array([True, False])
    got = np.empty(2, np.uint16)
    _bits(flags, got)
    _same(got, flags.astype(np.float16))
