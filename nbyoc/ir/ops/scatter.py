"""Ops that write values into a copy of a tensor at computed positions:
``scatter_elements`` (ONNX ScatterElements) and ``scatter_nd`` (ONNX ScatterND), the
inverses of ``gather``-like reads. Their result has the type of ``data``.

Each update is written into its position, or combined with what is there by
``reduction`` (``add``, ``mul``, ``max``, ``min``), in the row-major order of the
indices, as ONNX's reference loop does; with ``reduction="none"`` and an index given
twice, the last update wins. Indices count from the end when negative, and an index
out of range is an error when the op runs: nothing is read or written out of bounds.
No backend has rows for them, so they run on the host.

>>> import numpy as np, nbyoc
>>> data = nbyoc.var("data", (3, 4))
>>> nbyoc.scatter_elements(data, np.zeros((2, 4), np.int64), nbyoc.var("u", (2, 4))).type
Tensor[(3, 4), float32]
>>> nbyoc.scatter_nd(data, np.array([[0], [2]]), nbyoc.var("rows", (2, 4)), "add").type
Tensor[(3, 4), float32]
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import NbyocTypeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op
from ..nodes import Expr
from ..op import Op, describe, register_op
from ..symbols import SizeExpr, require
from ..types import TensorType
from .reduce import normalize_axes

#: reduction -> the ufunc combining an update with what is already there.
REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
#: The dtypes indices may have (ONNX's Tind).
INDEX_DTYPES = ("int32", "int64")
_REDUCTION = Attr("str", "none", choices=("none", *REDUCTIONS))


def _check_operands(name: str, data: TensorType, indices: TensorType, updates: TensorType):
    """What both ops need of their operands' dtypes and of data's rank."""
    if indices.dtype not in INDEX_DTYPES:
        raise NbyocTypeError(
            f"{name}: indices must be int32 or int64, got {indices!r}; cast them "
            f'(nbyoc.cast(indices, "int64"))'
        )
    if updates.dtype != data.dtype:
        raise NbyocTypeError(
            f"{name}: updates must have data's dtype {data.dtype}, got {updates!r}; cast "
            f'them (nbyoc.cast(updates, "{data.dtype}"))'
        )
    if data.ndim == 0:
        raise NbyocTypeError(f"{name}: cannot scatter into a 0-d tensor; reshape data to (1,)")


def _require_shape(name: str, updates: TensorType, want: tuple, why: str) -> None:
    """``updates`` has the shape ``want``, checked when the sizes are known where they
    are symbolic."""
    wrong = f"{name}: updates must have the shape {tuple(want)} ({why}), got {updates!r}"
    if updates.ndim != len(want):
        raise NbyocTypeError(wrong)
    for axis, (got, need) in enumerate(zip(updates.shape, want)):
        require("equal", got, need, where=f"{name}'s updates axis {axis}", error=wrong)


# -- the rules ----------------------------------------------------------------------------


def _scatter_elements_rule(types, attrs):
    data, indices, updates = types
    _check_operands("scatter_elements", data, indices, updates)
    (axis,) = normalize_axes("scatter_elements", data, attrs["axis"])
    if indices.ndim != data.ndim:
        raise NbyocTypeError(
            f"scatter_elements({describe(types)}): indices must have data's rank "
            f"{data.ndim}, got rank {indices.ndim}"
        )
    _require_shape("scatter_elements", updates, indices.shape, "the shape of indices")
    # Off the scattered axis an update lands at its own position, which data must have.
    for d, (have, need) in enumerate(zip(data.shape, indices.shape)):
        if d != axis:
            require("at_least", have, need, where=f"scatter_elements' indices axis {d}", error=(
                f"scatter_elements({describe(types)}): indices axis {d} has length {need}, "
                f"longer than data's ({have}); only the axis {axis} scattered along may be"
            ))  # fmt: skip
    return TensorType(data.shape, data.dtype), {"axis": axis, "reduction": attrs["reduction"]}


def _scatter_nd_rule(types, attrs):
    data, indices, updates = types
    _check_operands("scatter_nd", data, indices, updates)
    if indices.ndim == 0:
        raise NbyocTypeError(
            f"scatter_nd({describe(types)}): indices must have at least one axis, whose "
            f"length is how many leading axes of data each index tuple names"
        )
    depth = indices.shape[-1]
    if isinstance(depth, SizeExpr):
        # The ranks tell the tuples' length: updates has the axes of indices but its
        # last, then data's after the first ``depth``.
        ranked = indices.ndim - 1 + data.ndim - updates.ndim
        if not 0 <= ranked <= data.ndim:
            raise NbyocTypeError(
                f"scatter_nd({describe(types)}): updates must have rank (indices' rank - 1) "
                f"+ (data's rank - k) for index tuples of length k <= {data.ndim}; rank "
                f"{updates.ndim} fits no k"
            )
        wrong = (f"scatter_nd({describe(types)}): updates of rank {updates.ndim} need index "
                 f"tuples of length {ranked}, and indices' last axis is {depth}")  # fmt: skip
        where = "scatter_nd's index tuples (indices' last axis)"
        require("equal", depth, ranked, where=where, error=wrong)
        depth = ranked
    if depth > data.ndim:
        raise NbyocTypeError(
            f"scatter_nd({describe(types)}): index tuples of length {depth} name more axes "
            f"than data's {data.ndim}"
        )
    want = indices.shape[:-1] + data.shape[depth:]
    _require_shape("scatter_nd", updates, want, "indices' shape without its last axis, then "
                   f"data's axes after the first {depth}")  # fmt: skip
    return TensorType(data.shape, data.dtype), {"reduction": attrs["reduction"]}


# -- the references -----------------------------------------------------------------------


def _resolved(indices: np.ndarray, size: int, name: str, axis: int) -> np.ndarray:
    """``indices`` as int64 with negative ones counted from the end, after checking that
    each lies in ``[-size, size)``: the error names the first bad one."""
    indices = indices.astype(np.int64)
    bad = (indices < -size) | (indices >= size)
    if bad.any():
        raise IndexError(
            f"{name}: index {indices[bad].flat[0]} is out of range for axis {axis} of data "
            f"(length {size}: valid indices are {-size} to {size - 1})"
        )
    return np.where(indices < 0, indices + size, indices)


def _scatter(rows: np.ndarray, positions: np.ndarray, updates: np.ndarray, reduction: str):
    """Write (or combine) ``updates[i]`` into ``rows[positions[i]]``, in the order of i."""
    if reduction != "none":
        REDUCTIONS[reduction].at(rows, positions, updates)  # unbuffered: repeats combine
        return
    # NumPy promises no order for a fancy assignment with repeated positions, so each
    # position's last update is picked first (ONNX's reference loop writes it last).
    last = len(positions) - 1 - np.unique(positions[::-1], return_index=True)[1]
    rows[positions[last]] = updates[last]


def _scatter_elements_reference(data, indices, updates, axis, reduction):
    if any(n > d for i, (n, d) in enumerate(zip(indices.shape, data.shape)) if i != axis):
        raise ValueError(f"scatter_elements: indices {indices.shape} do not fit data {data.shape}")
    out = np.array(data, order="C", copy=True)
    strides = [math.prod(data.shape[d + 1 :]) for d in range(data.ndim)]  # in elements
    # each update's flat position in data: its own coordinates, the index along axis
    position = _resolved(indices, data.shape[axis], "scatter_elements", axis) * strides[axis]
    for d, n in enumerate(indices.shape):
        if d != axis:
            along = [n if e == d else 1 for e in range(indices.ndim)]
            position = position + (np.arange(n, dtype=np.int64) * strides[d]).reshape(along)
    _scatter(out.reshape(-1), position.reshape(-1), updates.reshape(-1), reduction)
    return out


def _scatter_nd_reference(data, indices, updates, reduction):
    depth = indices.shape[-1]
    count = math.prod(indices.shape[:-1])
    tuples = indices.reshape(count, depth)
    position = np.zeros(count, np.int64)  # each tuple's row among data's leading axes
    for axis in range(depth):
        size = data.shape[axis]
        position = position * size + _resolved(tuples[:, axis], size, "scatter_nd", axis)
    out = np.array(data, order="C", copy=True)
    rest = data.shape[depth:]
    rows = out.reshape((math.prod(data.shape[:depth]), *rest))
    _scatter(rows, position, updates.reshape((count, *rest)), reduction)
    return out


register_op(Op(
    "scatter_elements", 3, _scatter_elements_rule, _scatter_elements_reference, "layout",
    "A copy of ``data`` with each of ``updates`` written at its own position but for "
    "``axis``, where ``indices`` says (ONNX ScatterElements; ``reduction`` add, mul, max or "
    "min combines instead; with none, the last of repeated indices wins)",
    attrs={"axis": Attr("int", 0), "reduction": _REDUCTION}, moves_only=False,
))  # fmt: skip
register_op(Op(
    "scatter_nd", 3, _scatter_nd_rule, _scatter_nd_reference, "layout",
    "A copy of ``data`` with each slice of ``updates`` written at the position an index "
    "tuple (the last axis of ``indices``) names among data's leading axes (ONNX ScatterND; "
    "``reduction`` as in scatter_elements)",
    attrs={"reduction": _REDUCTION}, moves_only=False,
))  # fmt: skip


# -- builders -----------------------------------------------------------------------------


def scatter_elements(
    data: Operand, indices: Operand, updates: Operand, axis: int = 0, reduction: str = "none"
) -> Expr:
    """A copy of ``data`` where ``updates[i, j, ...]`` is written at ``(i, j, ...)``, but
    at ``indices[i, j, ...]`` on ``axis`` (ONNX ScatterElements, the inverse of
    ``np.take_along_axis``). ``indices`` (int32 or int64; negative ones count from the
    end) and ``updates`` share a shape of data's rank, no longer than data's off ``axis``.

    ``reduction`` ``"add"``, ``"mul"``, ``"max"`` or ``"min"`` combines each update with
    the value there, in the row-major order of ``indices``; with ``"none"`` an index
    given twice keeps the last update. An index out of range is an error when it runs.

    >>> import numpy as np, nbyoc
    >>> data, updates = nbyoc.var("data", (3, 3)), nbyoc.var("updates", (2, 3))
    >>> y = nbyoc.scatter_elements(data, np.array([[1, 0, 2], [0, -1, 1]]), updates, axis=0)
    >>> fn = nbyoc.compile(nbyoc.function([data, updates], y))
    >>> fn(np.zeros((3, 3), np.float32), np.array([[1, 2, 3], [4, 5, 6]], np.float32))
    array([[4., 2., 0.],
           [1., 0., 6.],
           [0., 5., 3.]], dtype=float32)
    >>> u = nbyoc.var("u", (1, 2))
    >>> twice = nbyoc.scatter_elements(data, np.array([[0, 0]]), u, axis=1)  # the last wins
    >>> nbyoc.compile(nbyoc.function([data, u], twice))(np.zeros((3, 3), np.float32),
    ...                                                 np.array([[7, 8]], np.float32))[0]
    array([8., 0., 0.], dtype=float32)
    """
    return call_op("scatter_elements", data, indices, updates, axis=axis, reduction=reduction)


def scatter_nd(data: Operand, indices: Operand, updates: Operand, reduction: str = "none") -> Expr:
    """A copy of ``data`` where each index tuple (a row along the last axis of
    ``indices``, int32 or int64, negative entries counting from the end) names a
    position among data's leading axes, and ``updates`` holds what goes there: its shape
    is ``indices.shape[:-1] + data.shape[k:]`` for tuples of length ``k`` (ONNX
    ScatterND, the inverse of ONNX GatherND).

    ``reduction`` combines as in ``scatter_elements`` (in the row-major order of the
    tuples); with ``"none"`` a tuple given twice keeps the last update. A tuple out of
    range is an error when it runs.

    >>> import numpy as np, nbyoc
    >>> data, rows = nbyoc.var("data", (4, 2)), nbyoc.var("rows", (3, 2))
    >>> y = nbyoc.scatter_nd(data, np.array([[0], [-1], [0]]), rows, reduction="add")
    >>> fn = nbyoc.compile(nbyoc.function([data, rows], y))
    >>> fn(np.ones((4, 2), np.float32), np.array([[1, 2], [3, 4], [5, 6]], np.float32))
    array([[7., 9.],
           [1., 1.],
           [1., 1.],
           [4., 5.]], dtype=float32)
    """
    return call_op("scatter_nd", data, indices, updates, reduction=reduction)
