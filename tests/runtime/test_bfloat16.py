"""bfloat16 in llvm kernels (``nbyoc.runtime.llvm.bfloat16``): every conversion equals
ml_dtypes', bit for bit: all 65536 bfloat16 bit patterns to float32; float32 values
half-way between bfloat16 neighbours (ties to even) and just beside them, overflow,
NaN of either sign and signed zeros to bfloat16; float64 and integers through float32
as ml_dtypes converts them."""

import ml_dtypes
import numpy as np
from numba import njit

from nbyoc.runtime.llvm import bfloat16

BF16 = np.dtype(ml_dtypes.bfloat16)
ALL_BITS = np.arange(1 << 16, dtype=np.uint16)
VALUES = ALL_BITS.view(BF16)


@njit
def _values(bits, out):
    for i in range(bits.size):
        out[i] = bfloat16.bfloat16_value(bits[i])


@njit
def _bits(x, out):
    for i in range(x.size):
        out[i] = bfloat16.bfloat16_bits(x[i])


@njit
def _rounded(x, out):
    for i in range(x.size):
        out[i] = bfloat16.round_bfloat16(x[i])


def bits_of(x: np.ndarray) -> np.ndarray:
    out = np.empty(x.size, np.uint16)
    _bits(x, out)
    return out


def test_every_bfloat16_converts_to_its_float32_exactly():
    got = np.empty(ALL_BITS.size, np.float32)
    _values(ALL_BITS, got)
    want = VALUES.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    assert np.isnan(got[nan]).all()


def _hard_float32s() -> np.ndarray:
    """Every finite bfloat16's neighbourhood: its midpoint with the next (a tie), one
    float32 ulp either side of that, and extremes."""
    finite = VALUES[np.isfinite(VALUES.astype(np.float32))].astype(np.float32)
    finite = np.unique(finite)
    mid = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    step = np.float32(np.inf)
    extremes = np.array([0.0, -0.0, np.inf, -np.inf, 3.4028235e38, -3.4028235e38,
                         3.3961776e38, 1e-45, -1e-45], np.float32)  # fmt: skip
    return np.concatenate([mid, np.nextafter(mid, step), np.nextafter(mid, -step), finite,
                           extremes])  # fmt: skip


def test_float32_rounds_to_the_nearest_bfloat16_ties_to_even():
    x = _hard_float32s()
    assert np.array_equal(bits_of(x), x.astype(BF16).view(np.uint16))
    rounded = np.empty(x.size, np.float32)
    _rounded(x, rounded)
    assert np.array_equal(rounded, x.astype(BF16).astype(np.float32))


def test_nan_becomes_the_quiet_nan_of_its_sign():
    payloads = np.array([0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0xFF800001, 0xFFC00000],
                        np.uint32).view(np.float32)  # fmt: skip
    with np.errstate(invalid="ignore"):
        want = payloads.astype(BF16).view(np.uint16)
    assert bits_of(payloads).tolist() == want.tolist() == [0x7FC0] * 3 + [0xFFC0] * 2


def test_float64_and_integers_convert_through_float32_as_ml_dtypes_does():
    rng = np.random.default_rng(0)
    wide = np.concatenate([rng.standard_normal(5000) * 10.0 ** rng.integers(-30, 30, 5000),
                           [1 + 2**-8 + 2**-30, 1e300, -1e300, 1e-300]])  # fmt: skip
    with np.errstate(over="ignore"):
        assert np.array_equal(bits_of(wide), wide.astype(BF16).view(np.uint16))
    ints = np.array([0, 1, -1, 2**24 + 2**16 + 1, 2**31 - 1, -(2**31), 255], np.int64)
    assert np.array_equal(bits_of(ints), ints.astype(BF16).view(np.uint16))
    flags = np.array([True, False])
    assert np.array_equal(bits_of(flags), flags.astype(BF16).view(np.uint16))
