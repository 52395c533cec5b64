"""NumPy's reductions and scans on graph values: ``np.sum``, ``mean``, ``max``, ``min``,
``prod``, ``argmax``, ``argmin``, ``var``, ``std``, ``ptp``, ``any``, ``all``, ``cumsum``,
``cumprod`` and NumPy 2.1's ``cumulative_sum`` / ``cumulative_prod``, each taking NumPy's
arguments and building nbyoc's ops (the array functions and the ndarray methods share them).

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (2, 3), "int8")
>>> reduction("sum")(x, axis=1, keepdims=True).type  # (as NumPy: int8 sums in int64)
Tensor[(2, 1), int64]
>>> scan("cumsum", x, None, "int64").type
Tensor[(6,), int64]
"""

from __future__ import annotations

import numpy as np

from ...ir import ops
from ...ir.dtypes import normalize_dtype
from .refusals import refuse


def reduction(op: str):
    """The builder of NumPy's reduction ``op`` (``sum``, ``mean``, ``max``, ...)."""

    def build(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        if dtype is not None or out is not None or kwargs:
            extra = ["dtype"] * (dtype is not None) + ["out"] * (out is not None) + list(kwargs)
            refuse(op, f"takes no {', '.join(extra)}= on graph values; use nbyoc.{op}(x, axis=...)")
        return getattr(ops, op)(a, axis=axis, keepdims=keepdims)

    return build


def arg_reduction(op: str):
    """The builder of ``np.argmax`` / ``np.argmin``."""

    def build(a, axis=None, out=None, *, keepdims=False):
        if out is not None:
            refuse(op, "takes no out= on graph values")
        return getattr(ops, op)(a, axis=axis, keepdims=keepdims)

    return build


def scan(op: str, a, axis, dtype=None):
    """The scan ``op`` of ``a`` along ``axis`` (None: of the flattened ``a``) computed in
    and giving ``dtype`` (None: the op's own result dtype). Wrapping integer sums and
    products computed wider then cast to ``dtype`` give what NumPy's in ``dtype`` give."""
    if dtype is not None:
        dtype = normalize_dtype(dtype)
        a = a if a.dtype == dtype else ops.cast(a, dtype)
    out = getattr(ops, op)(a, axis=axis)
    return out if dtype is None or out.dtype == dtype else ops.cast(out, dtype)


def cumulative(op: str):
    """The builder of ``np.cumsum`` / ``np.cumprod``."""

    def build(a, axis=None, dtype=None, out=None):
        if out is not None:
            refuse(op, "takes no out= on graph values")
        return scan(op, a, axis, dtype)

    return build


def cumulative_array_api(op: str, identity: int):
    """np.cumulative_sum / np.cumulative_prod (NumPy 2.1): the scan, with the identity
    first along the axis when ``include_initial``."""

    def build(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        if out is not None:
            refuse(op, "takes no out= on graph values")
        if axis is None and x.ndim != 1:
            refuse(op, "needs axis= for an array of more than one dimension (as NumPy)")
        axis = 0 if axis is None else axis
        scanned = scan(op, x, axis, dtype)
        if not include_initial:
            return scanned
        shape = list(scanned.shape)
        shape[axis % len(shape)] = 1
        first = ops.broadcast_to(np.asarray(identity, scanned.dtype), tuple(shape))
        return ops.concatenate([first, scanned], axis=axis)

    return build


def variance(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    """np.var as ops: the mean of squared deviations from the mean, over n - ddof."""
    if dtype is not None or out is not None or kwargs:
        refuse("var", "takes no dtype=, out=, where= on graph values")
    mean = ops.mean(a, axis=axis, keepdims=True)
    deviation = a - mean
    squares = deviation * deviation
    if ddof == 0:
        return ops.mean(squares, axis=axis, keepdims=keepdims)
    axes = range(a.ndim) if axis is None else np.atleast_1d(axis).tolist()
    count = int(np.prod([a.shape[ax] for ax in axes]))
    return ops.sum(squares, axis=axis, keepdims=keepdims) / (count - ddof)


def deviation(a, *args, **kwargs):
    """np.std: the square root of ``variance``."""
    return ops.sqrt(variance(a, *args, **kwargs))


def peak_to_peak(a, axis=None, out=None, keepdims=False):
    """np.ptp: ``max - min`` along ``axis``."""
    if out is not None:
        refuse("ptp", "takes no out= on graph values")
    return ops.subtract(ops.max(a, axis=axis, keepdims=keepdims),
                        ops.min(a, axis=axis, keepdims=keepdims))  # fmt: skip


def truth(name: str):
    """The builder of ``np.any`` (``name``) / ``np.all``: the max / min of ``a != 0`` (of
    ``a`` itself for bools)."""
    op = "max" if name == "any" else "min"

    def build(a, axis=None, out=None, keepdims=False, *, where=None):
        if out is not None or where is not None:
            refuse(name, "takes no out= or where= on graph values")
        nonzero = a if a.dtype == "bool" else ops.not_equal(a, 0)
        if nonzero.type.size == 0:  # (NumPy: any of nothing is False, all of nothing True)
            refuse(name, "of an empty array on graph values; its result is a constant")
        return getattr(ops, op)(nonzero, axis=axis, keepdims=keepdims)

    build.__name__ = name
    return build
