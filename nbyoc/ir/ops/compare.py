"""Comparisons, logical ops, ``where`` and the float classifiers: elementwise ops whose
result is ``bool`` (``where`` aside), with NumPy's broadcasting and dtypes.

Operands are compared in the dtype NumPy compares them in (``uint8 < int8`` in
int16, so -1 < 255 is True), and NaN compares as NumPy's does (unequal to all).

>>> import nbyoc
>>> x, y = nbyoc.var("x", (3,), "uint8"), nbyoc.var("y", (3,), "int8")
>>> (x < y).type, nbyoc.where(x < y, x, y).type
(Tensor[(3,), bool], Tensor[(3,), int16])
"""

from __future__ import annotations

import numpy as np

from ..annotations import Operand
from ..builder import call_op
from ..dtypes import promote
from ..nodes import Expr
from .elementwise import register_elementwise

# name -> (NumPy reference, summary)
COMPARE_OPS = {
    "equal": (np.equal, "Elementwise ``lhs == rhs``"),
    "not_equal": (np.not_equal, "Elementwise ``lhs != rhs`` (True where either is NaN)"),
    "less": (np.less, "Elementwise ``lhs < rhs``"),
    "less_equal": (np.less_equal, "Elementwise ``lhs <= rhs``"),
    "greater": (np.greater, "Elementwise ``lhs > rhs``"),
    "greater_equal": (np.greater_equal, "Elementwise ``lhs >= rhs``"),
    "logical_and": (np.logical_and, "Elementwise logical and of the operands' truth values"),
    "logical_or": (np.logical_or, "Elementwise logical or of the operands' truth values"),
    "logical_xor": (np.logical_xor, "Elementwise logical exclusive or of the truth values"),
}
UNARY_PREDICATES = {
    "logical_not": (np.logical_not, "Elementwise logical not (True where x is 0)"),
    "isnan": (np.isnan, "Elementwise test for NaN (False for integers)"),
    "isinf": (np.isinf, "Elementwise test for +inf or -inf (False for integers)"),
}


def _where_loop(dtypes, attrs):
    # np.where: the condition is read as bool, the branches in their common dtype.
    common = promote(dtypes[1], dtypes[2])
    return ("bool", common, common, common)


def _where(condition, x, y):
    dtype = promote(x.dtype.name, y.dtype.name)
    if x.dtype != y.dtype:  # (NumPy has no common type of bfloat16 and most integers)
        x, y = x.astype(dtype, copy=False), y.astype(dtype, copy=False)
    return np.where(condition, x, y).astype(dtype, copy=False)


for _name, (_fn, _summary) in COMPARE_OPS.items():
    register_elementwise(_name, 2, _fn, _summary)
for _name, (_fn, _summary) in UNARY_PREDICATES.items():
    register_elementwise(_name, 1, _fn, _summary)
register_elementwise(
    "where", 3, _where, "Elementwise ``x if condition else y``, broadcasting all three",
    loop=_where_loop, moves_only=True,
)  # fmt: skip


def where(condition: Operand, x: Operand, y: Operand) -> Expr:
    """``x`` where ``condition`` holds, else ``y``, broadcasting all three, as ``np.where``.

    >>> import nbyoc
    >>> v = nbyoc.var("v", (3,))
    >>> nbyoc.where(v > 0, v, 0.0).type
    Tensor[(3,), float32]
    """
    return call_op("where", condition, x, y)
