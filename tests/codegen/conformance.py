"""Cases every compiled backend's elementwise code must get right, shared by the
backend tests: each builder returns ``(external function, inputs)`` for the named
backend, and the backend's test checks the outputs against NumPy its own way.

``extra`` hooks add the outputs only some backends compile (reductions on llvm).

>>> f, inputs = integer_overflow("llvm")
>>> f.attrs["global_symbol"], inputs[0].dtype.name
('llvm_0', 'int32')
"""

from __future__ import annotations

import math

import numpy as np

import nbyoc

from ..helpers import external
from ..strategies import ELEMENTWISE_BINARY as BINARY
from ..strategies import ELEMENTWISE_UNARY as UNARY
from ..strategies import random_inputs

#: Ops that round exactly, so a backend must match NumPy bit for bit on them: all but
#: the transcendental ones (and power, which libm computes).
ROUNDED = {"power", "exp", "log", "sqrt", "tanh", "sigmoid", "sin", "cos", "erf"}
EXACT = (set(BINARY) | set(UNARY) | {"where", "cast"}) - ROUNDED


#: Mixed dtype pairs run by default beside every dtype with itself: each dtype meets one
#: of another kind or width (the full product is marked slow: --run-slow).
MIXED_PAIRS = [("int32", "float32"), ("int8", "uint8"), ("uint64", "int64"), ("bool", "float32"),
               ("int16", "float16"), ("uint32", "int32"), ("float16", "float64"),
               ("uint16", "bool"), ("int64", "float64"), ("uint8", "float16")]  # fmt: skip


#: The dtypes every backend test runs by default where a test is per dtype (the rest
#: are marked slow): one of each kind and a narrow integer.
CORE_DTYPES = ("float32", "float64", "int32", "uint8", "bool")


def dtype_pairs(dtypes, variants=(None,)) -> list:
    """Every pair of ``dtypes`` (times each of ``variants``, e.g. fused or not) as pytest
    params: each dtype with itself and MIXED_PAIRS run by default, other variants than
    the first only for float32 and int32 with themselves; the rest are marked slow."""
    import pytest

    fast = {(d, d) for d in dtypes} | set(MIXED_PAIRS)
    params = []
    for a in dtypes:
        for b in dtypes:
            for k, variant in enumerate(variants):
                quick = (a, b) in fast and (k == 0 or (a == b and a in ("float32", "int32")))
                values = (a, b) if variant is None else (a, b, variant)
                params.append(pytest.param(*values, marks=() if quick else pytest.mark.slow))
    return params


def per_dtype(dtypes) -> list:
    """``dtypes`` as pytest params, those outside CORE_DTYPES marked slow."""
    import pytest

    return [pytest.param(d, marks=() if d in CORE_DTYPES else pytest.mark.slow) for d in dtypes]


def _ext(backend, params, outputs):
    return external(params, outputs, f"{backend}_0", backend)


def _values(shape, dtype, seed=0):
    """Positive values (1 to 5; bools at random), so every binary op, power included, is
    defined."""
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if kind in "iu":
        return rng.integers(1, 5, size=shape).astype(dtype)
    return rng.uniform(1, 5, shape).astype(dtype)


def accepted(backend, op, *args, **attrs) -> list:
    """``[op(*args)]``, or ``[]`` where the op's type rule (NumPy's) refuses the dtypes
    (subtract and negative of bools; ``tests/ir/test_ops.py`` checks the refusals) or
    the backend does not claim the call."""
    try:
        call = nbyoc.call_op(op, *args, **attrs)
    except nbyoc.errors.NbyocTypeError:
        return []
    return [call] if nbyoc.codegen.supports(backend, call) else []


def binary_ops(backend, da, db):
    """Every binary op on a (3, 4) and a broadcast (4,) operand of dtypes da, db."""
    a, b = nbyoc.var("in0", (3, 4), da), nbyoc.var("in1", (4,), db)
    f = _ext(backend, [a, b], [c for op in BINARY for c in accepted(backend, op, a, b)])
    return f, [_values((3, 4), da), _values((4,), db, seed=1)]


def unary_ops(backend, dtype):
    """Every unary op on values with negatives (log and sqrt give NaN, as in NumPy;
    unsigned dtypes wrap them round, bool makes them True)."""
    x = nbyoc.var("in0", (2, 5), dtype)
    f = _ext(backend, [x], [c for op in UNARY for c in accepted(backend, op, x)])
    return f, [np.array([[-3, -1, 0, 2, 7], [1, 4, 9, -30, 30]]).astype(dtype)]


def special_values(backend, dtype, extra=lambda x, y: []):
    """NaN, infinities and signed zeros through the ops that treat them specially."""
    x, y = nbyoc.var("in0", (6,), dtype), nbyoc.var("in1", (6,), dtype)
    ops = [nbyoc.maximum(x, y), nbyoc.minimum(x, y), nbyoc.relu(x), nbyoc.sigmoid(x), x / y,
           nbyoc.abs(x), nbyoc.floor_divide(x, y), nbyoc.mod(x, y), nbyoc.fmod(x, y),
           nbyoc.floor(x), nbyoc.ceil(x), nbyoc.round(x), nbyoc.sign(x), nbyoc.isnan(x),
           nbyoc.isinf(x), x < y, x >= y, nbyoc.equal(x, y), nbyoc.not_equal(x, y),
           nbyoc.logical_and(x, y), nbyoc.logical_not(x), nbyoc.where(x > y, x, y),
           nbyoc.reciprocal(x), nbyoc.cast(nbyoc.isnan(y), x.dtype), *extra(x, y)]  # fmt: skip
    values = np.array([np.nan, 1, -0.0, np.inf, -np.inf, 0.0], dtype)
    other = np.array([1, np.nan, 0.0, -1, 0.0, -0.0], dtype)
    return _ext(backend, [x, y], ops), [values, other]


def integer_overflow(backend):
    """int32 arithmetic at the edges of the range, which NumPy wraps, and integer division
    by 0 and -1 (NumPy gives 0 for x // 0 and x % 0, wraps INT_MIN // -1)."""
    x, y = nbyoc.var("in0", (6,), "int32"), nbyoc.var("in1", (6,), "int32")
    u = nbyoc.cast(x, "uint32")
    outs = [x * x, x + x, -x, nbyoc.abs(x), x**3, nbyoc.floor_divide(x, y), nbyoc.mod(x, y),
            nbyoc.fmod(x, y), nbyoc.floor_divide(u, nbyoc.cast(y, "uint32")),
            nbyoc.mod(u, nbyoc.cast(y, "uint32")), nbyoc.sign(u), nbyoc.cast(x, "int8")]  # fmt: skip
    return _ext(backend, [x, y], outs), [
        np.array([2**31 - 1, -(2**31), 123456789, -7, -(2**31), 7], np.int32),
        np.array([0, -1, -1, 2, 0, -3], np.int32),
    ]


def where_and_cast(backend, dtypes):
    """where over broadcast operands of three dtypes, and casts of its result to each
    dtype the backend computes in."""
    c = nbyoc.var("in0", (3, 1), dtypes[0])
    x, y = nbyoc.var("in1", (4,), dtypes[1]), nbyoc.var("in2", (3, 4), dtypes[2])
    chosen = nbyoc.where(c, x, y)
    casts = [c for d in nbyoc.DTYPES for c in accepted(backend, "cast", chosen, to=d)]
    f = _ext(backend, [c, x, y], [chosen, *casts])
    rng = np.random.default_rng(3)
    values = [rng.integers(0, 2, (3, 1)), rng.integers(0, 100, (4,)), rng.integers(0, 100, (3, 4))]
    return f, [v.astype(d) for v, d in zip(values, dtypes)]


def broadcast_ranks(backend, shapes, dtypes, extra=lambda t: []):
    """Operands of ``shapes`` (mutually broadcastable, rank 0 to 4) and ``dtypes``."""
    a = nbyoc.var("in0", shapes[0], dtypes[0])
    b = nbyoc.var("in1", shapes[1], dtypes[1])
    t = a * b
    difference = accepted(backend, "subtract", t, a) or [t + a]  # bools cannot subtract
    negated = accepted(backend, "negative", b) or [nbyoc.abs(b)]
    f = _ext(backend, [a, b], [difference[0] * 2, nbyoc.maximum(t, b), *negated, *extra(t)])
    return f, random_inputs(nbyoc.function([a, b], t))


def zero_size(backend, extra=lambda x: []):
    """Arrays with no elements."""
    x = nbyoc.var("in0", (0, 3))
    f = _ext(backend, [x], [x * 2.0, nbyoc.exp(x), *extra(x)])
    return f, [np.zeros((0, 3), np.float32)]


def malformed_saved_modules(type_key):
    """(bytes, message fragment) pairs that loading a saved ``type_key`` module must refuse
    with a LoadError (the format of ``runtime.module.save_function``)."""
    tag = f'"format": "nbyoc-{type_key}"'
    return [
        (b"not json", f"not a saved {type_key} module"),
        (b"[", f"not a saved {type_key} module"),
        (b'{"format": "other"}', "format tag missing"),
        (f'{{{tag}, "version": 99, "options": {{}}}}'.encode(), "not readable here"),
        (f'{{{tag}, "version": true, "options": {{}}}}'.encode(), "not readable here"),
        (f'{{{tag}, "version": 1, "options": []}}'.encode(), "'options' must be"),
        (f'{{{tag}, "version": 1, "options": {{}}, "function": 3}}'.encode(), "an object"),
    ]


# -- nbyoc's own float32 transcendental functions (llvm: runtime.llvm.vecmath, csource: C) --

FLOAT32_SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-30, 2**-12, -(2**-12),
                    9.0, 9.5, -20.0, 88.72, 88.73, -87.3, -103.9, -104.0, -150.0, 1e6, -1e6]  # fmt: skip
VECTORISED_OPS = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sigmoid": lambda v: np.where(
        v >= 0, 1 / (1 + np.exp(-np.abs(v))), np.exp(-np.abs(v)) / (1 + np.exp(-np.abs(v)))
    ),
    "erf": np.vectorize(math.erf, otypes=[np.float64]),
    "log1p": np.log1p,
    "expm1": np.expm1,
}


def ulp_inputs(n: int = 8192) -> np.ndarray:
    """float32 inputs for an ulp check: a dense range, every binade of positive and
    negative numbers (subnormals included) and the special values."""
    tiny = np.geomspace(1e-45, 3e38, 2048)
    dense = np.linspace(-104, 89, n - 2 * len(tiny) - len(FLOAT32_SPECIALS))
    return np.concatenate([dense, tiny, -tiny, FLOAT32_SPECIALS]).astype(np.float32)


def assert_within_ulp(op: str, data: np.ndarray, got: np.ndarray, bound: float) -> None:
    """``got`` = op(``data``) within ``bound`` ulp of float64 truth rounded to float32,
    with NaN, inf, overflow and signed zeros exactly as the rounded truth."""
    with np.errstate(all="ignore"):
        truth = VECTORISED_OPS[op](data.astype(np.float64))
        rounded = truth.astype(np.float32)
    finite = np.isfinite(rounded)
    ulp = np.maximum(np.spacing(np.abs(rounded[finite])), np.float32(2.0**-149))
    errors = np.abs(got[finite] - truth[finite]) / ulp.astype(np.float64)
    assert errors.max() <= bound, (data[finite][np.argmax(errors)], errors.max())
    np.testing.assert_array_equal(got[~finite], rounded[~finite])  # NaN, inf, overflow
    assert np.array_equal(np.signbit(got[rounded == 0]), np.signbit(rounded[rounded == 0]))
