"""Hypothesis strategies: random well-typed graphs and matching input arrays.

A graph starts from a few parameters whose shapes all broadcast to one base
shape, then grows by applying random ops to earlier values (so it is a DAG
with sharing), and returns one to three of its values.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import NbyocTypeError

DTYPES = list(nbyoc.DTYPES)
#: The elementwise ops every backend's conformance cases run (tests/codegen/conformance.py).
ELEMENTWISE_BINARY = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "power",
    "floor_divide",
    "mod",
    "fmod",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
]
ELEMENTWISE_UNARY = [
    "negative",
    "abs",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "relu",
    "floor",
    "ceil",
    "round",
    "sign",
    "reciprocal",
    "sin",
    "cos",
    "erf",
    "isnan",
    "isinf",
    "logical_not",
]
#: The ops random graphs draw from: those lists less ops that add run time but no new
#: kind of case there (power: integers refuse negative exponents; the other
#: comparisons, logic ops and transcendental functions behave like the ones kept).
LEFT_OUT = {"power", "fmod", "equal", "not_equal", "less_equal", "greater", "logical_or",
            "logical_xor", "log", "sqrt", "ceil", "reciprocal", "cos", "erf", "isinf"}  # fmt: skip
BINARY = [op for op in ELEMENTWISE_BINARY if op not in LEFT_OUT]
UNARY = [op for op in ELEMENTWISE_UNARY if op not in LEFT_OUT]
#: Casts whose result every backend defines alike (no float -> integer: out of range, C
#: leaves it undefined).
SAFE_CASTS = ["bool", "float32", "float64"]


@st.composite
def shapes(draw, max_rank: int = 3, max_side: int = 4):
    return tuple(draw(st.lists(st.integers(1, max_side), max_size=max_rank)))


@st.composite
def graphs(draw, max_params: int = 4, max_nodes: int = 8, dtypes=None, min_nodes: int = 1):
    """A random ``nbyoc.Function`` built through the public builder API, with
    ``min_nodes`` to ``max_nodes`` op calls (fewer if every extra draw failed to type)."""
    dtypes = dtypes or DTYPES
    base = draw(shapes())
    params = []
    for i in range(draw(st.integers(1, max_params))):
        # Each parameter's shape broadcasts to ``base``: drop leading axes, set some to 1.
        rank = draw(st.integers(0, len(base)))
        shape = tuple(d if draw(st.booleans()) else 1 for d in base[len(base) - rank :])
        params.append(nbyoc.var(f"p{i}", shape, draw(st.sampled_from(dtypes))))
    values = list(params)
    wanted = draw(st.integers(min_nodes, max_nodes))
    for _ in range(4 * wanted):
        if len(values) - len(params) >= wanted:
            break
        kind = draw(st.sampled_from(["binary", "binary", "unary", "scalar", "reduce", "layout",
                                     "where", "cast", "slice", "softmax", "gather"]))  # fmt: skip
        x = draw(st.sampled_from(values))
        try:
            if kind == "binary":
                y = draw(st.sampled_from(values))
                values.append(nbyoc.call_op(draw(st.sampled_from(BINARY)), x, y))
            elif kind == "unary":
                values.append(nbyoc.call_op(draw(st.sampled_from(UNARY)), x))
            elif kind == "scalar":
                scalar = draw(st.sampled_from([2, -1, 0.5, 3.0]))
                values.append(x * scalar if draw(st.booleans()) else scalar - x)
            elif kind == "reduce" and x.type.ndim:
                op = draw(st.sampled_from([nbyoc.sum, nbyoc.mean, nbyoc.max, nbyoc.min]))
                values.append(op(x, axis=draw(st.integers(0, x.type.ndim - 1)), keepdims=True))
            elif kind == "layout" and x.type.ndim:
                values.append(nbyoc.transpose(x) if draw(st.booleans()) else nbyoc.reshape(x, -1))
            elif kind == "where":
                y, z = draw(st.sampled_from(values)), draw(st.sampled_from(values))
                values.append(nbyoc.where(nbyoc.less(x, y), y, z))
            elif kind == "cast":
                values.append(nbyoc.cast(x, draw(st.sampled_from(SAFE_CASTS))))
            elif kind == "slice" and x.type.ndim:
                values.append(x[::-1] if draw(st.booleans()) else x[..., 1:])
            elif kind == "softmax" and x.type.ndim and np.dtype(x.type.dtype).kind == "f":
                values.append(nbyoc.softmax(x, axis=-1))
            elif kind == "gather" and x.type.ndim and x.type.size:  # an axis with indices
                axis = draw(st.integers(0, x.type.ndim - 1))
                size = x.type.shape[axis]
                picks = draw(st.lists(st.integers(-size, size - 1), min_size=1, max_size=4))
                values.append(nbyoc.gather(x, np.array(picks, np.int64), axis))
        except NbyocTypeError:
            pass  # the drawn operands do not fit together; skip this step
    computed = values[len(params) :] or values
    outputs = draw(st.lists(st.sampled_from(computed), min_size=1, max_size=3))
    return nbyoc.function(params, outputs[0] if len(outputs) == 1 else outputs)


def random_inputs(func, seed: int = 0) -> list[np.ndarray]:
    """Arrays for ``func``'s parameters: small values, so nothing overflows."""
    rng = np.random.default_rng(seed)
    arrays = []
    for p in func.params:
        t = p.type
        kind = np.dtype(t.dtype).kind
        if kind in "biu":  # bool: 0 and 1; unsigned: 0 to 5
            low, high = {"b": (0, 2), "u": (0, 6)}.get(kind, (-5, 6))
            arrays.append(rng.integers(low, high, size=t.shape).astype(t.dtype))
        else:
            arrays.append(rng.uniform(-2, 2, size=t.shape).astype(t.dtype))
    return arrays


def assert_same_results(actual, expected) -> None:
    """Outputs agree in structure, dtype, shape and value (NaNs equal)."""
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same_results(a, e)
        return
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)
