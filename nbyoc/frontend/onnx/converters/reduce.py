"""ONNX reductions: ReduceSum/Mean/Max/Min/Prod and the composite ones (L1, L2,
SumSquare, LogSum, LogSumExp), ArgMax and ArgMin.

The axes are an attribute until ReduceSum's opset 13 and the others' opset 18, an
input after (so the converters are versioned); ``keepdims`` defaults to 1, and
``noop_with_empty_axes`` makes empty axes mean "none" instead of "all". ONNX keeps
the input's dtype where NumPy would widen (an int32 sum is int64 in NumPy).
"""

from __future__ import annotations

import numpy as np

from ....ir.builder import call_op
from ..node import Node
from . import converter


def _lowest(dtype: np.dtype):
    return False if dtype.kind == "b" else -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype: np.dtype):
    return True if dtype.kind == "b" else np.inf if dtype.kind == "f" else np.iinfo(dtype).max


#: The reductions ONNX defines over nothing, and their value there.
EMPTY = {"max": _lowest, "min": _highest}

#: ONNX reduction -> (nbyoc op, the opset whose axes became an input).
SIMPLE = {
    "ReduceSum": ("sum", 13),
    "ReduceMean": ("mean", 18),
    "ReduceMax": ("max", 18),
    "ReduceMin": ("min", 18),
    "ReduceProd": ("prod", 18),
}


def _reduce(node: Node, nbyoc_op: str, x, axes_from_input: bool):
    if axes_from_input:
        axes = node.ints(1, "axes") if node.has(1) else ()
    else:
        axes = tuple(node.attr("axes", ()))
    if not axes and node.attr("noop_with_empty_axes", 0):
        return call_op("identity", x)
    keepdims = bool(node.attr("keepdims", 1))
    rank = x.type.ndim
    reduced = {node.axis(a, rank, "axes entry") for a in axes} if axes else set(range(rank))
    if nbyoc_op in EMPTY and any(x.type.shape[a] == 0 for a in reduced):
        # ONNX defines the max and min of nothing (NumPy refuses): -inf and inf, or the
        # integer dtype's extremes, False and True for bools.
        shape = [1 if a in reduced else n for a, n in enumerate(x.type.shape)]
        if not keepdims:
            shape = [n for a, n in enumerate(shape) if a not in reduced]
        node.computing(shape, x.type.dtype)
        return np.full(shape, EMPTY[nbyoc_op](np.dtype(x.type.dtype)), x.type.dtype)
    result = call_op(nbyoc_op, x, axis=axes or None, keepdims=keepdims)
    if result.type.dtype != x.type.dtype:
        result = call_op("cast", result, to=x.type.dtype)
    return result


def _simple(onnx_op: str, nbyoc_op: str, since: int):
    def by_attribute(node: Node):
        return _reduce(node, nbyoc_op, node.expr(0), False)

    def by_input(node: Node):
        return _reduce(node, nbyoc_op, node.expr(0), True)

    by_attribute.__name__ = f"{nbyoc_op}_axes_attribute"
    by_input.__name__ = f"{nbyoc_op}_axes_input"
    converter(onnx_op)(by_attribute)
    converter(onnx_op, since=since)(by_input)


for _onnx_op, (_nbyoc_op, _since) in SIMPLE.items():
    _simple(_onnx_op, _nbyoc_op, _since)


def _composite(onnx_op: str, before, reduce_op: str, after):
    """``after(reduce_op(before(x)))``, the axes as ReduceX's (an input from 18)."""

    def convert(node: Node, from_input: bool):
        x = node.expr(0)
        result = _reduce(node, reduce_op, before(x), from_input)
        return after(result) if after else result

    converter(onnx_op)(lambda node: convert(node, False))
    converter(onnx_op, since=18)(lambda node: convert(node, True))


_composite("ReduceL1", lambda x: call_op("abs", x), "sum", None)
_composite("ReduceSumSquare", lambda x: call_op("multiply", x, x), "sum", None)
_composite("ReduceL2", lambda x: call_op("multiply", x, x), "sum", lambda s: call_op("sqrt", s))
_composite("ReduceLogSum", lambda x: x, "sum", lambda s: call_op("log", s))


def _log_sum_exp(node: Node, from_input: bool):
    # Shifted by the maximum, so large inputs do not overflow (ONNX's reference
    # computes log(sum(exp(x))) directly; the two agree wherever that one is finite).
    x = node.expr(0)
    if x.type.size == 0:  # nothing to shift by: the log of an empty sum is -inf, as ONNX's
        return call_op("log", _reduce(node, "sum", x, from_input))
    keep = {**node.attrs, "keepdims": 1}
    kept = Node(node.op_type, node.name, node.inputs, node.input_names, keep, node.opset)
    peak = _reduce(kept, "max", x, from_input)
    peak = call_op("where", call_op("isinf", peak), call_op("multiply", peak, 0.0), peak)
    total = _reduce(node, "sum", call_op("exp", call_op("subtract", x, peak)), from_input)
    shift = peak if node.attr("keepdims", 1) else _reduce(node, "max", peak, from_input)
    return call_op("add", call_op("log", total), shift)


converter("ReduceLogSumExp")(lambda node: _log_sum_exp(node, False))
converter("ReduceLogSumExp", since=18)(lambda node: _log_sum_exp(node, True))


def _arg(nbyoc_op: str):
    def convert(node: Node):
        x = node.expr(0)
        axis = node.attr("axis", 0)
        keepdims = bool(node.attr("keepdims", 1))
        if not node.attr("select_last_index", 0):
            return call_op(nbyoc_op, x, axis=axis, keepdims=keepdims)
        # The last extreme: the first one of the reversed axis, counted from the end.
        axis = node.axis(axis, x.type.ndim)
        flipped = x[(slice(None),) * axis + (slice(None, None, -1),)]
        first = call_op(nbyoc_op, flipped, axis=axis, keepdims=keepdims)
        return call_op("subtract", x.type.shape[axis] - 1, first)

    convert.__name__ = nbyoc_op
    return convert


converter("ArgMax")(_arg("argmax"))
converter("ArgMin")(_arg("argmin"))
