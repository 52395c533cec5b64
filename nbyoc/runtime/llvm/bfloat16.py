"""bfloat16 inside llvm kernels, as float16 is (``half``): a kernel receives bfloat16
arrays as their uint16 bits and computes in float32, rounding every op's result:

- ``bfloat16_value(bits)``: the float32 value of a bfloat16 held as its bits (the
  upper half of a float32: exact);
- ``bfloat16_bits(x)``: ``x`` rounded to the nearest bfloat16, ties to even, as its
  bits. ``x`` goes through float32 first (an integer or a float64 is rounded to
  float32, then to bfloat16), which is how ``ml_dtypes`` converts, so a kernel's
  bfloat16 agrees bit for bit with NumPy arrays of ``ml_dtypes.bfloat16``. A NaN
  becomes the quiet NaN of its sign (ml_dtypes drops the payload too);
- ``round_bfloat16(x)``: ``x`` rounded to bfloat16 and held in float32.

Both conversions are integer arithmetic without branches, so loops of them vectorise.

>>> import ml_dtypes, numpy as np
>>> bits = np.array([1.5], ml_dtypes.bfloat16).view(np.uint16)[0]
>>> float(bfloat16_value(bits)), int(bfloat16_bits(np.float32(1.5))) == int(bits)
(1.5, True)
>>> float(round_bfloat16(np.float64(0.1)))  # bfloat16's nearest to 0.1
0.10009765625
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .half import _bits_float32, _float32_bits


@njit(error_model="numpy")
def bfloat16_value(bits):
    """The float32 value of a bfloat16 held as its uint16 bits."""
    return _bits_float32(np.uint32(bits) << np.uint32(16))


@njit(error_model="numpy")
def bfloat16_bits(x):
    """``x`` rounded (through float32) to the nearest bfloat16, ties to even, as bits."""
    b = _float32_bits(np.float32(x))
    # (adding 0x7FFF, plus the last kept bit, carries into the kept bits exactly when
    # the dropped half is above a tie, or a tie with an odd last bit; past the largest
    # finite value it carries into the exponent: inf, as it should)
    rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = ((b >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7FC0)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.uint16(quiet if nan else rounded)


@njit(error_model="numpy")
def round_bfloat16(x):
    """``x`` rounded to the nearest bfloat16, held in float32."""
    return bfloat16_value(bfloat16_bits(x))
