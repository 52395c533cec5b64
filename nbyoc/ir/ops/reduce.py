"""Reductions: ``sum``, ``mean``, ``max``, ``min``, ``prod`` over some axes, and
``argmax``, ``argmin`` along one axis (or the flattened tensor), optionally keeping them.

The ``axis`` attribute is stored in normal form: a sorted tuple of
non-negative axes (``None``, "all axes", becomes every axis), so
``sum(x, axis=-1)`` and ``sum(x, axis=1)`` on a 2-D ``x`` are the same node.

>>> import nbyoc
>>> s = nbyoc.sum(nbyoc.var("x", (2, 3, 4), "int32"), axis=(-1, 0))
>>> s.type, dict(s.attrs)
(Tensor[(3,), int64], {'axis': (0, 2), 'keepdims': False})
"""

from __future__ import annotations

import operator

import numpy as np

from ...errors import EmptyReductionError, NbyocTypeError
from ..annotations import Axes, Operand
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import accumulate, dtype_info, same, to_float
from ..nodes import Expr
from ..op import Op, register_op
from ..types import TensorType


def normalize_axes(op_name: str, t: TensorType, axis) -> tuple[int, ...]:
    """``axis`` (None, an int or a sequence of ints) as a sorted tuple of axes of ``t``."""
    if axis is None:
        return tuple(range(t.ndim))
    try:
        axes = [operator.index(axis)] if not hasattr(axis, "__iter__") else list(axis)
        axes = [operator.index(a) for a in axes]
    except TypeError:
        raise NbyocTypeError(
            f"{op_name}: axis must be None, an int or ints, got {axis!r}"
        ) from None
    for a in axes:
        if not -t.ndim <= a < t.ndim:
            raise NbyocTypeError(
                f"{op_name}({t!r}): axis {a} is out of range for a {t.ndim}-D tensor; "
                f"use an axis in [{-t.ndim}, {t.ndim - 1}]"
            )
    normal = sorted(a % t.ndim for a in axes)
    if len(set(normal)) != len(normal):
        raise NbyocTypeError(f"{op_name}({t!r}): axis {axis!r} repeats an axis")
    return tuple(normal)


def reduced_shape(t: TensorType, axes, keepdims: bool) -> tuple[int, ...]:
    """The shape left after reducing ``axes`` of ``t`` (kept as length 1 if ``keepdims``).

    >>> reduced_shape(TensorType((2, 3, 4)), (0, 2), True)
    (1, 3, 1)
    """
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(t.shape))
    return tuple(d for i, d in enumerate(t.shape) if i not in axes)


def _reduce_rule(name: str, dtype_rule, needs_identity: bool):
    def infer(types, attrs):
        (t,) = types
        axes = normalize_axes(name, t, attrs["axis"])
        keepdims = attrs["keepdims"]
        if not isinstance(keepdims, bool):
            raise NbyocTypeError(f"{name}: keepdims must be True or False, got {keepdims!r}")
        if needs_identity and any(t.shape[a] == 0 for a in axes):
            raise NbyocTypeError(
                f"{name}({t!r}): reducing an axis of length 0 has no result "
                f"({name} has no identity); reduce over non-empty axes"
            )
        shape = reduced_shape(t, axes, keepdims)
        return TensorType(shape, dtype_rule(t.dtype)), {"axis": axes, "keepdims": keepdims}

    return infer


def _reduce_reference(fn, dtype_rule):
    def reference(x, axis, keepdims):
        out = fn(x, axis=axis, keepdims=keepdims)
        return np.asarray(out, dtype=dtype_rule(x.dtype.name))

    return reference


# name -> (NumPy reference, result dtype rule, needs a non-empty axis, summary)
REDUCE_OPS = {
    "sum": (np.sum, accumulate, False, "Sum over ``axis`` (int32 sums to int64, as in NumPy)"),
    "mean": (np.mean, to_float, False, "Arithmetic mean over ``axis``"),
    "max": (np.max, same, True, "Maximum over ``axis`` (NaN propagates)"),
    "min": (np.min, same, True, "Minimum over ``axis`` (NaN propagates)"),
    "prod": (np.prod, accumulate, False, "Product over ``axis`` (small integers multiply in "
             "int64 or uint64, as in NumPy)"),
}  # fmt: skip

for _name, (_fn, _rule, _identity, _summary) in REDUCE_OPS.items():
    register_op(
        Op(
            _name,
            1,
            _reduce_rule(_name, _rule, _identity),
            _reduce_reference(_fn, _rule),
            "reduce",
            _summary,
            attrs={"axis": Attr("ints", None), "keepdims": Attr("bool", False)},
        )
    )


def _arg_rule(name: str):
    def infer(types, attrs):
        (t,) = types
        axis, keepdims = attrs["axis"], attrs["keepdims"]
        if axis is None:  # the index into the flattened tensor, as NumPy gives it
            axes = tuple(range(t.ndim))
        else:
            axes = normalize_axes(name, t, axis)
            axis = axes[0]
        if t.size == 0 or any(t.shape[a] == 0 for a in axes):
            raise NbyocTypeError(
                f"{name}({t!r}): an empty sequence has no {name[3:]}imum to point at; "
                f"reduce over non-empty axes"
            )
        return TensorType(reduced_shape(t, axes, keepdims), "int64"), {
            "axis": axis,
            "keepdims": keepdims,
        }

    return infer


def _arg_reference(fn):
    def reference(x, axis, keepdims):
        return np.asarray(fn(x, axis=axis, keepdims=keepdims), dtype=np.int64)

    return reference


for _name, _fn, _summary in [
    ("argmax", np.argmax, "Index of the first maximum along ``axis`` (None: of the "
     "flattened tensor); a NaN is the maximum, as in NumPy"),
    ("argmin", np.argmin, "Index of the first minimum along ``axis`` (None: of the "
     "flattened tensor); a NaN is the minimum, as in NumPy"),
]:  # fmt: skip
    register_op(
        Op(_name, 1, _arg_rule(_name), _arg_reference(_fn), "reduce", _summary,
           attrs={"axis": Attr("int", None), "keepdims": Attr("bool", False)})
    )  # fmt: skip


def _require_rule(types, attrs):
    count, value = types
    if count.ndim != 0 or not dtype_info(count.dtype).is_integer:
        raise NbyocTypeError(
            f"require_nonempty: the count must be an integer scalar, got {count!r}"
        )
    return value, attrs


def _require_reference(count, value, reduction):
    if int(count) == 0:  # (NumPy's own messages for a reduction of nothing)
        if reduction in ("argmax", "argmin"):
            raise EmptyReductionError(f"attempt to get {reduction} of an empty sequence")
        raise EmptyReductionError(
            f"zero-size array to reduction operation {reduction} which has no identity"
        )
    return value


# A reduction without an identity (max, argmax...) of a selection whose size only the data
# tells (``x[mask].max()``): its value, or NumPy's error when nothing was selected. No
# backend takes it: the host checks the count, one scalar.
register_op(Op("require_nonempty", 2, _require_rule, _require_reference, "elementwise",
               "``value`` unless ``count`` is 0, when it raises NumPy's ValueError for a "
               "``reduction`` of nothing (a masked max, argmax...)",
               attrs={"reduction": Attr("str")}))  # fmt: skip


def sum(x: Operand, axis: Axes = None, keepdims: bool = False) -> Expr:
    """Sum of ``x`` over ``axis`` (``None``: all axes), like ``np.sum``.

    >>> import nbyoc
    >>> nbyoc.sum(nbyoc.var("x", (2, 3)), axis=1, keepdims=True).shape
    (2, 1)
    """
    return call_op("sum", x, axis=axis, keepdims=keepdims)


def mean(x: Operand, axis: Axes = None, keepdims: bool = False) -> Expr:
    """Mean of ``x`` over ``axis``, like ``np.mean`` (integers give float64).

    >>> import nbyoc
    >>> nbyoc.mean(nbyoc.var("x", (2, 3), "int64")).type
    Tensor[(), float64]
    """
    return call_op("mean", x, axis=axis, keepdims=keepdims)


def max(x: Operand, axis: Axes = None, keepdims: bool = False) -> Expr:
    """Maximum of ``x`` over ``axis``, like ``np.max``.

    >>> import nbyoc
    >>> nbyoc.max(nbyoc.var("x", (2, 3)), axis=0).shape
    (3,)
    """
    return call_op("max", x, axis=axis, keepdims=keepdims)
