"""Hypothesis strategies: random well-typed graphs and matching input arrays, for
the tests of nbyoc and of a backend (``pip install 'nbyoc[testing]'``).

A graph starts from a few parameters whose shapes all broadcast to one base
shape, then grows by applying random ops to earlier values (so it is a DAG
with sharing), and returns one to three of its values.

Besides the plain kinds of step, graphs draw what adversarial review found bugs
with (issue 35): comparisons and arithmetic of a signed and an unsigned integer
operand, ``where`` with a condition that is not bool, ``clip`` with ``None`` and
non-binding bounds, every kind of op on 0-d tensors, concatenates of many
operands, and outputs that are views (reshape, transpose) of intermediates.

>>> import nbyoc
>>> from hypothesis import given, seed, settings
>>> @seed(0)
... @settings(max_examples=5, deadline=None, database=None)
... @given(graphs(max_nodes=3))
... def reads_back_and_runs(f):
...     g = nbyoc.parse(str(f))
...     assert nbyoc.structural_equal(f, g)
...     args = random_inputs(f)
...     assert_same_results(nbyoc.compile(g, "host")(*args), nbyoc.compile(f, "host")(*args))
>>> reads_back_and_runs()
"""

from __future__ import annotations

import numpy as np

import nbyoc

from ..errors import MissingDependencyError, NbyocTypeError
from .inputs import assert_same_results, random_inputs

try:
    from hypothesis import strategies as st
except ImportError:  # (an optional dependency: the rest of nbyoc.testing runs without it)
    raise MissingDependencyError(
        "nbyoc.testing.strategies needs hypothesis; install it with pip install 'nbyoc[testing]'"
    ) from None

__all__ = [
    "BINARY",
    "DTYPES",
    "ELEMENTWISE_BINARY",
    "ELEMENTWISE_UNARY",
    "UNARY",
    "assert_same_results",
    "graphs",
    "op_cases",
    "random_inputs",
    "shapes",
]

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


#: The kinds of step a graph draws from (twice: drawn twice as often).
STEP_KINDS = ["binary", "binary", "unary", "scalar", "reduce", "layout", "where", "cast",
              "slice", "softmax", "gather", "mixed", "mixed", "where_any", "clip", "zero_d",
              "concatenate"]  # fmt: skip


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
        kind = draw(st.sampled_from(STEP_KINDS))
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


@st.composite
def op_cases(draw, op: str, dtype: str, context: bool = True):
    """An ``OpCase`` (``nbyoc.testing.cases``): a small graph around one call of ``op``
    on ``dtype`` operands, its shapes and attributes drawn by hypothesis (so it explores
    and shrinks them); what ``nbyoc.testing.check_backend`` runs.

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=3, database=None)
    ... @given(op_cases("matmul", "float64"))
    ... def a_matmul(case):
    ...     assert case.call.op.name == "matmul" and case.call.type.dtype == "float64"
    >>> a_matmul()
    """
    from hypothesis import reject

    from .cases import op_case
    from .choices import DrawnChoices

    try:
        return op_case(op, dtype, DrawnChoices(draw), context)
    except NbyocTypeError:
        reject()  # (what was drawn does not type: the op refuses the dtype, or the sizes)
