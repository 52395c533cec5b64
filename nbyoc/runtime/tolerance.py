"""How far a backend's result may be from the host's, element by element: a
first-order forward error bound propagated through the graph from the host's values.

Every float op rounds its result (a few ulps of its dtype: transcendental functions
are not exactly rounded, and a backend may sum in another order) and passes on the
errors of its operands scaled by how much it amplifies them there (``exp`` by its
result, ``multiply`` by the other operand, ``divide`` by the inverse square of the
divisor; a sum adds its own rounding per element). Ops that only move elements
(reshape, slice, gather, concatenate, ...) move the bounds with them: the bound of
a result is computed by the op itself, on the bounds of its operands. So a bound
follows from the computation (depth, magnitudes, each op's conditioning), never
from a machine.

A recurrent op (lstm, gru, rnn) is replayed step by step with its bounds
(``tolerance_recurrent``). An op the model does not know is what its caller says
(``unknown``); with ``unknown=ESTIMATE`` (what ``Executable.verify`` uses), an op defined
by a decomposition (gelu, the norms, the global pools) is bounded through it, and any
other (pools, resize, scatter) by a norm-wise estimate.

Ops whose result jumps (comparisons, floor, round, sign, casts to integers or bool,
a ``where`` on a number, argmax) are exact at an element whose inputs lie farther
from the jump than their bounds; elsewhere the element is *uncertain* (bound
``inf``), and so is every element computed from it: tests skip those elements.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (3,))
>>> f = nbyoc.function([x], [nbyoc.exp(nbyoc.exp(x)), nbyoc.floor(x * 0.1)])
>>> twice, floor = error_bounds(f, [np.array([0.0, 1.0, 4.0], np.float32)])
>>> bool(1e-6 < twice[2] / np.exp(np.exp(4.0)) < 1e-3), floor.tolist()
(True, [0.0, 0.0, 0.0])
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..ir.dtypes import dtype_info
from ..ir.nodes import Call, Constant, Function, Tuple, TupleGetItem, Var
from ..ir.op import get_op
from ..ir.ops.recurrent import CELLS
from ..ir.traversal import post_order
from .host import HostFunction
from .tolerance_recurrent import recurrent_bound

#: ulps an op's own rounding may be off by, with room for both sides.
ULPS_PER_OP = 4


def _f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _ulp(dtype) -> float:
    info = dtype_info(dtype)  # (bfloat16's NumPy kind is "V": its record knows it)
    return float(ml_dtypes.finfo(info.numpy).eps) if info.is_float else 0.0


#: op -> the factor by which it scales each operand's error at each element:
#: f(*operands, result) -> one array (or number) per operand, all as float64.
GAINS = {
    "add": lambda a, b, _: (1.0, 1.0),
    "subtract": lambda a, b, _: (1.0, 1.0),
    "maximum": lambda a, b, _: (1.0, 1.0),
    "minimum": lambda a, b, _: (1.0, 1.0),
    "multiply": lambda a, b, _: (np.abs(_f64(b)), np.abs(_f64(a))),
    "divide": lambda a, b, _: (1 / np.abs(_f64(b)), np.abs(_f64(a) / _f64(b) ** 2)),
    "power": lambda a, b, out: (
        np.abs(_f64(b) * _f64(out) / _f64(a)),
        np.abs(np.log(np.abs(_f64(a))) * _f64(out)),
    ),
    "fmod": lambda a, b, _: (1.0, np.abs(_f64(a) / _f64(b))),
    "negative": lambda x, _: (1.0,),
    "abs": lambda x, _: (1.0,),
    "relu": lambda x, _: (1.0,),
    "clip": lambda x, _: (1.0,),
    "exp": lambda x, out: (np.abs(_f64(out)),),
    "log": lambda x, _: (1 / np.abs(_f64(x)),),
    "sqrt": lambda x, out: (0.5 / np.abs(_f64(out)),),
    "reciprocal": lambda x, out: (_f64(out) ** 2,),
    "tanh": lambda x, _: (1.0,),
    "sigmoid": lambda x, _: (0.25,),
    "sin": lambda x, _: (1.0,),
    "cos": lambda x, _: (1.0,),
    "erf": lambda x, _: (2 / math.sqrt(math.pi),),
    "log1p": lambda x, _: (1 / np.abs(1 + _f64(x)),),
    "expm1": lambda x, out: (np.abs(_f64(out) + 1),),
}
#: Ops that only move or repeat elements: the op itself moves the bounds.
MOVES = {"reshape", "transpose", "slice", "gather", "concatenate", "broadcast_to", "squeeze",
         "unsqueeze", "flatten", "expand", "tile", "identity"}  # fmt: skip


#: Ops that are sums of products of their first two operands (plus a third added once,
#: a bias): op -> how many products each result element sums, from the operands and
#: attributes. Their bound is the op itself applied to magnitudes and bounds.
BILINEAR = {
    "matmul": lambda a, b, attrs: a.shape[-1],
    "gemm": lambda a, b, attrs: a.shape[0 if attrs.get("trans_a") else 1],
    "conv": lambda x, w, attrs: math.prod(w.shape[1:]),
    "conv_transpose": lambda x, w, attrs: w.shape[0] * math.prod(w.shape[2:]),
}


def _to_integer(v):
    return np.minimum(v - np.floor(v), np.ceil(v) - v)


#: Ops whose result jumps: op -> each element's distance to the nearest jump.
JUMPS = {
    "floor": _to_integer,
    "ceil": _to_integer,
    "round": lambda v: np.abs(np.abs(v - np.floor(v)) - 0.5),
    "sign": np.abs,
    "logical_not": np.abs,
    "logical_and": np.abs,
    "logical_or": np.abs,
    "logical_xor": np.abs,
    "isnan": lambda v: np.full(v.shape, np.inf),
    "isinf": lambda v: np.full(v.shape, np.inf),
}
COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


#: ``unknown=ESTIMATE``: bound an op the model does not know through its decomposition,
#: else estimate it norm-wise (``_estimate``).
ESTIMATE = "estimate"


def error_bounds(func, args, unknown: float | str = np.inf) -> list[np.ndarray]:
    """Per output of ``func`` on ``args``: each element's largest absolute difference
    from the host's result that rounding allows (0: exact; ``inf``: uncertain).

    ``unknown``: the bound of an op this model does not know (GELU, the norms, pools,
    ...): ``inf`` (uncertain: a caller with nothing else to go by skips the element),
    or 0 for a caller whose own fixed tolerance then applies there, or ``ESTIMATE``:
    through the op's decomposition if it has one, else norm-wise (the largest bound of
    its operands plus roundings of the largest magnitude it reads or makes, right for
    ops that move, pick or average their operands). Past an uncertain operand it is
    ``inf`` either way.

    >>> import nbyoc
    >>> x, w = nbyoc.var("x", (2, 3)), nbyoc.var("w", (3, 2))
    >>> f = nbyoc.function([x, w], [x @ w, nbyoc.gelu(x @ w)])
    >>> args = [np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)]
    >>> product, gelu = error_bounds(f, args)
    >>> bool(0 < product.max() < 1e-5), float(gelu.max())
    (True, inf)
    >>> float(error_bounds(f, args, unknown=0.0)[1].max())
    0.0
    >>> bool(0 < error_bounds(f, args, unknown=ESTIMATE)[1].max() < 1e-4)
    True
    """
    return _bounds(func, args, [np.zeros(p.type.shape) for p in func.params], unknown)


def _bounds(func, args, arg_bounds, unknown) -> list[np.ndarray]:
    """``error_bounds`` for arguments that are themselves off by ``arg_bounds``."""
    nodes = [n for n in post_order([func.body]) if isinstance(n, Call)]
    with np.errstate(all="ignore"):
        results = HostFunction(Function(list(func.params), Tuple(nodes or list(func.params))))(
            *args
        )
    value = dict(zip(map(id, nodes), results if isinstance(results, tuple) else (results,)))
    value.update({id(p): a for p, a in zip(func.params, args)})
    bound: dict[int, object] = {id(p): b for p, b in zip(func.params, arg_bounds)}
    for node in post_order([func.body]):
        if isinstance(node, Var):
            bound.setdefault(id(node), np.zeros(node.type.shape))
        elif isinstance(node, Constant):
            value[id(node)] = node.data
            bound[id(node)] = np.zeros(node.type.shape)
        elif isinstance(node, Tuple):
            bound[id(node)] = tuple(bound[id(f)] for f in node.fields)
        elif isinstance(node, TupleGetItem):
            bound[id(node)] = bound[id(node.tuple_value)][node.index]
        else:
            with np.errstate(all="ignore"):
                b = np.broadcast_to(_call_bound(node, value, bound, unknown), node.type.shape)
            bound[id(node)] = np.where(np.isnan(b), np.inf, b)
    body = func.body
    outputs = list(body.fields) if isinstance(body, Tuple) else [body]
    return [bound[id(o)] for o in outputs]


def _call_bound(node, value, bound, unknown):
    op, attrs = node.op.name, dict(node.attrs)
    operands = [value[id(a)] for a in node.args]
    errors = [np.broadcast_to(bound[id(a)], a.type.shape) for a in node.args]
    out = _f64(value[id(node)])
    # its own rounding; a result that is inf or NaN must be the same on both sides
    rounding = ULPS_PER_OP * _ulp(node.type.dtype) * np.where(np.isfinite(out), np.abs(out), 0)
    if op in MOVES or op == "pad":
        if op == "gather":  # (the indices are values, not data with bounds)
            return node.op.reference(errors[0], operands[1], **attrs)
        if op == "pad":  # padding is exact
            attrs["value"] = 0.0
        return node.op.reference(*errors, **attrs)
    if op in ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "softmax", "log_softmax"):
        return _reduction_bound(op, attrs, operands, errors, out, node.type.dtype, rounding)
    uncertain = _may_jump(node, operands, errors)
    if uncertain is not None:
        if op == "where":  # the chosen branch's bound, unless the condition may flip
            chosen = np.where(_f64(operands[0]) != 0, errors[1], errors[2])
            return np.where(uncertain, np.inf, chosen + rounding)
        return np.where(uncertain, np.inf, rounding)
    if op == "cast":
        return errors[0] + rounding
    if op in BILINEAR:
        return _bilinear_bound(node, attrs, operands, errors)
    if op in CELLS:  # a recurrence, replayed with bounds (``tolerance_recurrent``)
        return recurrent_bound(node, operands, errors)
    gains = GAINS.get(op)
    if gains is None:
        # An op this model does not know (see ``error_bounds``); uncertain past an
        # uncertain operand.
        if any(np.isinf(e).any() for e in errors):
            return np.full(node.type.shape, np.inf)
        if unknown == ESTIMATE:
            return _estimate(node, attrs, operands, errors, out)
        return np.full(node.type.shape, unknown)
    total = rounding
    for gain, error in zip(gains(*operands, out), errors):
        total = total + np.where(error > 0, gain * error, 0)
    return total


def _estimate(node, attrs, operands, errors, out):
    """The bound of an op the model does not know: through its decomposition when it
    has one, or a composite's body (their own ops' bounds, on its operands' values and
    bounds), else norm-wise:
    the largest bound of its operands, plus a rounding for each operand element that
    may meet in one result element (as a sum's) of the largest magnitude it reads or
    makes. Right for ops that move, pick or average elements (pools, resize, scatter);
    an estimate for any other."""
    if node.op.kind == "composite":  # (its body is what it computes, on its operands)
        (bound,) = _bounds(attrs["body"], operands, errors, ESTIMATE)
        return bound
    if node.op.decompose is not None:
        params = [Var(f"in{i}", a.type) for i, a in enumerate(node.args)]
        (bound,) = _bounds(Function(params, node.op.decompose(*params, **attrs)),
                           operands, errors, ESTIMATE)  # fmt: skip
        return bound
    worst = max((float(e.max()) for e in errors if e.size), default=0.0)
    magnitudes = [np.abs(_f64(v)) for v in (*operands, out)]
    scale = max((float(m[np.isfinite(m)].max(initial=0)) for m in magnitudes), default=0.0)
    terms = max(1, math.ceil(sum(np.size(v) for v in operands) / max(1, out.size)))
    return np.full(out.shape, worst + (terms + ULPS_PER_OP) * _ulp(node.type.dtype) * scale)


def _bilinear_bound(node, attrs, operands, errors):
    """A sum of K products per element, each operand off by its bound: the op applied
    to (bound, |other|) and (|first|, bound), plus K roundings of each product's size
    (a backend may sum in any order, and fuse multiply-adds)."""
    reference = node.op.reference
    if "alpha" in attrs:  # gemm: the bound scales with their magnitudes
        attrs = {**attrs, "alpha": abs(attrs["alpha"]), "beta": abs(attrs["beta"])}
    magnitudes = [np.abs(_f64(v)) for v in operands]
    bias = [errors[2]] if len(operands) > 2 else []
    zero = [np.zeros_like(magnitudes[2])] if len(operands) > 2 else []
    through_first = reference(errors[0], magnitudes[1], *bias, **attrs)
    through_second = reference(magnitudes[0], errors[1], *zero, **attrs)
    size = reference(*magnitudes, **attrs)
    k = BILINEAR[node.op.name](operands[0], operands[1], attrs)
    rounding = (k + ULPS_PER_OP) * _ulp(node.type.dtype) * size
    return through_first + through_second + rounding


def _may_jump(node, operands, errors):
    """For an op whose result jumps: where an element's inputs lie within their bounds
    of a jump (for a comparison: its sides within their bounds of each other); None
    for other ops."""
    op = node.op.name
    values = [_f64(v) for v in operands]

    def near(distance, v, error):
        return (error > 0) & (distance(v) <= error)

    if op == "cast":
        to = dtype_info(node.attrs["to"]).kind
        if to == "float":
            return None
        return near(np.abs if to == "bool" else _to_integer, *values, *errors)
    if op in JUMPS:
        flags = [near(JUMPS[op], v, e) for v, e in zip(values, errors)]
        return np.logical_or.reduce(np.broadcast_arrays(*flags))
    if op in COMPARISONS:
        if node.args[0] is node.args[1]:  # a value against itself: the same either way
            return np.zeros(node.type.shape, bool)
        total = errors[0] + errors[1]
        return (total > 0) & (np.abs(values[0] - values[1]) <= total)
    if op in ("floor_divide", "mod"):  # any error in an operand may move the result
        return (errors[0] + errors[1]) > 0
    if op == "where":
        return near(np.abs, values[0], errors[0])
    return None


def _reduction_bound(op, attrs, operands, errors, out, dtype, rounding):
    """Reductions over ``attrs["axis"]``: sums add their operands' bounds and a rounding
    per element; max and min keep the worst bound; argmax and argmin are uncertain
    wherever an element they compare has any error; softmax at most doubles the worst
    bound in its row (its result is at most 1)."""
    error, x = errors[0], _f64(operands[0])
    if op in ("softmax", "log_softmax"):
        keep = {"axis": attrs["axis"], "keepdims": True}
        worst = get_op("max").reference(error, **keep) if error.size else error
        return 2 * worst + rounding + (2 * worst if op == "log_softmax" else 0)
    reduce_attrs = {"axis": attrs["axis"], "keepdims": attrs["keepdims"]}
    total = get_op("sum").reference
    if op in ("sum", "mean"):
        count = max(1, x.size // max(1, out.size))
        magnitude = total(np.abs(x), **reduce_attrs)
        bound = total(error, **reduce_attrs) + count * _ulp(dtype) * magnitude + rounding
        return bound / count if op == "mean" else bound
    if op in ("max", "min"):
        return (get_op("max").reference(error, **reduce_attrs) if error.size else 0) + rounding
    if op in ("argmax", "argmin"):
        any_error = total(error, **reduce_attrs) if error.size else np.zeros(out.shape)
        return np.where(any_error > 0, np.inf, 0.0)
    # prod: relative errors add up over the factors
    with np.errstate(all="ignore"):
        relative = total(np.where(error > 0, error / np.abs(x), 0), **reduce_attrs)
    count = max(1, x.size // max(1, out.size))
    return np.abs(out) * (relative + count * ULPS_PER_OP * _ulp(dtype)) + rounding


def beyond(got, expected, bound) -> np.ndarray:
    """Where ``got`` lies outside ``bound`` of ``expected``: for a float, farther than its
    bound (NaN only where NaN, the same infinities); for an integer or bool, different
    where its bound is finite. Uncertain elements (bound ``inf``) are never beyond.

    >>> beyond(np.array([1.0, 2.5, np.nan]), np.array([1.1, 2.0, np.nan]), np.full(3, 0.2))
    array([False,  True, False])
    >>> beyond(np.array([1, 3]), np.array([1, 2]), np.array([0.0, np.inf]))
    array([False, False])
    """
    got, expected = np.asarray(got), np.asarray(expected)
    checked = np.isfinite(bound)
    if not dtype_info(got.dtype).is_float:
        return checked & (got != expected)
    g, e = got.astype(np.float64), expected.astype(np.float64)  # (bfloat16 too: exactly)
    same = (g == e) | (np.isnan(g) & np.isnan(e))
    with np.errstate(all="ignore"):
        close = np.abs(g - e) <= bound
    return checked & ~(same | close)
