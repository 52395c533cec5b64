"""NumPy's sorting and searching on graph values: ``np.sort``, ``argsort``,
``partition``, ``argpartition``, ``take``, ``take_along_axis``, ``median`` (the middle of
a sort), ``searchsorted`` and ``interp`` (a search into ``xp``), each taking NumPy's
arguments and building nbyoc's ops.

Every sort is stable, so ``np.argsort``'s ties come in their order whatever ``kind``
says (NumPy's default kind may order them otherwise; ``kind="stable"`` agrees).
``np.partition`` and ``np.argpartition`` give a full sort, which is one of the
arrangements they allow.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (4, 10))
>>> np.sort(x, axis=1)[:, -3:].shape
(4, 3)
>>> np.argsort(x, axis=None).shape
(40,)
"""

from __future__ import annotations

import numpy as np

from ...ir import ops
from ...ir.builder import const
from ...ir.dtypes import dtype_info
from ...ir.nodes import Expr
from .refusals import refuse


def sorting(op: str, name: str):
    """The builder of ``np.sort`` / ``np.argsort`` (``name``): the stable ``op``."""

    def build(a, axis=-1, kind=None, order=None, *, stable=None):
        if order is not None:
            refuse(name, "sorts by value only on graph values (no order= of record fields)")
        return getattr(ops, op)(a, axis=axis)

    build.__name__ = name
    return build


def partitioning(op: str, name: str):
    """The builder of ``np.partition`` / ``np.argpartition`` (``name``): a full sort."""

    def build(a, kth, axis=-1, kind="introselect", order=None):
        if order is not None:
            refuse(name, "sorts by value only on graph values (no order= of record fields)")
        return getattr(ops, op)(a, axis=axis)  # (sorted: a partition at every kth)

    build.__name__ = name
    return build


def take_along_axis(arr, indices, axis=-1):
    """np.take_along_axis (``axis=None``: of the flattened array)."""
    if axis is None:  # as NumPy: the flattened array, 1-D indices
        arr, axis = ops.reshape(arr, (-1,)), 0
    return ops.take_along_axis(arr, indices, axis=axis)


def take(a, indices, axis=None, out=None, mode="raise"):
    """np.take: the elements of ``a`` (a graph value or an array: ``np.take(np.eye(n),
    labels, axis=0)``) at ``indices`` along ``axis`` (None: of the flattened ``a``);
    an index out of range raises when the function runs, as ``mode="raise"`` does."""
    if out is not None or mode != "raise":
        refuse("take", "takes no out= and only mode='raise' on graph values")
    a = a if isinstance(a, Expr) else const(np.asarray(a))
    if axis is None:
        a, axis = ops.reshape(a, (-1,)), 0
    return ops.gather(a, indices, axis=axis % a.ndim)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """np.median along one axis (None: of the flattened ``a``): the middle of the sorted
    values, or the mean of the two middle ones; NaN where the axis holds a NaN (sorted
    last, as NumPy sorts them); integers give float64, as NumPy's."""
    if out is not None:
        refuse("median", "takes no out= on graph values")
    if axis is not None and not isinstance(axis, (int, np.integer)):
        refuse("median", "takes one axis or None on graph values")
    shape = a.shape
    flat = axis is None
    if flat:
        a, axis = ops.reshape(a, (-1,)), 0
    axis = axis % a.ndim
    n = a.shape[axis]
    if not isinstance(n, int) or n == 0:
        refuse("median", f"needs the axis length known and not 0 at compile time (got {n})")
    ordered = ops.sort(a, axis=axis)

    def at(k):
        return ordered[(slice(None),) * axis + (k,)]

    # (integers and bools give float64, as NumPy's mean of the middle gives)
    is_float = dtype_info(a.dtype).is_float

    def middle_at(k):
        return at(k) if is_float else ops.cast(at(k), "float64")

    middle = middle_at(n // 2)
    if n % 2 == 0:
        middle = ops.divide(ops.add(middle_at(n // 2 - 1), middle), 2.0)
    if is_float:  # (a NaN sorts last: the largest is NaN)
        middle = ops.where(ops.isnan(at(n - 1)), at(n - 1), middle)
    if keepdims:
        middle = ops.reshape(middle, (1,) * len(shape) if flat else
                             tuple(1 if k == axis else d for k, d in enumerate(shape)))  # fmt: skip
    return middle


def searchsorted(a, v, side="left", sorter=None):
    """np.searchsorted (``sorter``: the order that sorts ``a``)."""
    if sorter is not None:  # a is sorted in the order sorter gives
        a = ops.gather(a, sorter, axis=0)
    return ops.searchsorted(a, v, side=side)


def interp(x, xp, fp, left=None, right=None, period=None):
    """np.interp with number ``left`` and ``right`` and no ``period``."""
    if period is not None:
        refuse("interp", "takes no period= on graph values; wrap x into [0, period) first")
    for name, value in (("left", left), ("right", right)):
        if value is not None and not isinstance(value, (int, float, np.number)):
            what = type(value).__name__
            refuse("interp", f"{name}= must be a number on graph values, not {what}")
    return ops.interp(x, xp, fp, left=left, right=right)
