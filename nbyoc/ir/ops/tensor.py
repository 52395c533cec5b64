"""Ops that move data rather than combine it elementwise: matmul, reshape, transpose,
concatenate. Their attributes are stored in normal form (concrete shapes,
non-negative axes).

>>> import nbyoc
>>> a, b = nbyoc.var("a", (5, 2, 3)), nbyoc.var("b", (3, 4))
>>> (a @ b).type
Tensor[(5, 2, 4), float32]
>>> dict(nbyoc.reshape(b, (-1,)).attrs)
{'newshape': (12,)}
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy as np

from ...errors import NbyocTypeError
from ..annotations import Operand, ShapeLike
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import promote
from ..nodes import Expr
from ..op import Op, describe, register_op
from ..symbols import SizeExpr, require
from ..types import TensorType
from .elementwise import broadcast_shapes


def _matmul_rule(types, attrs):
    a, b = types
    if a.ndim == 0 or b.ndim == 0:
        raise NbyocTypeError(
            f"matmul({describe(types)}): operands must have at least one dimension; "
            f"use multiply for scalars"
        )
    # NumPy: a 1-D left operand is a row, a 1-D right operand a column; both dims go again.
    a_shape = (1, *a.shape) if a.ndim == 1 else a.shape
    b_shape = (*b.shape, 1) if b.ndim == 1 else b.shape
    if a_shape[-1] != b_shape[-2] and not (a.symbols or b.symbols):
        raise NbyocTypeError(
            f"matmul({describe(types)}): inner dimensions differ ({a_shape[-1]} vs "
            f"{b_shape[-2]}); the last axis of the left operand must match the "
            f"second-to-last of the right (transpose one of them?)"
        )
    require("equal", a_shape[-1], b_shape[-2], where="matmul's inner dimensions")
    batch = broadcast_shapes(
        "matmul", (TensorType(a_shape[:-2], a.dtype), TensorType(b_shape[:-2], b.dtype))
    )
    shape = batch + (a_shape[-2],) * (a.ndim > 1) + (b_shape[-1],) * (b.ndim > 1)
    return TensorType(shape, promote(a.dtype, b.dtype)), attrs


def _reshape_rule(types, attrs):
    (t,) = types
    dims = list(attrs["newshape"])  # ints and symbolic sizes (the attribute's kind)
    for d in dims:
        if isinstance(d, SizeExpr):
            require("at_least", d, 0, where=f"reshape to {tuple(dims)}")
    if dims.count(-1) > 1 or any(isinstance(d, int) and d < -1 for d in dims):
        raise NbyocTypeError(
            f"reshape({t!r}): newshape {tuple(dims)} may hold one -1 and no other negative size"
        )
    known = math.prod(d for d in dims if d != -1)
    if -1 in dims:
        if known == 0:
            raise NbyocTypeError(
                f"reshape({t!r}): cannot infer the -1 in {tuple(dims)} from {t.size} elements"
            )
        require("divisible", t.size, known, where=f"reshape to {tuple(dims)}",
                error=f"reshape({t!r}): cannot infer the -1 in {tuple(dims)} from {t.size} "
                      f"elements")  # fmt: skip
        dims[dims.index(-1)] = t.size // known
    else:
        require("equal", known, t.size, where=f"reshape to {tuple(dims)}",
                error=f"reshape({t!r}): newshape {tuple(dims)} has {known} elements, the "
                      f"input {t.size}; sizes must multiply to the same total")  # fmt: skip
    return TensorType(dims, t.dtype), {"newshape": tuple(dims)}


def _transpose_rule(types, attrs):
    (t,) = types
    axes = attrs["axes"]
    if axes is None:
        axes = tuple(reversed(range(t.ndim)))
    try:
        axes = tuple(operator.index(a) for a in axes)
    except TypeError:
        raise NbyocTypeError(f"transpose: axes must be a sequence of ints, got {axes!r}") from None
    in_range = all(-t.ndim <= a < t.ndim for a in axes)
    if not in_range or sorted(a % t.ndim for a in axes) != list(range(t.ndim)):
        raise NbyocTypeError(
            f"transpose({t!r}): axes {axes} must be a permutation of {tuple(range(t.ndim))}"
        )
    normal = tuple(a % t.ndim for a in axes)
    return TensorType(tuple(t.shape[a] for a in normal), t.dtype), {"axes": normal}


def _concatenate_rule(types, attrs):
    first = types[0]
    if first.ndim == 0:
        raise NbyocTypeError(
            f"concatenate({describe(types)}): 0-d tensors cannot be concatenated; "
            f"reshape them to (1,) first"
        )
    try:
        axis = operator.index(attrs["axis"])
    except TypeError:
        raise NbyocTypeError(f"concatenate: axis must be an int, got {attrs['axis']!r}") from None
    if not -first.ndim <= axis < first.ndim:
        raise NbyocTypeError(
            f"concatenate({describe(types)}): axis {axis} is out of range for "
            f"{first.ndim}-D tensors"
        )
    axis %= first.ndim
    wrong = (f"concatenate({describe(types)}) along axis {axis}: all operands need the "
             f"same rank and the same size on every other axis")  # fmt: skip
    for t in types[1:]:
        if t.ndim != first.ndim:
            raise NbyocTypeError(wrong)
        for i, (d, e) in enumerate(zip(t.shape, first.shape)):
            if i != axis:
                require("equal", d, e, where=f"concatenate on axis {i}", error=wrong)
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return TensorType(shape, promote(*(t.dtype for t in types))), {"axis": axis}


def _reshape_reference(x, newshape):
    return np.reshape(x, newshape)


def _transpose_reference(x, axes):
    return np.transpose(x, axes)


def _concatenate_reference(*arrays, axis):
    return np.concatenate(arrays, axis=axis)


register_op(
    Op(
        "matmul",
        2,
        _matmul_rule,
        np.matmul,
        "matmul",
        "Matrix product with NumPy's rules (batched, broadcasting)",
    )
)
register_op(
    Op(
        "reshape",
        1,
        _reshape_rule,
        _reshape_reference,
        "layout",
        "The same elements in a new shape (C order)",
        attrs={"newshape": Attr("sizes")},
    )
)
register_op(
    Op(
        "transpose",
        1,
        _transpose_rule,
        _transpose_reference,
        "layout",
        "Permute axes (default: reverse them)",
        attrs={"axes": Attr("ints", None)},
    )
)
register_op(Op("concatenate", None, _concatenate_rule, _concatenate_reference, "layout",
               "Join tensors along an existing axis", attrs={"axis": Attr("int", 0)}))  # fmt: skip


def matmul(a: Operand, b: Operand) -> Expr:
    """Matrix product, like ``np.matmul``: 2-D, batched with broadcast batch axes, or 1-D.

    >>> import nbyoc
    >>> nbyoc.matmul(nbyoc.var("a", (4, 3)), nbyoc.var("b", (3,))).shape
    (4,)
    """
    return call_op("matmul", a, b)


def reshape(x: Operand, newshape: ShapeLike) -> Expr:
    """The elements of ``x`` in shape ``newshape`` (one entry may be -1).

    >>> import nbyoc
    >>> nbyoc.reshape(nbyoc.var("x", (2, 6)), (3, -1)).shape
    (3, 4)
    """
    return call_op("reshape", x, newshape=newshape)


def transpose(x: Operand, axes: Sequence[int] | None = None) -> Expr:
    """Permute the axes of ``x``; without ``axes`` reverse them.

    >>> import nbyoc
    >>> nbyoc.transpose(nbyoc.var("x", (2, 3, 4)), (0, 2, 1)).shape
    (2, 4, 3)
    """
    return call_op("transpose", x, axes=axes)


def concatenate(xs: Sequence[Operand], axis: int = 0) -> Expr:
    """Join the tensors ``xs`` along ``axis``.

    >>> import nbyoc
    >>> a, b = nbyoc.var("a", (2, 3)), nbyoc.var("b", (2, 5))
    >>> nbyoc.concatenate([a, b], axis=1).shape
    (2, 8)
    """
    return call_op("concatenate", *xs, axis=axis)
