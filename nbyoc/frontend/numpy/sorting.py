"""NumPy's sorting and searching on graph values: ``np.sort``, ``argsort``,
``partition``, ``argpartition``, ``take_along_axis``, ``searchsorted`` and ``interp``
(a search into ``xp``), each taking NumPy's arguments and building nbyoc's ops.

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
