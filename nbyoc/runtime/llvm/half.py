"""float16 inside llvm kernels: Numba has no float16 on the CPU (it cannot type a
float16 array, load one or compute with one), so a kernel receives float16 arrays
as their uint16 bits and computes in float32, as NumPy's own float16 loops do:

- ``half_value(bits)``: the float32 value of a float16 held as its uint16 bits;
- ``half_bits(x)``: ``x`` (float32, float64, integer or bool) rounded to the
  nearest float16, ties to even, as uint16 bits;
- ``round_half(x)``: ``x`` rounded to float16 and held in float32 (what an op
  on float16 values produces: NumPy rounds every float16 result).

float32 converts to and from float16 by LLVM's ``fptrunc``/``fpext`` on
``half`` when the CPU has conversion instructions (x86 with F16C, AArch64), so
a loop of them vectorises; without them LLVM would call a compiler-runtime
function the JIT may not resolve (a float64 -> half ``fptrunc`` crashed the
process here), so other machines, and a Numba told to target another CPU, use
the integer versions below. float64 is never truncated to half directly: it is
first rounded to float32 *to odd* (truncate, then set the last bit if anything
was lost), which makes the second rounding to float16 exact (float32 keeps 13
more bits than float16 needs), so the result is float64's own nearest float16,
as NumPy's float64 -> float16 cast gives.

Generated kernels import these by name (``from nbyoc.runtime.llvm.half import ...``).

>>> import numpy as np
>>> bits = np.float16(1.5).view(np.uint16)
>>> float(half_value(bits)), int(half_bits(np.float32(1.5))) == int(bits)
(1.5, True)
>>> float(round_half(np.float64(0.1)))  # float16's nearest to 0.1
0.0999755859375
"""

from __future__ import annotations

import platform

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload


def hardware_conversion() -> bool:
    """True if Numba generates float16 <-> float32 conversions as instructions on this
    machine (x86 with F16C, AArch64) rather than as calls to a runtime library."""
    if numba.config.CPU_NAME not in (None, "host"):  # compiling for another CPU
        return False
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return True
    if machine in ("x86_64", "amd64"):
        import llvmlite.binding as llvm

        return bool(llvm.get_host_cpu_features().get("f16c"))
    return False


HARDWARE = hardware_conversion()


@intrinsic
def _float32_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def _bits_float32(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@intrinsic
def _hardware_half_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _hardware_half_value(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@njit(error_model="numpy")
def software_half_value(bits):
    """The float32 value of float16 ``bits`` by integer arithmetic (exact)."""
    b = np.uint32(bits)
    sign = (b & np.uint32(0x8000)) << np.uint32(16)
    exponent = (b >> np.uint32(10)) & np.uint32(0x1F)
    mantissa = b & np.uint32(0x3FF)
    if exponent == 0:  # zero or subnormal: mantissa * 2**-24 is exact in float32
        magnitude = np.float32(mantissa) * np.float32(2.0**-24)
        return -magnitude if sign else magnitude
    if exponent == 31:  # inf or NaN (the payload kept)
        return _bits_float32(sign | np.uint32(0x7F800000) | (mantissa << np.uint32(13)))
    rebiased = (exponent + np.uint32(127 - 15)) << np.uint32(23)
    return _bits_float32(sign | rebiased | (mantissa << np.uint32(13)))


@njit(error_model="numpy")
def software_half_bits(x):
    """float32 ``x`` rounded to the nearest float16 (ties to even), as its bits, by
    integer arithmetic."""
    b = _float32_bits(x)
    sign = np.uint16((b >> np.uint32(16)) & np.uint32(0x8000))
    a = b & np.uint32(0x7FFFFFFF)
    if a >= np.uint32(0x7F800000):  # inf, or NaN kept quiet
        return sign | np.uint16(0x7C00 | (0x200 if a > 0x7F800000 else 0))
    if a >= np.uint32(0x477FF000):  # from 65520 (half-way past 65504) up: inf
        return sign | np.uint16(0x7C00)
    if a < np.uint32(0x38800000):  # below 2**-14: a subnormal float16 (or 1024: 2**-14)
        scaled = _bits_float32(a) * np.float32(2.0**24)  # exact: a power of two
        return sign | np.uint16(np.rint(scaled))
    base = (a >> np.uint32(13)) - np.uint32((127 - 15) << 10)
    rest = a & np.uint32(0x1FFF)
    up = rest > np.uint32(0x1000) or (rest == np.uint32(0x1000) and (base & np.uint32(1)))
    return sign | np.uint16(base + np.uint32(1 if up else 0))


if HARDWARE:
    _half_value = _hardware_half_value
    _half_bits_of_float32 = _hardware_half_bits
else:
    _half_value = software_half_value
    _half_bits_of_float32 = software_half_bits


def _to_odd_float32(x):
    """``x`` as a float32 from which float16 rounding is exact (see the docstring)."""


@overload(_to_odd_float32)
def _to_odd_float32_impl(x):
    if isinstance(x, types.Float) and x.bitwidth == 64:

        def wide(x):
            f = np.float32(x)
            if np.float64(f) != x and x == x:  # inexact (NaN compares unequal but is exact)
                bits = _float32_bits(f)
                if abs(np.float64(f)) > abs(x):  # rounded away from zero: truncate
                    bits -= np.uint32(1)
                f = _bits_float32(bits | np.uint32(1))
            return f

        return wide
    # float32 as it is; integers that float16 can hold are exact in float32, and larger
    # ones round to inf either way.
    return lambda x: np.float32(x)


@njit(error_model="numpy")
def half_value(bits):
    """The float32 value of a float16 held as its uint16 bits."""
    return _half_value(bits)


@njit(error_model="numpy")
def half_bits(x):
    """``x`` rounded to the nearest float16, ties to even, as uint16 bits."""
    return _half_bits_of_float32(_to_odd_float32(x))


@njit(error_model="numpy")
def round_half(x):
    """``x`` rounded to the nearest float16, held in float32."""
    return _half_value(_half_bits_of_float32(_to_odd_float32(x)))
