"""NumPy's sorting, searching, interpolation, differences, einsum and norms on graph
values, for ``nbyoc.ir.numpy_protocol`` (which merges ``FUNCTIONS`` into its table):
each takes NumPy's arguments and builds the graph of nbyoc ops that computes the same.

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

from ...errors import NbyocTypeError
from ...ir import ops
from ...ir.dtypes import promote, scalar_dtype
from ...ir.einsum import einsum
from ...ir.nodes import Expr
from ...ir.ops.elementwise import numpy_loop
from ...ir.ops.linalg import norm


def _no(name: str, what: str):
    raise NbyocTypeError(f"numpy.{name}: {what}")


def _ops():
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


def _diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """np.diff: ``n`` rounds of differences of neighbours along ``axis`` (slices and a
    subtract; bools: not_equal, as NumPy), after joining ``prepend`` and ``append``."""
    ops = _ops()
    if n < 0:
        _no("diff", f"order must be non-negative but got {n}")
    if a.ndim == 0:
        _no("diff", "diff requires input that is at least one dimensional")
    axis = axis % a.ndim
    parts = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append(None)
            continue
        if np.ndim(extra) == 0:  # a scalar: one slice of it along the axis
            shape = tuple(1 if k == axis else d for k, d in enumerate(a.shape))
            # (NumPy makes an array of it first: a Python 0 is an int64, not weak)
            value = extra if hasattr(extra, "op") else np.asarray(extra)
            extra = ops.broadcast_to(value, shape)
        parts.append(extra)
    if parts[0] is not None or parts[1] is not None:
        joined = [x for x in (parts[0], a, parts[1]) if x is not None]
        a = ops.concatenate(joined, axis=axis)
    for _ in range(n):
        length = a.shape[axis]
        head = a[(slice(None),) * axis + (slice(1, None),)]
        tail = a[(slice(None),) * axis + (slice(0, max(length - 1, 0)),)]
        a = ops.not_equal(head, tail) if a.dtype == "bool" else ops.subtract(head, tail)
    return a


def _einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    if out is not None or dtype is not None:
        _no("einsum", "takes no out= or dtype= on graph values; cast the result instead")
    return einsum(*operands)


def _norm(x, ord=None, axis=None, keepdims=False):
    return norm(x, ord, axis, keepdims)


def _vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """np.linalg.vector_norm: over the flattened x without an axis; a tuple of axes is
    one vector of all of them (moved last and flattened)."""
    ops = _ops()
    if axis is None:
        out = _norm(ops.reshape(x, (-1,)), ord, 0)
        return ops.reshape(out, (1,) * x.ndim) if keepdims else out
    axes = (axis,) if isinstance(axis, int) else tuple(a % x.ndim for a in axis)
    others = [k for k in range(x.ndim) if k not in axes]
    moved = ops.transpose(x, (*others, *axes))
    flat = ops.reshape(moved, (*(x.shape[k] for k in others), -1))
    out = _norm(flat, ord, -1)
    if keepdims:
        out = ops.reshape(out, tuple(1 if k in axes else d for k, d in enumerate(x.shape)))
    return out


def _matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return _norm(x, ord, (-2, -1), keepdims)


def _svdvals(x, /):
    return _ops().svdvals(x)


def logaddexp(a, b):
    """np.logaddexp as ops: ``max(a, b) + log1p(exp(-|a - b|))`` (``a + log 2`` where
    the two are equal, so that two infinities of one sign stay infinite), in NumPy's
    loop dtype (integers in floats).

    >>> import nbyoc
    >>> logaddexp(nbyoc.var("a", (3,), "int32"), 0.5).type
    Tensor[(3,), float64]
    """
    ops = _ops()
    partner = promote(*(x.dtype for x in (a, b) if isinstance(x, Expr)))
    dtypes = tuple(x.dtype if isinstance(x, Expr) else scalar_dtype(x, partner) for x in (a, b))
    dtype = numpy_loop(np.logaddexp, dtypes)[-1]
    a, b = (ops.cast(x, dtype) if isinstance(x, Expr) and x.dtype != dtype else x for x in (a, b))
    larger = ops.maximum(a, b)
    tail = ops.log1p(ops.exp(ops.negative(ops.abs(ops.subtract(a, b)))))
    return ops.where(ops.equal(a, b), ops.add(larger, float(np.log(2))), ops.add(larger, tail))


#: NumPy array function -> builder taking NumPy's arguments.
FUNCTIONS = {
    np.sort: _sorting("sort", "sort"),
    np.argsort: _sorting("argsort", "argsort"),
    np.partition: _partitioning("sort", "partition"),
    np.argpartition: _partitioning("argsort", "argpartition"),
    np.take_along_axis: _take_along_axis,
    np.searchsorted: _searchsorted,
    np.interp: _interp,
    np.diff: _diff,
    np.einsum: _einsum,
    np.linalg.norm: _norm,
    # (NumPy 2's array-API spellings)
    **(
        {
            np.linalg.vector_norm: _vector_norm,
            np.linalg.matrix_norm: _matrix_norm,
            np.linalg.svdvals: _svdvals,
        }
        if hasattr(np.linalg, "vector_norm")
        else {}
    ),
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
