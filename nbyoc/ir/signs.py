"""Signs known from a graph's structure alone: values that are never positive, or never
negative, whatever the inputs (NaN aside). A codegen uses them to pick a cheaper
function that is exact on that half of the line (``exp`` of ``x - max(x)`` in a
softmax never overflows, so it needs no overflow handling).

The questions look a few nodes deep at most (``MAX_DEPTH``), so asking is cheap
on any graph; beyond that depth the answer is "not known". Only float values are
answered for: integers wrap (``abs`` of int8 -128 is -128).

>>> import nbyoc
>>> x = nbyoc.var("x", (4, 8))
>>> nonpositive(x - nbyoc.max(x, axis=1, keepdims=True)), nonpositive(x - 1.0)
(True, False)
>>> nonpositive(-nbyoc.abs(x)), nonnegative(nbyoc.exp(x) + nbyoc.relu(x))
(True, True)
"""

from __future__ import annotations

import numpy as np

from .dtypes import dtype_info
from .nodes import Call, Constant, Expr
from .op import Op
from .types import TensorType

#: How many nodes deep a question looks.
MAX_DEPTH = 4
#: Ops whose result is never negative, whatever their operands.
NONNEGATIVE_OPS = frozenset({"abs", "relu", "exp", "sigmoid", "sqrt", "softmax", "square"})


def nonpositive(expr: Expr, depth: int = MAX_DEPTH) -> bool:
    """Is every element of ``expr`` ``<= 0`` or NaN, for every input?"""
    if not _float(expr):
        return False
    if isinstance(expr, Constant):
        return _all_data(expr, lambda d: d <= 0)
    if depth == 0 or not _op_call(expr):
        return False
    name, args = expr.op.name, expr.args
    if name == "negative":
        return nonnegative(args[0], depth - 1)
    if name == "subtract":
        return _minus_its_maximum(args[0], args[1]) or (
            nonpositive(args[0], depth - 1) and nonnegative(args[1], depth - 1)
        )
    if name == "add":
        return all(nonpositive(a, depth - 1) for a in args)
    if name == "multiply":
        left, right = args
        return (nonpositive(left, depth - 1) and nonnegative(right, depth - 1)) or (
            nonnegative(left, depth - 1) and nonpositive(right, depth - 1)
        )
    if name == "minimum":
        return any(nonpositive(a, depth - 1) for a in args)
    return False


def nonnegative(expr: Expr, depth: int = MAX_DEPTH) -> bool:
    """Is every element of ``expr`` ``>= 0`` or NaN, for every input?"""
    if not _float(expr):
        return False
    if isinstance(expr, Constant):
        return _all_data(expr, lambda d: d >= 0)
    if depth == 0 or not _op_call(expr):
        return False
    name, args = expr.op.name, expr.args
    if name in NONNEGATIVE_OPS:
        return True
    if name == "negative":
        return nonpositive(args[0], depth - 1)
    if name in ("add", "maximum"):
        test = all if name == "add" else any
        return test(nonnegative(a, depth - 1) for a in args)
    if name == "multiply":
        left, right = args
        return left is right or (
            all(nonnegative(a, depth - 1) for a in args)
            or all(nonpositive(a, depth - 1) for a in args)
        )
    return False


def _minus_its_maximum(x: Expr, m: Expr) -> bool:
    """Is ``x - m`` elementwise ``x`` less the maximum of the elements it is compared
    with: ``m = max(x, axes, keepdims=True)``, broadcast back over the reduced axes?"""
    if not (_op_call(m) and m.op.name == "max" and m.args[0] is x):
        return False
    # keepdims keeps each element lined up with its own maximum when broadcast; without
    # it, the reduced shape would broadcast against the trailing axes instead.
    return bool(m.attrs["keepdims"]) and m.type.ndim == x.type.ndim


def _float(expr: Expr) -> bool:
    return isinstance(expr.type, TensorType) and dtype_info(expr.type.dtype).is_float


def _op_call(expr: Expr) -> bool:
    return isinstance(expr, Call) and isinstance(expr.op, Op)


def _all_data(constant: Constant, test) -> bool:
    data = np.asarray(constant.data)
    if data.dtype.kind not in "biuf":
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(test(data) | np.isnan(data.astype(np.float64))))
