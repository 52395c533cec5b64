"""NumPy's ``y[key] = v`` as a new graph value: ``assigned(y, key, v)`` is ``y`` with
the update done, which ``nbyoc.jit`` then binds to ``y`` (``aliasing``).

How each kind of key is built, so that the update runs where ``y`` runs:

- a boolean mask (``y[y < 0] = 0``, or a mask of ``y``'s leading axes) is ``where``;
  the value is a scalar or broadcasts to one selected row (a value per selected element
  would need the count the data tells: refused, as in indexing), or ``x[mask]`` itself;
- basic indexing (ints, slices, ``...``, ``None``) keeps the elements around the
  region by slices and joins them to the new values by ``concatenate``, axis by axis;
  a slice with a step interleaves the values with the elements between them;
- integer-array indices (lists, arrays or integer graph values; ``:`` on the other
  axes) are ``scatter_nd``: negative indices count from the end, one out of range
  raises when the function runs (``ExecutionError`` from scatter_nd's ``IndexError``),
  and the last of repeated ones wins.

The value is cast to ``y``'s dtype as NumPy's assignment casts it (``unsafe``: floats
truncate into an int array; a Python int out of the dtype's range raises, as NumPy's
``OverflowError``), and broadcast to the region as NumPy broadcasts it.

>>> import nbyoc
>>> y = nbyoc.var("y", (4, 6))
>>> assigned(y, (slice(1, 3), 0), 7.0).type
Tensor[(4, 6), float32]
>>> assigned(y, slice(None, None, 2), nbyoc.var("row", (6,))).op.name
'concatenate'
"""

from __future__ import annotations

import operator

import numpy as np

from ...errors import NbyocTypeError
from ...ir import ops
from ...ir.builder import const
from ...ir.dtypes import dtype_info
from ...ir.nodes import Call, Expr, resolving_arguments
from ...ir.op import Op
from ...ir.symbols import SizeExpr
from ...ir.types import TensorType
from .aliasing import current
from .indexing import array_axes_layout, expand_key, index
from .masks import DATA_DEPENDENT, MaskedSelection


def assigned(y: Expr, key, value) -> Expr:
    """``y`` with ``y[key] = value`` done as NumPy does it (see the module docstring)."""
    # Every graph value taken part as it is now, then the update built from exactly these
    # nodes: the pieces of y's earlier updates are reused (``_slice``), and a piece must
    # not be read anew as what its name stands for after later updates.
    y, value = current(y), current(value)
    key = tuple(map(current, key)) if isinstance(key, tuple) else current(key)
    with resolving_arguments(None):
        return _assigned(y, key, value)


def _assigned(y: Expr, key, value) -> Expr:
    mask = _mask(y, key)
    if mask is not None:
        return _masked(y, mask, value)
    if isinstance(value, MaskedSelection):
        raise NbyocTypeError(f"y[...] = x[mask]: {DATA_DEPENDENT}")
    parts = expand_key(y.type, key)
    if any(_is_bool_array(p) for p in parts):
        raise NbyocTypeError(
            "y[..., mask] = v: a boolean mask after other indices; nbyoc takes a mask of y's "
            "leading axes alone (y[mask] = v), else write y = np.where(mask, v, y)"
        )
    region = index(y, key)  # (its shape; refuses what indexing refuses)
    values = assigned_values(value, y.type.dtype, region.type.shape)
    if any(isinstance(p, (list, np.ndarray, Expr)) for p in parts):
        return _scattered(y, parts, values)
    return _placed(y, parts, values)


# -- masks --------------------------------------------------------------------------------


def _is_bool_array(part) -> bool:
    if isinstance(part, Expr):
        return isinstance(part.type, TensorType) and part.type.dtype == "bool"
    return isinstance(part, np.ndarray) and part.dtype == np.bool_


def _mask(y: Expr, key):
    """``key`` as a boolean graph value when it is one mask (of ``y``'s leading axes),
    else None."""
    if isinstance(key, list) and key and all(isinstance(k, (bool, np.bool_)) for k in key):
        key = np.array(key)
    if not _is_bool_array(key):
        return None
    mask = key if isinstance(key, Expr) else const(key)
    shape, within = mask.type.shape, y.type.shape[: mask.type.ndim]
    if mask.type.ndim > y.type.ndim or tuple(shape) != tuple(within):
        raise NbyocTypeError(
            f"y[mask] = v: a mask of shape {tuple(shape)} does not match y's leading axes "
            f"{tuple(within)} (NumPy's IndexError: the boolean index did not match)"
        )
    return mask


def _masked(y: Expr, mask: Expr, value) -> Expr:
    rest = y.type.shape[mask.type.ndim :]
    spread = ops.reshape(mask, (*mask.type.shape, *(1,) * len(rest))) if rest else mask
    if isinstance(value, MaskedSelection):  # y[m] = x[m] (or y[m] += ...: y[m] + ...)
        if value.mask is not mask or value.x.type.shape != y.type.shape:
            raise NbyocTypeError(
                f"y[mask] = x[other mask]: {DATA_DEPENDENT}; write y = np.where(mask, x, y)"
            )
        return ops.where(spread, _cast(value.x, y.type.dtype), y)
    values = _as_graph_value(value, y.type.dtype)
    shape = _without_leading_ones(values.type.shape, len(rest))
    if len(shape) > len(rest):
        raise NbyocTypeError(
            f"y[mask] = v with v of shape {tuple(values.type.shape)}: NumPy takes one value "
            f"per selected element, a count the data tells; set a scalar or one row "
            f"(y[mask] = 0), or keep the shape: y = np.where(mask, v, y)"
        )
    _check_broadcast(shape, rest)
    if tuple(shape) != tuple(values.type.shape):
        values = ops.reshape(values, shape)
    return ops.where(spread, values, y)


# -- the value ----------------------------------------------------------------------------


def _cast(x: Expr, dtype: str) -> Expr:
    return x if x.type.dtype == dtype else ops.cast(x, dtype)


def _as_graph_value(value, dtype: str) -> Expr:
    """``value`` in ``dtype`` as NumPy's assignment casts it."""
    if isinstance(value, Expr):
        if not isinstance(value.type, TensorType):
            raise NbyocTypeError(f"y[...] = v: v is a tuple value ({value.type!r})")
        return _cast(value, dtype)
    numpy_dtype = dtype_info(dtype).numpy
    if isinstance(value, (bool, int, float, complex)):
        array = np.array(value, dtype=numpy_dtype)  # (raises where NumPy's assignment does)
    else:
        array = np.asarray(value)
        if array.dtype == object:
            raise NbyocTypeError(f"y[...] = v: cannot assign {type(value).__name__} values")
        array = array.astype(numpy_dtype)
    return const(array)


def _without_leading_ones(shape, ndim: int) -> tuple:
    shape = tuple(shape)
    while len(shape) > ndim and shape[0] == 1:
        shape = shape[1:]
    return shape


def _check_broadcast(shape, into) -> None:
    """NumPy's rule for an assignment: each of the value's axes (from the right) is the
    region's length, or 1."""
    fits = len(shape) <= len(into) and all(
        s == 1 or s is d or s == d for s, d in zip(reversed(shape), reversed(tuple(into)))
    )
    if not fits:
        raise NbyocTypeError(
            f"could not broadcast input array from shape {tuple(shape)} into shape "
            f"{tuple(into)} (y[...] = v: NumPy's ValueError)"
        )


def assigned_values(value, dtype: str, region) -> Expr:
    """``value`` cast to ``dtype`` and broadcast to the ``region``'s shape, as NumPy's
    assignment makes the values it writes."""
    values = _as_graph_value(value, dtype)
    shape = _without_leading_ones(values.type.shape, len(region))
    _check_broadcast(shape, region)
    if tuple(shape) != tuple(values.type.shape):
        values = ops.reshape(values, shape)
    if tuple(shape) != tuple(region):
        values = ops.broadcast_to(values, tuple(region))
    return values


# -- basic indexing -----------------------------------------------------------------------


def _placed(y: Expr, parts: tuple, values: Expr) -> Expr:
    """``y`` with ``values`` (of the region's shape) at basic index ``parts``."""
    specs, counts = [], []
    axis = 0
    for part in parts:
        if part is None:
            continue
        size = y.type.shape[axis]
        if isinstance(part, slice):
            if part == slice(None):
                specs.append(None)  # (the whole axis)
                counts.append(size)
                axis += 1
                continue
            if isinstance(size, SizeExpr):
                raise NbyocTypeError(
                    f"y[...] = v slices axis {axis}, whose length is symbolic ({size}); "
                    f"nbyoc needs it known to place the values"
                )
            start, stop, step = part.indices(size)
            count = len(range(start, stop, step))
        else:
            start, step, count = operator.index(part) % size, 1, 1
        specs.append((start, step, count))
        counts.append(count)
        axis += 1
    if tuple(values.type.shape) != tuple(counts):
        values = ops.reshape(values, tuple(counts))
    for d, spec in enumerate(specs):  # (a backward slice: the same elements, forwards)
        if spec is not None and spec[1] < 0:
            start, step, count = spec
            values = _flip(values, d, count)
            specs[d] = (start + step * (count - 1), -step, count)
    return _place(y, values, specs, 0)


def _slice(x: Expr, axis: int, start: int, stop: int, step: int = 1) -> Expr:
    """``x`` from ``start`` to ``stop`` along ``axis``: the pieces themselves where ``x``
    joins pieces along it. (A loop writing row after row, ``out[i] = ...``, then makes
    one join of its rows, rather than n joins of whole copies, each slicing the last:
    200 rows of 1000 ran 340x slower than NumPy that way.)"""
    if step == 1 and start == 0 and stop == x.type.shape[axis]:
        return x
    if step == 1 and _joins(x, axis):
        pieces, at = [], 0
        for piece in x.args:
            length = piece.type.shape[axis]
            low, high = max(start, at), min(stop, at + length)
            if low < high:
                pieces.append(_slice(piece, axis, low - at, high - at))
            at += length
        return _join(pieces, axis)
    return ops.slice(x, starts=(start,), ends=(stop,), axes=(axis,), steps=(step,))


def _joins(x: Expr, axis: int) -> bool:
    """Whether ``x`` is a concatenate along ``axis`` of pieces of known lengths."""
    return (
        isinstance(x, Call)
        and isinstance(x.op, Op)
        and x.op.name == "concatenate"
        and x.attrs["axis"] % x.type.ndim == axis
        and all(isinstance(a.type.shape[axis], int) for a in x.args)
    )


def _join(pieces: list, axis: int) -> Expr:
    """``pieces`` joined along ``axis``, a piece that is itself such a join spread out."""
    flat = []
    for piece in pieces:
        flat.extend(piece.args if _joins(piece, axis) else [piece])
    return flat[0] if len(flat) == 1 else ops.concatenate(flat, axis=axis)


def _flip(x: Expr, axis: int, count: int) -> Expr:
    return ops.slice(x, starts=(-1,), ends=(-(count + 1),), axes=(axis,), steps=(-1,))


def _place(block: Expr, values: Expr, specs: list, d: int) -> Expr:
    """``block`` with ``values`` at ``specs``' positions on axes ``d`` and after (one
    axis at a time: the written rows, then the rows before and after them around)."""
    if d == len(specs):
        return values
    if specs[d] is None:
        return _place(block, values, specs, d + 1)
    start, step, count = specs[d]
    if count == 0:
        return block
    size = block.type.shape[d]
    stop = start + step * (count - 1) + 1
    inner = _place(_slice(block, d, start, stop, step), values, specs, d + 1)
    if step > 1:
        inner = _interleave(_slice(block, d, start, stop), inner, step, d)
    pieces = [_slice(block, d, 0, start)] if start > 0 else []
    pieces.append(inner)
    if stop < size:
        pieces.append(_slice(block, d, stop, size))
    return _join(pieces, d)


def _interleave(span: Expr, written: Expr, step: int, d: int) -> Expr:
    """``span`` (the ``step * (count - 1) + 1`` rows from the first written one) with
    every ``step``-th row replaced by the ``count`` rows of ``written``."""
    shape = tuple(span.type.shape)
    count = written.type.shape[d]
    pads = [0] * (2 * len(shape))
    pads[len(shape) + d] = step * count - shape[d]  # (to whole groups of step rows)
    grid = ops.reshape(ops.pad(span, tuple(pads)), (*shape[:d], count, step, *shape[d + 1 :]))
    column = ops.reshape(written, (*shape[:d], count, 1, *shape[d + 1 :]))
    rows = ops.concatenate([column, _slice(grid, d + 1, 1, step)], axis=d + 1)
    joined = ops.reshape(rows, (*shape[:d], count * step, *shape[d + 1 :]))
    return _slice(joined, d, 0, shape[d])


# -- an integer-array index ---------------------------------------------------------------


def integer_index(indices) -> Expr:
    """An integer index (a list, an array, an integer graph value) as a graph value of
    int32 or int64, which ``scatter_nd`` takes."""
    if not isinstance(indices, Expr):
        indices = const(np.asarray(indices, dtype=np.int64))
    if indices.type.dtype not in ("int32", "int64"):
        indices = ops.cast(indices, "int64")
    return indices


def _scattered(y: Expr, parts: tuple, values: Expr) -> Expr:
    """``y`` with ``values`` (of the region's shape, as NumPy lays out ``y[parts]``) at
    integer-array indices (``index`` already checked that the other axes are whole).
    ``scatter_nd`` writes along leading axes: the indexed axes go first, and the values'
    broadcast axes too."""
    arrays = [(a, p) for a, p in enumerate(parts) if isinstance(p, (list, np.ndarray, Expr))]
    axes = [a for a, _ in arrays]
    order, at = array_axes_layout(y.type.ndim, axes)
    indices = [integer_index(p) for _, p in arrays]
    common = tuple(np.broadcast_shapes(*(tuple(i.type.shape) for i in indices)))
    tuples = ops.concatenate(
        [ops.reshape(ops.broadcast_to(i, common) if i.type.shape != common else i,
                     (*common, 1)) for i in indices],
        axis=len(common),
    )  # fmt: skip
    if at:  # (NumPy put the broadcast axes at the first array's place: first, here)
        front = range(at, at + len(common))
        values = ops.transpose(
            values, (*front, *range(at), *range(at + len(common), values.type.ndim))
        )
    identity = list(order) == list(range(y.type.ndim))
    moved = y if identity else ops.transpose(y, order)
    rows = ops.scatter_nd(moved, tuples, values)
    return rows if identity else ops.transpose(rows, tuple(int(a) for a in np.argsort(order)))
