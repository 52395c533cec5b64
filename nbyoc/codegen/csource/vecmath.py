"""float32 exp, log, tanh, sigmoid, erf, log1p and expm1 in C that the C compiler
vectorises, for
csource kernels: the same range reductions and polynomials as the llvm backend's
(``nbyoc.runtime.llvm.vecmath``, constants shared through ``vecmath_constants``).

libm's ``expf`` or ``tanhf`` is an opaque call per element, so a loop calling it runs
one element at a time (csource's GELU took 6x NumPy's time). These are ``static
inline`` straight-line code: bits moved between float and integer through
``memcpy`` (which compiles to a register move), both sides of every case computed
and one selected, so a loop calling them vectorises at ``-O3``. csource compiles
without contraction (``-ffp-contract=off``), so these round each multiply and add
apart; their error bounds are tested like the llvm versions' (at most ``MAX_ULP``).

>>> needed(["return nbyoc_tanh_f32(a);"])
['exp_nonpositive', 'tanh']
>>> "nbyoc_exp_f32" in definitions(["exp"])
True
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ...runtime import vecmath_constants as C


def _f(value: float) -> str:
    """The exact C literal of ``value`` rounded to float32."""
    return float(np.float32(value)).hex() + "f"


def _horner(coefficients: tuple[float, ...], x: str) -> str:
    """c[0] + c[1] x + ... as nested products, innermost the highest power."""
    text = _f(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"({text} * {x} + {_f(c)})"
    return text


_ROUNDER_BITS = int(np.float32(C.ROUNDER).view(np.int32))
#: Added to the rounder's bits shifted by 23: the bits of 2**(k + 24) (modulo 2**32).
_SCALE_BIAS = ((151 << 23) - (_ROUNDER_BITS << 23)) % 2**32
E2, E3, E4, E5, E6 = (_f(v) for v in C.EXP)
L = [_f(v) for v in C.LOG]

BITS = """\
static inline int32_t nbyoc_float_bits(float x) { int32_t b; memcpy(&b, &x, 4); return b; }
static inline float nbyoc_bits_float(uint32_t b) { float x; memcpy(&x, &b, 4); return x; }"""

SOURCES = {
    "exp": f"""\
/* e**x, within 1.09 ulp (see nbyoc.runtime.llvm.vecmath.exp_f32). */
static inline float nbyoc_exp_f32(float x) {{
  x = x < {_f(C.EXP_LOW)} ? {_f(C.EXP_LOW)} : x; /* NaN stays NaN */
  x = x > {_f(C.EXP_HIGH)} ? {_f(C.EXP_HIGH)} : x;
  const float j = x * {_f(C.LOG2E)} + {_f(C.ROUNDER)};
  const float n = j - {_f(C.ROUNDER)}; /* round(x / ln 2) */
  float r = x - n * {_f(C.LN2_HI)};
  r = r - n * {_f(C.LN2_LO)};
  const float r2 = r * r;
  const float q = ({E6} * r2 + ({E5} * r + {E4})) * r2 + ({E3} * r + {E2});
  const float p = (q * r2 + r) + 1.0f;
  /* p * 2**n as two powers of two, each a normal float, so that one rounding at most
     takes the product into the subnormals. */
  const int32_t k = nbyoc_float_bits(j) - {_ROUNDER_BITS};
  const int32_t k1 = k >> 1;
  const float low = nbyoc_bits_float((uint32_t)(k1 + 127) << 23);
  const float high = nbyoc_bits_float((uint32_t)(k - k1 + 127) << 23);
  return p * low * high;
}}""",
    "exp_nonpositive": f"""\
/* e**x for x <= 0 (or NaN), the same as nbyoc_exp_f32 with one power of two: 2**(k + 24)
   is normal for every k here (see nbyoc.runtime.llvm.vecmath.exp_nonpositive_f32). */
static inline float nbyoc_exp_nonpositive_f32(float x) {{
  x = x < {_f(C.EXP_LOW)} ? {_f(C.EXP_LOW)} : x; /* NaN stays NaN */
  const float j = x * {_f(C.LOG2E)} + {_f(C.ROUNDER)};
  const float n = j - {_f(C.ROUNDER)};
  float r = x - n * {_f(C.LN2_HI)};
  r = r - n * {_f(C.LN2_LO)};
  const float r2 = r * r;
  const float q = ({E6} * r2 + ({E5} * r + {E4})) * r2 + ({E3} * r + {E2});
  /* p * 2**-24, exactly (a power of two scales without rounding), so that the product
     with 2**(k + 24) is the one rounding: one multiplication fewer. */
  const float p = (q * r2 + r) * 0x1p-24f + 0x1p-24f;
  const uint32_t scale = ((uint32_t)nbyoc_float_bits(j) << 23) + {_SCALE_BIAS}u;
  return p * nbyoc_bits_float(scale);
}}""",
    "log": f"""\
/* The natural logarithm, within 1.01 ulp; log(0) is -inf, of a negative number NaN. */
static inline float nbyoc_log_f32(float x) {{
  const int subnormal = x < 0x1p-126f;
  const float scaled = subnormal ? x * 0x1p23f : x;
  const int32_t bits = nbyoc_float_bits(scaled);
  const int32_t k = ((bits >> 23) & 0xFF) - 127 - (subnormal ? 23 : 0);
  float m = nbyoc_bits_float((uint32_t)((bits & 0x7FFFFF) | 0x3F800000)); /* in [1, 2) */
  const int big = m > {_f(np.sqrt(2.0))};
  m = big ? m * 0.5f : m;
  const float e = (float)(k + big);
  const float f = m - 1.0f; /* exact */
  const float f2 = f * f, f4 = f2 * f2;
  const float p = (({L[7]} * f + {L[6]}) * f2 + ({L[5]} * f + {L[4]})) * f4
                + (({L[3]} * f + {L[2]}) * f2 + ({L[1]} * f + {L[0]}));
  float y = f * f2 * p + e * {_f(C.LN2_LO)};
  y = y - 0.5f * f2;
  float result = (f + y) + e * {_f(C.LN2_HI)};
  result = x == INFINITY ? x : result;
  result = x == 0.0f ? -INFINITY : result;
  return x >= 0.0f ? result : NAN;
}}""",
    "tanh": f"""\
/* The hyperbolic tangent, within 1.46 ulp. */
static inline float nbyoc_tanh_f32(float x) {{
  const float a = fabsf(x), z = a * a;
  const float small = a + a * z * {_horner(C.TANH, "z")};
  /* 1 - 2 / (e**2|x| + 1) = 1 - 2e / (1 + e), e = e**-2|x|: no cancellation from
     {C.TANH_SMALL} on, 1 for large |x|. */
  const float e = nbyoc_exp_nonpositive_f32(-(a + a));
  const float large = 1.0f - (e + e) / (1.0f + e);
  return copysignf(a < {_f(C.TANH_SMALL)} ? small : large, x); /* odd; NaN stays NaN */
}}""",
    "sigmoid": """\
/* The logistic function 1 / (1 + e**-x), within 1.52 ulp: e**-|x| never overflows, and
   for x < 0 the result is e / (1 + e), accurate as it goes subnormal. The division in
   double, where float's two roundings would add up to 2.4 ulp. */
static inline float nbyoc_sigmoid_f32(float x) {
  const double e = (double)nbyoc_exp_nonpositive_f32(-fabsf(x));
  return (float)((x >= 0.0f ? 1.0 : e) / (1.0 + e));
}""",
    "erf": f"""\
/* The error function, within 0.98 ulp. */
static inline float nbyoc_erf_f32(float x) {{
  float a = fabsf(x);
  a = a > {_f(C.ERF_LARGE)} ? {_f(C.ERF_LARGE)} : a; /* NaN stays NaN */
  const float z = a * a;
  const float small = a + a * {_horner(C.ERF_Q, "z")};
  const float t = 1.0f / a - {_f(C.ERF_HC)};
  const float large = 1.0f - nbyoc_exp_nonpositive_f32(-z) / a * {_horner(C.ERF_H, "t")};
  return copysignf(a < {_f(C.ERF_SMALL)} ? small : large, x); /* odd; NaN stays NaN */
}}""",
    "log1p": """\
/* log(1 + x), accurate near 0 (see nbyoc.runtime.llvm.vecmath.log1p_f32): log of the
   rounded 1 + x, times x / (u - 1); the product in double, rounded once. */
static inline float nbyoc_log1p_f32(float x) {
  const float u = x + 1.0f;
  const float r = (float)((double)nbyoc_log_f32(u) * ((double)x / (double)(u - 1.0f)));
  const float result = u == 1.0f ? x : r; /* tiny x, -0.0 included */
  return u == INFINITY ? u : result;
}""",
    "expm1": """\
/* e**x - 1, accurate near 0 (see nbyoc.runtime.llvm.vecmath.expm1_f32): (u - 1) * x / log(u)
   with u = e**x rounded; in double, rounded once. */
static inline float nbyoc_expm1_f32(float x) {
  const float u = nbyoc_exp_f32(x), um1 = u - 1.0f;
  const float r = (float)((double)um1 * ((double)x / (double)nbyoc_log_f32(u)));
  float result = u == 1.0f ? x : r; /* tiny x, -0.0 included */
  result = um1 == -1.0f ? -1.0f : result; /* e**x underflows */
  return u == INFINITY ? u : result; /* overflows; NaN stays NaN */
}""",
}

#: The functions each one calls.
_CALLS = {
    **{op: ("exp_nonpositive",) for op in ("tanh", "sigmoid", "erf")},
    "log1p": ("log",),
    "expm1": ("exp", "log"),
}


def function_name(op: str) -> str:
    """The C function computing ``op`` on a float."""
    return f"nbyoc_{op}_f32"


def needed(helpers: Iterable[str]) -> list[str]:
    """The functions that the C text ``helpers`` calls, with the functions those call,
    in the order they must be defined."""
    text = "\n".join(helpers)
    wanted = {op for op in SOURCES if function_name(op) in text}
    for op in list(wanted):
        wanted.update(_CALLS.get(op, ()))
    return [op for op in SOURCES if op in wanted]


def definitions(ops: Iterable[str]) -> str:
    """The C definitions of ``ops`` (as ``needed`` orders them), with the bit moves."""
    ops = list(ops)
    return "\n\n".join([BITS, *(SOURCES[op] for op in ops)]) if ops else ""
