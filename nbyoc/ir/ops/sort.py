"""Sorting and sorted sequences: ``sort``, ``argsort``, ``argtopk``, ``take_along_axis``,
``searchsorted``, ``interp``, and the ``top_k`` builder.

Every sort orders as NumPy does: NaN after every number (so NaN is the largest value,
as ``argmax`` also takes it). ``argsort`` and ``argtopk`` are stable: equal values keep
the order they come in, also when ``descending`` (or ``largest``) reverses the order of
values (the first of ties first, as ONNX's TopK asks), so a descending order puts NaN
first. ``sort`` gives ``np.sort``'s values (its fast sort: only -0.0 and 0.0 could tell
a stable sort from it). No backend has rows for these ops: the host runs NumPy's own
sorts, which are the fast path.

>>> import nbyoc
>>> x = nbyoc.var("x", (4, 10))
>>> nbyoc.argsort(x, descending=True).type
Tensor[(4, 10), int64]
>>> [v.type for v in nbyoc.top_k(x, 3)]
[Tensor[(4, 3), float32], Tensor[(4, 3), int64]]
"""

from __future__ import annotations

import numpy as np

from ...errors import NbyocTypeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import dtype_info, promote
from ..nodes import Expr
from ..op import Op, describe, register_op
from ..symbols import require
from ..types import TensorType
from .elementwise import broadcast_shapes
from .nn import normalize_axis


def _one_axis(name: str, t: TensorType, axis) -> int:
    if t.ndim == 0:
        raise NbyocTypeError(
            f"{name}({t!r}): a 0-d tensor has no axis to sort along; reshape it to (1,) first"
        )
    return normalize_axis(name, t, axis)


def stable_argsort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The stable order of ``x`` along ``axis``: NaN last ascending, first descending;
    equal values in the order they come in either way.

    >>> stable_argsort(np.array([1.0, np.nan, 3.0, 1.0]), 0, True).tolist()
    [1, 2, 0, 3]
    """
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    # Ascending on the reversed axis puts later ties first; reversed back, earlier ones
    # come first, the values descend, and NaN (last ascending) comes first.
    n = x.shape[axis]
    flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(n - 1 - flipped, axis)


def _sort_rule(name: str, dtype_of):
    def infer(types, attrs):
        (t,) = types
        axis = _one_axis(name, t, attrs["axis"])
        return TensorType(t.shape, dtype_of(t.dtype)), {**attrs, "axis": axis}

    return infer


def _sort_reference(x, axis, descending):
    # (NumPy's default sort: SIMD, 19x its stable one on float32 rows of 1024)
    out = np.sort(x, axis=axis)
    return np.ascontiguousarray(np.flip(out, axis)) if descending else out


def _argsort_reference(x, axis, descending):
    return np.ascontiguousarray(stable_argsort(x, axis, descending)).astype(np.int64)


_ORDER_ATTRS = {"axis": Attr("int", -1), "descending": Attr("bool", False)}
register_op(Op("sort", 1, _sort_rule("sort", lambda d: d), _sort_reference, "reduce",
               "The values along ``axis`` in order (stable; NaN last, first if "
               "``descending``), as ``np.sort``", attrs=_ORDER_ATTRS))  # fmt: skip
register_op(Op("argsort", 1, _sort_rule("argsort", lambda d: "int64"), _argsort_reference,
               "reduce", "The indices that sort ``x`` along ``axis`` (stable: equal values "
               "keep their order), as ``np.argsort(kind='stable')``",
               attrs=_ORDER_ATTRS))  # fmt: skip


def _argtopk_rule(types, attrs):
    (t,) = types
    axis = _one_axis("argtopk", t, attrs["axis"])
    k = attrs["k"]
    if k < 0:
        raise NbyocTypeError(f"argtopk({t!r}): k={k} is negative; ask for 0 or more elements")
    require("at_least", t.shape[axis], k, where=f"argtopk's k={k} along axis {axis}",
            error=f"argtopk({t!r}): k={k} is more than the {t.shape[axis]} elements along "
                  f"axis {axis}")  # fmt: skip
    shape = list(t.shape)
    shape[axis] = k
    return TensorType(shape, "int64"), {**attrs, "axis": axis}


def _argtopk_reference(x, k, axis, largest):
    """The first k of the stable order, without sorting everything: the k-th value by
    np.partition (NaN last, as the order has it), every value beyond it and the first
    of those tied with it, then those k sorted (3.3x the full sort for k = 5 of 1024)."""
    n = x.shape[axis]
    if k == 0:
        return np.zeros((*x.shape[:axis], 0, *x.shape[axis + 1 :]), np.int64)
    moved = np.moveaxis(x, axis, -1)
    rows = moved.reshape(-1, n)
    at = n - k if largest else k - 1
    kth = np.partition(rows, at, axis=1)[:, at : at + 1]
    if rows.dtype.kind == "f":
        nan, kth_nan = np.isnan(rows), np.isnan(kth)
        beyond = (rows > kth) | (nan & ~kth_nan) if largest else (rows < kth) | (~nan & kth_nan)
        tied = (rows == kth) | (nan & kth_nan)
    else:
        beyond = rows > kth if largest else rows < kth
        tied = rows == kth
    room = k - beyond.sum(axis=1, keepdims=True)
    chosen = beyond | (tied & (np.cumsum(tied, axis=1) <= room))
    picked = np.nonzero(chosen)[1].reshape(-1, k)  # (k a row, in index order)
    order = stable_argsort(np.take_along_axis(rows, picked, 1), 1, descending=largest)
    result = np.take_along_axis(picked, order, 1).astype(np.int64)
    return np.ascontiguousarray(np.moveaxis(result.reshape(*moved.shape[:-1], k), -1, axis))


register_op(Op("argtopk", 1, _argtopk_rule, _argtopk_reference, "reduce",
               "The indices of the ``k`` largest (or smallest) values along ``axis``, in "
               "order, the first of equal values first (ONNX TopK's); NaN is the largest",
               attrs={"k": Attr("int"), "axis": Attr("int", -1),
                      "largest": Attr("bool", True)}))  # fmt: skip


def _take_along_axis_rule(types, attrs):
    x, indices = types
    if not dtype_info(indices.dtype).is_integer:
        raise NbyocTypeError(f"take_along_axis: indices must be integers, got {indices!r}")
    axis = _one_axis("take_along_axis", x, attrs["axis"])
    if indices.ndim != x.ndim:
        raise NbyocTypeError(
            f"take_along_axis({describe(types)}): indices need x's rank ({x.ndim}); "
            f"reshape them (as np.take_along_axis asks)"
        )
    others = [TensorType((*t.shape[:axis], 1, *t.shape[axis + 1 :]), t.dtype) for t in types]
    shape = list(broadcast_shapes("take_along_axis", tuple(others)))
    shape[axis] = indices.shape[axis]
    return TensorType(shape, x.dtype), {"axis": axis}


def _take_along_axis_reference(x, indices, axis):
    size = x.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise IndexError(f"take_along_axis: an index is out of range for an axis of length {size}")
    return np.ascontiguousarray(np.take_along_axis(x, indices.astype(np.int64), axis))


register_op(Op("take_along_axis", 2, _take_along_axis_rule, _take_along_axis_reference,
               "layout", "The elements of ``x`` at ``indices`` along ``axis`` (the other axes "
               "broadcast), as ``np.take_along_axis``; ONNX's GatherElements",
               attrs={"axis": Attr("int")}))  # fmt: skip


def _searchsorted_rule(types, attrs):
    a, v = types
    if a.ndim != 1:
        raise NbyocTypeError(f"searchsorted({describe(types)}): the sorted sequence must be 1-D")
    promote(a.dtype, v.dtype)  # (refuses dtypes with no common one)
    return TensorType(v.shape, "int64"), attrs


def _searchsorted_reference(a, v, side):
    return np.asarray(np.searchsorted(a, v, side=side), np.int64)


register_op(Op("searchsorted", 2, _searchsorted_rule, _searchsorted_reference, "reduce",
               "Where each of ``v`` would go in the sorted 1-D ``a`` to keep it sorted: "
               "before equal values (side left) or after them (right), as ``np.searchsorted``",
               attrs={"side": Attr("str", "left", choices=("left", "right"))}))  # fmt: skip


def _interp_rule(types, attrs):
    x, xp, fp = types
    if xp.ndim != 1 or fp.ndim != 1:
        raise NbyocTypeError(f"interp({describe(types)}): xp and fp must be 1-D")
    require("equal", xp.shape[0], fp.shape[0], where="interp's xp and fp",
            error=f"interp({describe(types)}): xp and fp must have the same length")  # fmt: skip
    require("at_least", xp.shape[0], 1, where="interp's xp",
            error=f"interp({describe(types)}): xp is empty; give at least one point")  # fmt: skip
    for t in types:
        if dtype_info(t.dtype).kind not in ("int", "uint", "float", "bool"):
            raise NbyocTypeError(f"interp: {t!r} is not a real number tensor")
    return TensorType(x.shape, "float64"), attrs


def _interp_reference(x, xp, fp, left, right):
    return np.asarray(np.interp(x, xp, fp, left=left, right=right), np.float64)


register_op(Op("interp", 3, _interp_rule, _interp_reference, "reduce",
               "Piecewise-linear interpolation of the points (``xp``, ``fp``) at ``x`` "
               "(``xp`` increasing), ``left`` / ``right`` (default: fp's ends) outside, "
               "in float64, as ``np.interp``",
               attrs={"left": Attr("float", None), "right": Attr("float", None)}))  # fmt: skip


# -- builders ---------------------------------------------------------------------------


def _flattened(x, axis):
    return (call_op("reshape", x, newshape=(-1,)), 0) if axis is None else (x, axis)


def sort(x: Operand, axis: int | None = -1, descending: bool = False) -> Expr:
    """``x`` sorted along ``axis`` (None: the flattened ``x``), stably, NaN last (first
    if ``descending``), as ``np.sort``.

    >>> import nbyoc
    >>> nbyoc.sort(nbyoc.var("x", (2, 3)), axis=None).shape
    (6,)
    """
    x, axis = _flattened(x, axis)
    return call_op("sort", x, axis=axis, descending=descending)


def argsort(x: Operand, axis: int | None = -1, descending: bool = False) -> Expr:
    """The indices that sort ``x`` along ``axis`` (None: the flattened ``x``), stably,
    as ``np.argsort(kind="stable")``.

    >>> import nbyoc
    >>> nbyoc.argsort(nbyoc.var("x", (2, 3)), axis=0).type
    Tensor[(2, 3), int64]
    """
    x, axis = _flattened(x, axis)
    return call_op("argsort", x, axis=axis, descending=descending)


def top_k(x: Operand, k: int, axis: int = -1, largest: bool = True) -> tuple[Expr, Expr]:
    """The ``k`` largest (or smallest) values of ``x`` along ``axis`` and their indices,
    as a tuple ``(values, indices)``, in order, the first of equal values first (ONNX
    TopK; torch.topk). Built from ``argtopk`` and ``take_along_axis``.

    >>> import nbyoc
    >>> values, indices = nbyoc.top_k(nbyoc.var("x", (5, 8)), 2, axis=0, largest=False)
    >>> values.shape, indices.type.dtype
    ((2, 8), 'int64')
    """
    indices = call_op("argtopk", x, k=k, axis=axis, largest=largest)
    return call_op("take_along_axis", x, indices, axis=axis), indices
