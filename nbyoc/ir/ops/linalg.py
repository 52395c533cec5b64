"""Linear algebra: ``svdvals`` (the one op: singular values, on the host) and the
``norm`` builder, every vector and matrix norm ``np.linalg.norm`` defines, built from
abs, multiply, sum, max, min, sqrt and power (and svdvals for the matrix 2-norm, its
negative and the nuclear norm).

As in NumPy, integer and bool tensors are normed in float64, float ones in their own
dtype; ``ord=None`` without an axis is the 2-norm of the flattened tensor whatever
its rank.

>>> import nbyoc
>>> x = nbyoc.var("x", (4, 3, 5))
>>> norm(x, axis=1).shape, norm(x, ord=1, axis=(0, 2), keepdims=True).shape
((4, 5), (1, 3, 1))
>>> norm(x).shape, nbyoc.svdvals(x).shape
((), (4, 3))
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ...errors import NbyocTypeError
from ..annotations import Axes, Operand
from ..builder import call_op
from ..dtypes import dtype_info
from ..nodes import Expr
from ..op import Op, register_op
from ..types import TensorType


def _svdvals_rule(types, attrs):
    (t,) = types
    if t.ndim < 2:
        raise NbyocTypeError(f"svdvals({t!r}): needs a matrix (or a stack of them), 2-D or more")
    info = dtype_info(t.dtype)
    if info.is_float and info.bits < 32:
        raise NbyocTypeError(
            f"svdvals({t!r}): NumPy's SVD takes float32 and float64; cast x to float32 first"
        )
    dtype = t.dtype if info.is_float else "float64"
    return TensorType((*t.shape[:-2], min(t.shape[-2:])), dtype), attrs


def _svdvals_reference(x):
    dtype = x.dtype if x.dtype.kind == "f" else np.float64
    return np.linalg.svd(x.astype(dtype, copy=False), compute_uv=False).astype(dtype)


register_op(Op("svdvals", 1, _svdvals_rule, _svdvals_reference, "reduce",
               "The singular values of each matrix over the last two axes, largest first "
               "(``np.linalg.svd(x, compute_uv=False)``)"))  # fmt: skip


def _abs(x):
    return call_op("abs", x)


def _as_float(x):
    return x if dtype_info(x.type.dtype).is_float else call_op("cast", x, to="float64")


def _vector_norm(x, ord, axis: int, keepdims: bool):
    if ord is None or ord == 2:
        return call_op("sqrt", call_op("sum", x * x, axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise NbyocTypeError(f"norm: ord={ord!r} is a matrix norm; vectors take numbers")
    if ord == math.inf:
        return call_op("max", _abs(x), axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return call_op("min", _abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:  # how many are not zero
        nonzero = call_op("cast", call_op("not_equal", x, 0.0), to=x.type.dtype)
        return call_op("sum", nonzero, axis=axis, keepdims=keepdims)
    if ord == 1:
        return call_op("sum", _abs(x), axis=axis, keepdims=keepdims)
    p = float(ord)
    total = call_op("sum", call_op("power", _abs(x), p), axis=axis, keepdims=keepdims)
    return call_op("power", total, 1 / p)


def _matrix_norm(x, ord, rows: int, columns: int, keepdims: bool):
    if ord in (2, -2, "nuc"):
        others = [a for a in range(x.type.ndim) if a not in (rows, columns)]
        singular = call_op("svdvals", call_op("transpose", x, axes=(*others, rows, columns)))
        reduce = {2: "max", -2: "min", "nuc": "sum"}[ord]
        out = call_op(reduce, singular, axis=-1)
    elif ord in (None, "fro", "f"):
        out = call_op("sqrt", call_op("sum", x * x, axis=(rows, columns)))
    elif ord in (1, -1, math.inf, -math.inf):
        # 1: the largest column sum of |x| (sum over rows); inf: the largest row sum.
        summed, kept = (rows, columns) if ord in (1, -1) else (columns, rows)
        sums = call_op("sum", _abs(x), axis=summed)
        out = call_op("max" if ord > 0 else "min", sums, axis=kept - (kept > summed))
    else:
        raise NbyocTypeError(
            f"norm: ord={ord!r} is no matrix norm; use None, 'fro', 'nuc', 1, -1, 2, -2, "
            f"inf or -inf"
        )
    if keepdims:
        shape = [1 if a in (rows, columns) else n for a, n in enumerate(x.type.shape)]
        out = call_op("reshape", out, newshape=tuple(shape))
    return out


def norm(
    x: Operand, ord: float | str | None = None, axis: Axes = None, keepdims: bool = False
) -> Expr:
    """``np.linalg.norm(x, ord, axis, keepdims)`` as a graph: an int ``axis`` is a vector
    norm along it, two axes a matrix norm over them; no axis is the vector norm of a
    1-D ``x``, the matrix norm of a 2-D one, and with ``ord=None`` the 2-norm of the
    flattened ``x``.

    >>> import nbyoc
    >>> norm(nbyoc.var("x", (3, 4)), ord="nuc").shape
    ()
    """
    x = _as_float(x)
    ndim = x.type.ndim
    if axis is None:
        if ord is None or (ord in ("f", "fro") and ndim == 2) or (ord == 2 and ndim == 1):
            out = _vector_norm(call_op("reshape", x, newshape=(-1,)), None, 0, False)
            return call_op("reshape", out, newshape=(1,) * ndim) if keepdims else out
        axis = tuple(range(ndim))
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    try:
        axes = tuple(operator.index(a) for a in axes)
    except TypeError:
        raise NbyocTypeError(f"norm: axis must be None, an int or two ints, got {axis!r}") from None
    if any(not -ndim <= a < ndim for a in axes):
        raise NbyocTypeError(f"norm: axis {axis!r} is out of range for {x.type!r}")
    axes = tuple(a % ndim for a in axes)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        if axes[0] == axes[1]:
            raise NbyocTypeError(f"norm: axis {axis!r} names one axis twice")
        return _matrix_norm(x, ord, axes[0], axes[1], keepdims)
    raise NbyocTypeError(
        f"norm of {x.type!r}: give axis (one int: vector norms; two: matrix norms) for a "
        f"tensor of more than two dimensions, or ord=None for the flattened 2-norm"
    )
