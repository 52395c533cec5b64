"""NumPy's sorting, searching and interpolation functions on graph values, for
``nbyoc.ir.numpy_protocol`` (which merges ``FUNCTIONS`` into its table): each takes
NumPy's arguments and builds the graph of nbyoc ops that computes the same.

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

from ..errors import NbyocTypeError


def _no(name: str, what: str):
    raise NbyocTypeError(f"numpy.{name}: {what}")


def _ops():
    from . import ops

    return ops


def _sorting(op: str, name: str):
    def build(a, axis=-1, kind=None, order=None, *, stable=None):
        if order is not None:
            _no(name, "sorts by value only on graph values (no order= of record fields)")
        return getattr(_ops(), op)(a, axis=axis)

    build.__name__ = name
    return build


def _partitioning(op: str, name: str):
    def build(a, kth, axis=-1, kind="introselect", order=None):
        if order is not None:
            _no(name, "sorts by value only on graph values (no order= of record fields)")
        return getattr(_ops(), op)(a, axis=axis)  # (sorted: a partition at every kth)

    build.__name__ = name
    return build


def _take_along_axis(arr, indices, axis=-1):
    if axis is None:  # as NumPy: the flattened array, 1-D indices
        arr, axis = _ops().reshape(arr, (-1,)), 0
    return _ops().take_along_axis(arr, indices, axis=axis)


def _searchsorted(a, v, side="left", sorter=None):
    if sorter is not None:  # a is sorted in the order sorter gives
        a = _ops().gather(a, sorter, axis=0)
    return _ops().searchsorted(a, v, side=side)


def _interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        _no("interp", "takes no period= on graph values; wrap x into [0, period) first")
    for name, value in (("left", left), ("right", right)):
        if value is not None and not isinstance(value, (int, float, np.number)):
            _no("interp", f"{name}= must be a number on graph values, not {type(value).__name__}")
    return _ops().interp(x, xp, fp, left=left, right=right)


#: NumPy array function -> builder taking NumPy's arguments.
FUNCTIONS = {
    np.sort: _sorting("sort", "sort"),
    np.argsort: _sorting("argsort", "argsort"),
    np.partition: _partitioning("sort", "partition"),
    np.argpartition: _partitioning("argsort", "argpartition"),
    np.take_along_axis: _take_along_axis,
    np.searchsorted: _searchsorted,
    np.interp: _interp,
}


class SortingMethods:
    """The NumPy-style sorting methods of graph values (mixed into ``ArrayMethods``)."""

    __slots__ = ()

    def sort(self, axis=-1, kind=None, order=None, **kwargs):
        """``ndarray.sort`` sorts in place, which a graph value cannot: refused, with
        what to write instead."""
        raise NbyocTypeError(
            "x.sort() sorts x in place, and graph values are immutable; write "
            "x = np.sort(x, axis) (a sorted copy) instead"
        )

    def argsort(self, axis=-1, kind=None, order=None, **kwargs):
        """Like ``ndarray.argsort``: ``np.argsort(self, axis)`` (stable)."""
        return FUNCTIONS[np.argsort](self, axis, kind, order, **kwargs)

    def searchsorted(self, v, side="left", sorter=None):
        """Like ``ndarray.searchsorted``: ``np.searchsorted(self, v, side, sorter)``."""
        return _searchsorted(self, v, side, sorter)
