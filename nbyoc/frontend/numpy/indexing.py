"""NumPy's indexing of graph values, ``x[key]`` (``Expr.__getitem__``): basic indexing
(ints, slices, ``...``, ``None``) built from the ``slice`` and ``reshape`` ops,
integer-array indices built as ``gather`` (several: one gather over their axes), and a
boolean mask of ``x``'s own shape held as a selection that only a reduction takes
(``masks``). A tuple value's field (``t[0]``) is the IR's own ``TupleGetItem``.

>>> import nbyoc
>>> x = nbyoc.var("x", (4, 5, 6))
>>> x[1:, ::-2].type
Tensor[(3, 3, 6), float32]
>>> x[x > 0].sum().shape
()
"""

from __future__ import annotations

import operator

import numpy as np

from ...errors import NbyocTypeError
from ...ir.builder import call_op
from ...ir.nodes import Expr, TupleGetItem
from ...ir.symbols import SizeExpr
from ...ir.types import TensorType
from .aliasing import active, current
from .masks import DATA_DEPENDENT, MaskedSelection, is_mask_of, refuses


def getitem(x, key):
    """A field of a tuple value; for a tensor, NumPy-style indexing (``x[1:, ::2]``,
    ``x[..., 0]``, ``x[None]``, ``x[:, [0, 2]]``) built from slice, reshape, gather."""
    if not isinstance(x.type, TensorType):
        return TupleGetItem(x, key)
    if is_mask_of(x, key):  # x[mask]: only a reduction takes it (a copy: values now)
        return MaskedSelection(current(x), current(key))
    if refuses(key):
        raise NbyocTypeError(DATA_DEPENDENT)
    result = index(x, key)
    record = active()
    if record is not None and _is_view(key, result):
        from .assignment import assigned  # (local: assignment builds on indexing)

        record.add_view(
            result, x, lambda base: index(base, key),
            lambda base, new: assigned(base, key, new), key=key,
        )  # fmt: skip
    return result


def array_axes_layout(ndim: int, axes: list[int]) -> tuple[tuple, int]:
    """For integer arrays indexing ``axes`` of an ``ndim``-axis array: the order that
    puts those axes first, and where NumPy puts the arrays' broadcast axes in the result
    (at the first array's axis when the arrays are on adjacent axes, else first)."""
    order = (*axes, *(d for d in range(ndim) if d not in axes))
    adjacent = list(axes) == list(range(axes[0], axes[0] + len(axes)))
    return order, axes[0] if adjacent else 0


def _gather_many(x, gathers):
    """``x[i, j]`` with integer arrays on several axes (':' on the rest), as NumPy's
    advanced indexing: the arrays broadcast together, each element the one their
    indices name. Built as one gather over those axes flattened; an index out of its
    axis's range is sent past the flattened length, so that gather raises for it
    rather than reading another element."""
    axes = [a for a, _ in gathers]
    sizes = [x.type.shape[a] for a in axes]
    if not all(isinstance(n, int) for n in sizes):
        raise NbyocTypeError(
            f"integer arrays on axes {axes} of symbolic lengths ({sizes}): nbyoc needs "
            f"them known to combine the indices"
        )
    order, at = array_axes_layout(x.type.ndim, axes)
    rest = [x.type.shape[d] for d in order[len(axes) :]]
    total = int(np.prod(sizes))
    flat, inside = None, None
    strides = np.cumprod([1, *sizes[::-1]])[-2::-1]  # (of the flattened axes)
    for (_, indices), n, stride in zip(gathers, sizes, strides):
        k = indices if isinstance(indices, Expr) else np.asarray(indices)
        k = call_op("cast", k, to="int64") if isinstance(k, Expr) else k.astype(np.int64)
        valid = np.logical_and(k >= -n, k < n)
        k = np.where(k < 0, k + n, k) * int(stride)
        flat = k if flat is None else flat + k
        inside = valid if inside is None else np.logical_and(inside, valid)
    flat = np.where(inside, flat, total)
    moved = x if list(order) == list(range(x.type.ndim)) else call_op("transpose", x, axes=order)
    merged = call_op("reshape", moved, newshape=(total, *rest))
    out = call_op("gather", merged, flat, axis=0)
    if at == 0:
        return out
    broadcast = out.type.ndim - len(rest)
    front = list(range(broadcast, broadcast + at))
    back = [d for d in range(broadcast, out.type.ndim) if d not in front]
    return call_op("transpose", out, axes=(*front, *range(broadcast), *back))


def _is_view(key, result) -> bool:
    """Whether NumPy's ``x[key]`` is a view: basic indexing, but for a single element
    (all integers), which NumPy returns as a scalar."""
    parts = key if isinstance(key, tuple) else (key,)
    if any(isinstance(p, (list, np.ndarray, Expr)) for p in parts):
        return False  # (an integer-array index copies)
    return not (result.type.ndim == 0 and all(isinstance(p, (int, np.integer)) for p in parts))


def expand_key(type: TensorType, key) -> tuple:
    """``key`` as a tuple with one entry per axis of a ``type`` value (its ``...`` spelt
    out as full slices, as are the axes after the last entry), and its ``None`` entries.

    >>> import nbyoc
    >>> expand_key(nbyoc.var("x", (4, 5, 6)).type, (None, 1))
    (None, 1, slice(None, None, None), slice(None, None, None))
    """
    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise NbyocTypeError("an index can only have a single ellipsis ('...')")
    explicit = sum(k is not None and k is not Ellipsis for k in key)
    if explicit > type.ndim:
        raise NbyocTypeError(f"too many indices for {type!r}: {explicit}")
    if not any(k is Ellipsis for k in key):
        key = (*key, Ellipsis)
    at = next(i for i, k in enumerate(key) if k is Ellipsis)  # (== would compare arrays)
    return key[:at] + (slice(None),) * (type.ndim - explicit) + key[at + 1 :]


def index(x, key):
    """``x[key]`` for a tensor-typed graph value, with NumPy's basic indexing (ints,
    slices, ``...``, ``None``) built from ``slice``, ``reshape`` and one integer-array
    index (a list, an array or an integer graph value) built as ``gather``.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4, 5, 6))
    >>> x[1, ..., ::2].shape, x[:, [0, 2]].shape, x[None, -1].shape
    ((5, 3), (4, 2, 6), (1, 5, 6))
    """
    key = expand_key(x.type, key)
    starts, ends, axes, steps, shape, gathers = [], [], [], [], [], []
    axis = 0
    for k in key:
        if k is None:
            shape.append(1)
            continue
        size = x.type.shape[axis]
        if isinstance(k, slice) and isinstance(size, SizeExpr):
            # the slice op resolves the indices against the symbolic size
            step = 1 if k.step is None else operator.index(k.step)
            if step == 0:
                raise NbyocTypeError("slice step cannot be zero")
            first, before = (0, size) if step > 0 else (-1, -(size + 1))
            starts.append(first if k.start is None else operator.index(k.start))
            ends.append(before if k.stop is None else operator.index(k.stop))
            steps.append(step)
            axes.append(axis)
            shape.append((axis,))  # (its size is the slice's, once built)
        elif isinstance(k, slice):
            start, stop, step = k.indices(size)
            # Python's resolved -1 means "before the first element" (stepping backwards);
            # the slice op reads -1 as the last one, and takes -(size + 1) for "before".
            starts.append(start if start >= 0 else -(size + 1))
            ends.append(stop if stop >= 0 else -(size + 1))
            steps.append(step)
            axes.append(axis)
            shape.append(len(range(start, stop, step)))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            k = operator.index(k)
            if not -size <= k < size:
                raise NbyocTypeError(f"index {k} is out of range for axis {axis} of {x.type!r}")
            k = k + size if k < 0 else k
            starts.append(k)
            ends.append(k + 1)
            steps.append(1)
            axes.append(axis)
        elif isinstance(k, (list, np.ndarray, Expr)):
            gathers.append((axis, k))
        else:
            raise NbyocTypeError(f"cannot index a graph value with {k!r} ({type(k).__name__})")
        axis += 1
    sliced = any((s, e, st) != (0, x.type.shape[a], 1)
                 for s, e, st, a in zip(starts, ends, steps, axes))  # fmt: skip
    if gathers:
        new_axes = any(k is None for k in key)
        plain = not sliced and not new_axes and len(axes) == x.type.ndim - len(gathers)
        if not plain:
            raise NbyocTypeError(
                "integer-array indices (which become gather) combine only with ':' on the "
                "other axes; index in two steps"
            )
        if len(gathers) > 1:
            return _gather_many(x, gathers)
        ((source_axis, indices),) = gathers
        return call_op("gather", x, indices, axis=source_axis)
    out = x
    if sliced:
        out = call_op("slice", out, starts=tuple(starts), ends=tuple(ends), axes=tuple(axes),
                      steps=tuple(steps))  # fmt: skip
    shape = [out.type.shape[d[0]] if type(d) is tuple else d for d in shape]
    if tuple(shape) != out.type.shape:
        out = call_op("reshape", out, newshape=tuple(shape))
    return out
