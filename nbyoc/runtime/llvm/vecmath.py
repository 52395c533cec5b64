"""float32 exp, log, tanh, sigmoid, erf, log1p and expm1 that LLVM vectorises, for llvm
kernels.

libm's ``expf`` or ``tanhf`` is one call per element, and a loop that calls one
runs a scalar at a time. These are straight-line float32 code: a range reduction,
a short polynomial and bit manipulation of the exponent, with no data-dependent
branch (both sides of a case are computed and one is selected), so a loop of
them runs eight lanes at a time on AVX. Each is compiled with ``contract`` only
(fused multiply-adds where the CPU has them; no reassociation), and LLVM keeps
that flag per instruction when it inlines them into a kernel. They are marked
``forceinline`` (LLVM's alwaysinline): a loop calling several of them, as fused
kernels do, otherwise ran past LLVM's inlining budget, kept the calls and was
not vectorised at all.

Error bounds, measured over every finite float32 input against float64 NumPy
(``bench/vecmath_accuracy.py``; the test suite checks them on a sample with the
special values): ``exp_f32`` 1.09 ulp, ``log_f32`` 1.01 ulp, ``tanh_f32`` 1.46 ulp,
``sigmoid_f32`` 1.52 ulp, ``erf_f32`` 0.98 ulp, ``log1p_f32`` 1.74 ulp, ``expm1_f32``
1.90 ulp: all within ``MAX_ULP``. inf, NaN,
overflow and underflow (subnormal results included) follow IEEE and NumPy.

The constants and polynomial coefficients are in ``vecmath_constants``, which the
csource backend's C versions of these functions share.

Generated kernels import these by name (``from nbyoc.runtime.llvm.vecmath import ...``).

>>> import numpy as np
>>> float(exp_f32(np.float32(1.0))), float(log_f32(np.float32(np.e)))
(2.7182817459106445, 1.0)
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .. import vecmath_constants as C

#: The largest error, in units in the last place of the correctly rounded float32
#: result, that any function here may have (the tests' bound).
MAX_ULP = 2.0

F = np.float32
I32 = np.int32
_OPTIONS = {"fastmath": {"contract"}, "error_model": "numpy", "forceinline": True}


@intrinsic
def float_bits(typingctx, x):
    """The bits of a float32 as an int32."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def bits_float(typingctx, bits):
    """The float32 whose bits are an int32."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


_ROUNDER = F(C.ROUNDER)
_ROUNDER_BITS = I32(np.float32(C.ROUNDER).view(np.int32))
_LN2_HI, _LN2_LO, _LOG2E = F(C.LN2_HI), F(C.LN2_LO), F(C.LOG2E)
_EXP_LOW, _EXP_HIGH = F(C.EXP_LOW), F(C.EXP_HIGH)
_E2, _E3, _E4, _E5, _E6 = (F(v) for v in C.EXP)


@njit(**_OPTIONS)
def exp_f32(x):
    """e**x of a float32, within 1.09 ulp; overflow gives inf, underflow subnormals or 0."""
    x = min(max(x, _EXP_LOW), _EXP_HIGH)  # beyond these float32 gives 0 or inf; NaN stays
    j = x * _LOG2E + _ROUNDER
    n = j - _ROUNDER  # round(x / ln 2)
    r = x - n * _LN2_HI
    r = r - n * _LN2_LO
    r2 = r * r
    # Estrin's scheme: a shorter chain of dependent operations than Horner's.
    q = (_E6 * r2 + (_E5 * r + _E4)) * r2 + (_E3 * r + _E2)
    p = (q * r2 + r) + F(1.0)
    # p * 2**n, as two powers of two so that each is a normal float (n in [-150, 129])
    # and the product may round once into the subnormals.
    k = float_bits(j) - _ROUNDER_BITS
    k1 = k >> I32(1)
    low = bits_float((k1 + I32(127)) << I32(23))
    high = bits_float((k - k1 + I32(127)) << I32(23))
    return p * low * high


#: The rounder of exp_nonpositive_f32: ROUNDER + 152 leaves k + 152 in the low bits of
#: j's mantissa, so that ``float_bits(j) << 23`` is the biased exponent of 2**(k + 25)
#: (the rounder's own bits shift out: its low nine are zero). Even, as ROUNDER is, so it
#: rounds ties to the same n.
_ROUNDER_SCALED = F(C.ROUNDER + 152)
_TWO_M25 = F(2.0**-25)


@njit(**_OPTIONS)
def exp_nonpositive_f32(x):
    """e**x of a float32 ``x <= 0`` (or NaN): the same result as ``exp_f32``, bit for bit,
    with one power of two instead of two. For softmax's ``exp(x - max(x))`` and what
    sigmoid and tanh take the exponential of; wrong for positive ``x``.

    For k in [-150, 0], 2**(k + 25) is a normal float, and so is p * 2**-25: their
    product rounds once, into the subnormals where it must, as exp_f32's two factors
    do. Six integer operations fewer: a loop storing and summing them takes
    0.62 cycles an element instead of 0.84 on znver4 (five fewer, as first measured).
    """
    x = max(x, _EXP_LOW)  # below it float32 gives 0; NaN stays
    j = x * _LOG2E + _ROUNDER_SCALED
    n = j - _ROUNDER_SCALED
    r = x - n * _LN2_HI
    r = r - n * _LN2_LO
    r2 = r * r
    q = (_E6 * r2 + (_E5 * r + _E4)) * r2 + (_E3 * r + _E2)
    # (s + 1) * 2**-25 in one fused multiply-add: scaling by a power of two is exact, so
    # this is exp_f32's p scaled, bit for bit, and the product below rounds once. One
    # multiplication fewer than scaling the product (softmax at 2048**2: 4% faster).
    p = (q * r2 + r) * _TWO_M25 + _TWO_M25
    return p * bits_float(float_bits(j) << I32(23))


_L0, _L1, _L2, _L3, _L4, _L5, _L6, _L7 = (F(v) for v in C.LOG)


@njit(**_OPTIONS)
def log_f32(x):
    """The natural logarithm of a float32, within 1.01 ulp; log(0) is -inf, of a
    negative number NaN."""
    subnormal = x < F(1.1754943508222875e-38)
    scaled = x * F(8388608.0) if subnormal else x  # 2**23 makes a subnormal normal
    bits = float_bits(scaled)
    k = ((bits >> I32(23)) & I32(0xFF)) - I32(127) - (I32(23) if subnormal else I32(0))
    m = bits_float((bits & I32(0x7FFFFF)) | I32(0x3F800000))  # the mantissa, in [1, 2)
    big = m > F(1.4142135623730951)
    m = m * F(0.5) if big else m
    e = F(k + (I32(1) if big else I32(0)))
    f = m - F(1.0)  # exact
    f2 = f * f
    f4 = f2 * f2
    p = ((_L7 * f + _L6) * f2 + (_L5 * f + _L4)) * f4 + ((_L3 * f + _L2) * f2 + (_L1 * f + _L0))
    y = f * f2 * p + e * _LN2_LO
    y = y - F(0.5) * f2
    result = (f + y) + e * _LN2_HI
    # Special cases, selected: inf stays inf, 0 gives -inf, negatives and NaN NaN.
    result = x if x == F(np.inf) else result
    result = F(-np.inf) if x == F(0.0) else result
    return F(np.nan) if not x >= F(0.0) else result


_TANH_SMALL = F(C.TANH_SMALL)
_T0, _T1, _T2, _T3, _T4 = (F(v) for v in C.TANH)


@njit(**_OPTIONS)
def tanh_f32(x):
    """The hyperbolic tangent of a float32, within 1.46 ulp."""
    a = abs(x)
    z = a * a
    small = (((_T4 * z + _T3) * z + _T2) * z + _T1) * z + _T0
    small = a + a * z * small
    # 1 - 2 / (e**2|x| + 1) = 1 - 2e / (1 + e) with e = e**-2|x|: exact enough once
    # |x| >= 0.625 (no cancellation), and 1 for large |x| (e is 0).
    e = exp_nonpositive_f32(-(a + a))
    large = F(1.0) - (e + e) / (F(1.0) + e)
    # tanh is odd: the sign put back (-0.0 stays -0.0, NaN stays NaN).
    return np.copysign(small if a < _TANH_SMALL else large, x)


@njit(**_OPTIONS)
def sigmoid_f32(x):
    """The logistic function 1 / (1 + e**-x) of a float32, within 1.52 ulp."""
    # e**-|x| never overflows; for x < 0 the result is e / (1 + e), which keeps its
    # relative accuracy as it goes subnormal (1 / (1 + e**-x) would round to 0 early).
    # The division in float64: in float32 its two roundings would add up to 2.4 ulp.
    e = np.float64(exp_nonpositive_f32(-abs(x)))
    return F((1.0 if x >= F(0.0) else e) / (1.0 + e))


_ERF_SMALL, _ERF_LARGE, _HC = F(C.ERF_SMALL), F(C.ERF_LARGE), F(C.ERF_HC)
_Q0, _Q1, _Q2, _Q3, _Q4, _Q5, _Q6 = (F(v) for v in C.ERF_Q)
_H0, _H1, _H2, _H3, _H4, _H5, _H6, _H7, _H8, _H9, _H10 = (F(v) for v in C.ERF_H)


@njit(**_OPTIONS)
def erf_f32(x):
    """The error function of a float32, within 0.98 ulp."""
    a = min(abs(x), _ERF_LARGE)  # NaN stays NaN
    z = a * a
    q = ((((((_Q6 * z + _Q5) * z + _Q4) * z + _Q3) * z + _Q2) * z + _Q1) * z) + _Q0
    small = a + a * q
    t = F(1.0) / a - _HC
    h = _H10 * t + _H9
    h = h * t + _H8
    h = h * t + _H7
    h = h * t + _H6
    h = h * t + _H5
    h = h * t + _H4
    h = h * t + _H3
    h = h * t + _H2
    h = h * t + _H1
    h = h * t + _H0
    large = F(1.0) - exp_nonpositive_f32(-z) / a * h
    # erf is odd: the sign put back (-0.0 stays -0.0, NaN stays NaN).
    return np.copysign(small if a < _ERF_SMALL else large, x)


@njit(**_OPTIONS)
def log1p_f32(x):
    """log(1 + x) of a float32, within 1.74 ulp, accurate near 0 (D. Goldberg's method):
    log of the rounded u = 1 + x, times x / (u - 1), which puts back what the rounding
    lost (u - 1 is exact where it matters); the product in float64, rounded once."""
    u = x + F(1.0)
    result = F(np.float64(log_f32(u)) * (np.float64(x) / np.float64(u - F(1.0))))
    result = x if u == F(1.0) else result  # (tiny x, -0.0 included)
    return u if u == F(np.inf) else result


@njit(**_OPTIONS)
def expm1_f32(x):
    """e**x - 1 of a float32, within 1.90 ulp, accurate near 0 (W. Kahan's method): with
    u = e**x rounded, (u - 1) * x / log(u) corrects for u's rounding to first order; in
    float64, rounded once."""
    u = exp_f32(x)
    um1 = u - F(1.0)
    result = F(np.float64(um1) * (np.float64(x) / np.float64(log_f32(u))))
    result = x if u == F(1.0) else result  # (tiny x, -0.0 included)
    result = F(-1.0) if um1 == F(-1.0) else result  # (e**x underflows)
    return u if u == F(np.inf) else result  # (overflows; NaN stays NaN)


#: The functions here by the op they compute.
FUNCTIONS = {
    "exp": exp_f32,
    "log": log_f32,
    "tanh": tanh_f32,
    "sigmoid": sigmoid_f32,
    "erf": erf_f32,
    "log1p": log1p_f32,
    "expm1": expm1_f32,
}


# -- reduction steps ---------------------------------------------------------------------
# A loop accumulating a float sum or product vectorises only if LLVM may reorder the
# steps (several partial accumulators, combined at the end). These steps carry exactly
# that permission; the loop around them keeps IEEE semantics.


@njit(fastmath={"reassoc", "nsz"}, error_model="numpy", forceinline=True)
def add_step(acc, x):
    """``acc + x``, reassociable: a float sum loop of these vectorises."""
    return acc + x


@njit(fastmath={"reassoc", "nsz"}, error_model="numpy", forceinline=True)
def multiply_step(acc, x):
    """``acc * x``, reassociable: a float product loop of these vectorises."""
    return acc * x


def _float_intrinsic(name: str, flags: tuple[str, ...] = ()):
    """An intrinsic calling LLVM's ``name`` on two floats of one type, with fast-math
    ``flags`` on the call."""

    @intrinsic
    def call(typingctx, a, b):
        if not (isinstance(a, types.Float) and a == b):
            return None

        def codegen(context, builder, signature, args):
            t = args[0].type
            function = builder.module.declare_intrinsic(name, [t], ir.FunctionType(t, [t, t]))
            return builder.call(function, args, fastmath=flags)

        return a(a, b), codegen

    return call


#: The larger of two floats, NaN if either is (NumPy's ``maximum``), as LLVM's
#: ``llvm.maximum``, for reductions: a loop reducing with it vectorises (a
#: compare-and-branch that lets NaN win does not), and NaN needs no test of its own in
#: the loop. ``nsz``: the max of -0.0 and +0.0 may be either (NumPy's depends on the
#: order too), which drops the sign-of-zero fix-up from each step and halves a row
#: max's time (0.72 -> 0.35 ms for 2048 rows of 2048 in L1 on the Xeon).
maximum = _float_intrinsic("llvm.maximum", ("nsz",))
#: The smaller of two floats, NaN if either is (see ``maximum``).
minimum = _float_intrinsic("llvm.minimum", ("nsz",))
