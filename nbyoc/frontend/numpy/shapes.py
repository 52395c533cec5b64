"""NumPy's shape functions on graph values: ``np.reshape``, ``squeeze``, ``expand_dims``,
``stack``, ``ravel``, ``roll`` and ``zeros_like`` / ``ones_like`` / ``full_like``, each taking
NumPy's arguments and building nbyoc's layout ops (C order only).

>>> import nbyoc
>>> x = nbyoc.var("x", (2, 1, 3))
>>> squeeze(x).shape, expand_dims(x, (0, -1)).shape, stack([x, x], axis=-1).shape
((2, 3), (1, 2, 1, 3, 1), (2, 1, 3, 2))
"""

from __future__ import annotations

import numpy as np

from ...ir import ops
from .aliasing import is_view, view
from .refusals import refuse


def _reshaped_back(base, new, *args, **kwargs):
    """A base with a reshaped view's elements replaced by ``new``: ``new`` reshaped."""
    return ops.reshape(new, base.type.shape)


def _contiguous(base) -> bool:
    """Whether NumPy's reshape of ``base`` is surely a view: a value computed whole (not
    a view, which may be strided) is C-contiguous. (A parameter's array may not be, but
    a parameter is never updated in place.)"""
    return not is_view(base)


_LAYOUT = (
    "it is a reshape (or ravel) of a view, which NumPy makes a view or a copy by the "
    "view's memory layout"
)


@view(_reshaped_back, _LAYOUT, _contiguous)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """np.reshape (``newshape=``, NumPy's older spelling, too)."""
    if order != "C":
        refuse("reshape", f"order={order!r}: graph values are reshaped in C order only")
    return ops.reshape(a, shape if shape is not None else newshape)


def ravel(a, order="C"):
    """np.ravel: the flattened value."""
    return reshape(a, (-1,), order)


@view(_reshaped_back)
def squeeze(a, axis=None):
    """np.squeeze: without the given axes of length 1 (all of them without ``axis``)."""
    shape = a.shape
    axes = range(len(shape)) if axis is None else np.atleast_1d(axis).tolist()
    axes = {ax % len(shape) for ax in axes if axis is not None or shape[ax] == 1}
    if any(shape[ax] != 1 for ax in axes):
        refuse("squeeze", f"cannot squeeze an axis whose length is not 1 (shape {shape})")
    return ops.reshape(a, tuple(d for k, d in enumerate(shape) if k not in axes))


@view(_reshaped_back)
def expand_dims(a, axis):
    """np.expand_dims: axes of length 1 at ``axis`` (positions in the result)."""
    axes = np.atleast_1d(axis).tolist()
    ndim = a.ndim + len(axes)
    axes = {ax % ndim for ax in axes}
    dims = iter(a.shape)
    return ops.reshape(a, tuple(1 if k in axes else next(dims) for k in range(ndim)))


def _transposed_back(base, new, axes=None):
    if axes is None:
        return ops.transpose(new)
    axes = [int(a) % base.type.ndim for a in np.atleast_1d(axes).tolist()]
    return ops.transpose(new, tuple(int(a) for a in np.argsort(axes)))


@view(_transposed_back)
def transpose(a, axes=None):
    """np.transpose: ``a``'s axes permuted (reversed without ``axes``), a view of it."""
    return ops.transpose(a, axes)


@view(None, "np.broadcast_to gives a read-only view (NumPy refuses writes to it)")
def broadcast_to(array, shape, subok=False):
    """np.broadcast_to: ``array`` repeated along new or length-1 axes (read-only)."""
    return ops.broadcast_to(array, shape)


def copy(a, order="K", subok=False):
    """np.copy: a new array of ``a``'s values, which updates of ``a`` leave alone."""
    if order not in ("K", "C", "A"):
        refuse("copy", f"order={order!r}: graph values are C-ordered")
    return ops.identity(a)


def stack(arrays, axis=0, out=None, **kwargs):
    """np.stack: the arrays joined along a new axis."""
    if out is not None or kwargs:
        refuse("stack", "takes no out=, dtype= or casting= on graph values")
    arrays = list(arrays)
    if not arrays:
        refuse("stack", "needs at least one array")
    ndim = np.ndim(arrays[0]) + 1
    axis = axis % ndim
    return ops.concatenate([expand_dims(x, axis) for x in arrays], axis=axis)


def filled_like(value_of):
    """The builder of np.zeros_like, ones_like or full_like: ``value_of`` gives the fill
    value from the arguments after the array."""

    def build(a, *args, dtype=None, shape=None, **kwargs):
        if kwargs.get("order", "K") not in ("K", "C") or kwargs.get("subok") is False:
            refuse("zeros_like", "graph values are C-ordered arrays")
        fill = value_of(args)
        dtype = np.dtype(dtype or a.dtype)
        shape = a.shape if shape is None else tuple(np.atleast_1d(shape).tolist())
        return ops.broadcast_to(np.asarray(fill, dtype), shape)

    return build


def roll(a, shift, axis=None):
    """np.roll by a shift known at compile time: two slices joined (of the flattened
    ``a`` without ``axis``); shifts and axes given as tuples roll one after another.

    >>> import nbyoc
    >>> roll(nbyoc.var("x", (3, 4)), (1, -1), (0, 1)).shape
    (3, 4)
    """
    if not all(isinstance(k, (int, np.integer)) for k in np.atleast_1d(shift).tolist()):
        refuse("roll", "needs shifts known at compile time (Python ints) on graph values")
    if axis is None:
        return ops.reshape(roll(ravel(a), shift, 0), a.shape)
    shifts, axes = np.broadcast_arrays(np.atleast_1d(shift), np.atleast_1d(axis))
    for k, ax in zip(shifts.tolist(), axes.tolist()):
        ax %= a.ndim
        n = a.shape[ax]
        if not isinstance(n, int):
            refuse("roll", f"needs the rolled axis's length known at compile time (got {n})")
        k = k % n if n else 0
        if k:
            lead = (slice(None),) * ax
            a = ops.concatenate([a[(*lead, slice(n - k, None))], a[(*lead, slice(0, n - k))]],
                                axis=ax)  # fmt: skip
    return a
