"""Hypothesis strategies: random well-typed graphs and matching input arrays.

A graph starts from a few parameters whose shapes all broadcast to one base
shape, then grows by applying random ops to earlier values (so it is a DAG
with sharing), and returns one to three of its values.

Besides the plain kinds of step, graphs draw what adversarial review found bugs
with (issue 35): comparisons and arithmetic of a signed and an unsigned integer
operand, ``where`` with a condition that is not bool, ``clip`` with ``None`` and
non-binding bounds, every kind of op on 0-d tensors, concatenates of many
operands, and outputs that are views (reshape, transpose) of intermediates.
``numpy_function`` turns a graph into the NumPy function a user would write for
it, for ``nbyoc.jit``.
"""

from __future__ import annotations

import inspect

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
#: (the widest twice: int64 and uint64 are where NumPy computes in neither's dtype)
SIGNED = ["int8", "int16", "int32", "int64", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64", "uint64"]
#: What mixed signed/unsigned operands meet: where NumPy computes in neither's dtype.
MIXED_OPS = ["less", "less", "greater_equal", "greater_equal", "equal", "not_equal",
             "maximum", "minimum", "add", "subtract", "multiply"]  # fmt: skip
#: Bounds ``clip`` draws: none, fractional, beyond every integer dtype, ordinary.
CLIP_BOUNDS = [None, None, -3, -0.5, 0, 1, 2.5, 300, -300, 2**70]


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
                                     "where", "cast", "slice", "softmax", "gather", "mixed",
                                     "mixed", "where_any", "clip", "zero_d", "concatenate"]))  # fmt: skip
        x = draw(st.sampled_from(values))
        try:
            if kind in ("mixed", "where_any", "clip", "zero_d", "concatenate"):
                values.append(draw(_adversarial_step(kind, x, values, params)))
                continue
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
    # Mostly values nothing else reads (so that most of the graph is live), sometimes any.
    read = {id(a) for v in computed for a in getattr(v, "args", ())}
    sinks = [v for v in computed if id(v) not in read] or computed
    outputs = draw(st.lists(st.sampled_from(sinks), min_size=1, max_size=3))
    if draw(st.booleans()):
        outputs.append(draw(st.sampled_from(computed)))
    # An output that is a view of an intermediate: its buffer must outlive later stages.
    outputs = [draw(_maybe_a_view(o)) for o in outputs]
    return nbyoc.function(params, outputs[0] if len(outputs) == 1 else outputs)


@st.composite
def _maybe_a_view(draw, value):
    t = value.type
    choice = draw(st.sampled_from(["as is", "as is", "reshape", "transpose"]))
    if choice == "reshape" and t.ndim != 1:
        return nbyoc.reshape(value, -1)
    if choice == "transpose" and t.ndim >= 2:
        return nbyoc.transpose(value)
    return value


@st.composite
def _adversarial_step(draw, kind, x, values, params):
    """One step of the kinds that found bugs (see the module docstring); raises
    NbyocTypeError where the drawn operands do not fit, as the other steps do."""
    if kind == "mixed":
        # From parameters only (their values are small): a signed operand, mostly
        # negative, and an unsigned one (an absolute value), compared or combined.
        a, b = draw(st.sampled_from(params)), draw(st.sampled_from(params))
        signed = nbyoc.cast(a, draw(st.sampled_from(SIGNED))) - 3  # (mostly negative)
        unsigned = nbyoc.cast(nbyoc.abs(nbyoc.cast(b, "int64")), draw(st.sampled_from(UNSIGNED)))
        pair = [signed, unsigned] if draw(st.booleans()) else [unsigned, signed]
        return nbyoc.call_op(draw(st.sampled_from(MIXED_OPS)), *pair)
    if kind == "where_any":  # a condition of any dtype: true where it is non-zero
        y, z = draw(st.sampled_from(values)), draw(st.sampled_from(values))
        return nbyoc.where(x, y, z)
    if kind == "clip":
        low, high = draw(st.sampled_from(CLIP_BOUNDS)), draw(st.sampled_from(CLIP_BOUNDS))
        return nbyoc.clip(x, low, high)
    if kind == "zero_d":
        scalar = (
            x
            if x.type.ndim == 0
            else nbyoc.sum(x)
            if draw(st.booleans())
            else x[(0,) * x.type.ndim]
        )
        return draw(st.sampled_from(_ZERO_D_OPS))(scalar, draw(st.sampled_from(values)))
    # concatenate: up to 12 operands of one type along one axis (x repeated among them)
    if x.type.ndim == 0:
        raise NbyocTypeError("0-d tensors cannot be concatenated")
    alike = [v for v in values if v.type == x.type]
    operands = draw(st.lists(st.sampled_from(alike), min_size=2, max_size=12))
    return nbyoc.concatenate(operands, axis=draw(st.integers(0, x.type.ndim - 1)))


#: Every kind of op on a 0-d operand ``s`` (``other`` is any value, for binary ops).
_ZERO_D_OPS = [
    lambda s, _: nbyoc.argmax(s),
    lambda s, _: nbyoc.argmin(s, keepdims=True),
    lambda s, _: nbyoc.sum(s, keepdims=True),
    lambda s, _: nbyoc.max(s),
    lambda s, _: nbyoc.mean(s),
    lambda s, _: nbyoc.prod(s),
    lambda s, _: nbyoc.negative(s) if s.type.dtype != "bool" else nbyoc.logical_not(s),
    lambda s, _: nbyoc.exp(s),
    lambda s, _: nbyoc.cast(s, "float64"),
    lambda s, _: nbyoc.reshape(s, (1, 1)),
    lambda s, _: nbyoc.transpose(s),
    lambda s, other: nbyoc.where(s, other, s),
    lambda s, _: nbyoc.clip(s, 0, None),
    lambda s, other: nbyoc.call_op("less", s, other),
    lambda s, other: nbyoc.call_op("multiply", other, s),
]


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


class Unspellable(Exception):
    """The graph holds an op NumPy has no function for (``numpy_function``)."""


def _take(x, indices, axis):
    return x[(slice(None),) * axis + (indices,)]


#: How a user writes each op in NumPy, taking the op's operands and attributes.
NUMPY_SPELLING = {
    **{name: getattr(np, name) for name in ELEMENTWISE_BINARY + ELEMENTWISE_UNARY
       if name not in ("sigmoid", "relu", "erf")},
    **{name: getattr(np, name) for name in ("sum", "mean", "max", "min", "prod", "argmax",
                                            "argmin")},
    "cast": lambda x, to: x.astype(to),
    "where": np.where,
    "clip": lambda x, min, max: np.clip(x, min, max),
    "reshape": lambda x, newshape: np.reshape(x, newshape),
    "transpose": lambda x, axes: np.transpose(x, axes),
    "concatenate": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "slice": lambda x, starts, ends, axes, steps: x[
        nbyoc.ir.ops.index.python_slices({"starts": starts, "ends": ends, "steps": steps})],
    "gather": _take,
}  # fmt: skip


def _as_written(node) -> dict:
    """A call's attributes as a user writes them: clip's bounds of an integer tensor as
    ints where they are whole numbers (the IR keeps every bound as a float)."""
    attrs = dict(node.attrs)
    if node.op.name == "clip" and np.dtype(node.args[0].type.dtype).kind in "iu":
        for key in ("min", "max"):
            if attrs[key] is not None and float(attrs[key]).is_integer():
                attrs[key] = int(attrs[key])
    return attrs


def numpy_function(func):
    """The NumPy function of ``func``'s parameters that a user would write for it (for
    ``nbyoc.jit`` to trace); raises ``Unspellable`` if an op has no NumPy function
    (softmax, sigmoid, ...)."""
    from nbyoc.ir.nodes import Call, Constant, Tuple, Var

    nodes = nbyoc.ir.post_order([func.body])
    for node in nodes:
        if isinstance(node, Call) and node.op.name not in NUMPY_SPELLING:
            raise Unspellable(node.op.name)

    def run(*arrays):
        values = {id(p): a for p, a in zip(func.params, arrays)}
        for node in nodes:
            if isinstance(node, Constant):
                values[id(node)] = np.asarray(node.data)
            elif isinstance(node, Call):
                operands = [values[id(a)] for a in node.args]
                values[id(node)] = NUMPY_SPELLING[node.op.name](*operands, **_as_written(node))
            elif isinstance(node, Tuple):
                values[id(node)] = tuple(values[id(f)] for f in node.fields)
            elif not isinstance(node, Var):
                raise Unspellable(type(node).__name__)
        return values[id(func.body)]

    run.__signature__ = inspect.Signature(
        [inspect.Parameter(f"p{k}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for k in range(len(func.params))]
    )  # fmt: skip
    return run
