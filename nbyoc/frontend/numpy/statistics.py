"""NumPy's NaN-ignoring reductions (``np.nansum``, ``nanmean``, ``nanmax``, ``nanmin``,
``nanvar``, ``nanstd``), ``np.percentile`` / ``np.quantile`` (the default linear method),
``np.digitize`` by bins known when tracing and ``np.convolve`` of float arrays, each
taking NumPy's arguments and giving NumPy's results and dtypes, as graphs of nbyoc ops.

A slice that is all NaN gives what NumPy gives (NaN from ``nanmean`` and ``nanmax``, 0
from ``nansum``), without NumPy's RuntimeWarning.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (4, 5))
>>> nan_reduction("nanmean")(x, axis=0).type, percentile(x, [5, 95], axis=1).shape
(Tensor[(5,), float32], (2, 4))
"""

from __future__ import annotations

import numpy as np

from ...ir import ops
from ...ir.builder import const
from ...ir.dtypes import dtype_info
from .refusals import refuse


def _axes(a, axis) -> list[int]:
    return list(range(a.ndim)) if axis is None else [d % a.ndim for d in np.atleast_1d(axis)]


def nan_reduction(name: str):
    """The builder of ``np.<name>`` (``nansum``, ``nanmean``, ``nanmax``, ``nanmin``,
    ``nanvar``, ``nanstd``): the reduction over the elements that are not NaN."""

    def build(a, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **kwargs):
        if dtype is not None or out is not None or kwargs:
            refuse(name, "takes no dtype=, out= or where= on graph values")
        if not dtype_info(a.dtype).is_float:  # (no NaN: the plain reduction, as NumPy)
            if name in ("nansum", "nanmean", "nanmax", "nanmin"):
                return getattr(ops, name[3:])(a, axis=axis, keepdims=keepdims)
            variance = _variance(a, ops.not_equal(a, a), axis, keepdims, ddof)
            return ops.sqrt(variance) if name == "nanstd" else variance
        missing = ops.isnan(a)
        if name == "nansum":
            return ops.sum(ops.where(missing, _zero(a), a), axis=axis, keepdims=keepdims)
        if name == "nanmean":
            total = ops.sum(ops.where(missing, _zero(a), a), axis=axis, keepdims=keepdims)
            return ops.divide(total, ops.cast(_count(missing, axis, keepdims), a.dtype))
        if name in ("nanmax", "nanmin"):
            fill = -np.inf if name == "nanmax" else np.inf
            kept = ops.where(missing, const(np.asarray(fill, dtype_info(a.dtype).numpy)), a)
            extreme = getattr(ops, name[3:])(kept, axis=axis, keepdims=keepdims)
            nothing = ops.min(missing, axis=axis, keepdims=keepdims)  # (all NaN: NaN)
            return ops.where(nothing, _nan(a), extreme)
        variance = _variance(a, missing, axis, keepdims, ddof)
        return ops.sqrt(variance) if name == "nanstd" else variance

    build.__name__ = name
    return build


def _zero(a):
    return const(np.zeros((), dtype_info(a.dtype).numpy))


def _nan(a):
    return const(np.full((), np.nan, dtype_info(a.dtype).numpy))


def _count(missing, axis, keepdims):
    return ops.sum(ops.cast(ops.logical_not(missing), "int64"), axis=axis, keepdims=keepdims)


def _variance(a, missing, axis, keepdims, ddof):
    """The mean squared deviation from the mean of the elements not ``missing``, over
    their count less ``ddof`` (NaN where that is not positive, as NumPy's)."""
    if not dtype_info(a.dtype).is_float:
        a = ops.cast(a, "float64")
    zero = _zero(a)
    count = ops.cast(_count(missing, axis, True), a.dtype)
    mean = ops.divide(ops.sum(ops.where(missing, zero, a), axis=axis, keepdims=True), count)
    deviation = ops.where(missing, zero, ops.subtract(a, mean))
    squares = ops.sum(ops.multiply(deviation, deviation), axis=axis, keepdims=True)
    over = ops.subtract(count, float(ddof))
    variance = ops.where(ops.greater(over, 0.0), ops.divide(squares, over), _nan(a))
    if keepdims:
        return variance
    return ops.reshape(variance, tuple(d for k, d in enumerate(variance.shape)
                                        if k not in _axes(a, axis)))  # fmt: skip


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
    """np.percentile with NumPy's default method (linear), ``q`` known when tracing (a
    number or a sequence, from 0 to 100), one axis or None."""
    return _quantile(a, q, 100, axis, out, method, keepdims, weights, interpolation,
                     "percentile")  # fmt: skip


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):  # fmt: skip
    """np.quantile: ``percentile`` with ``q`` from 0 to 1."""
    return _quantile(a, q, 1, axis, out, method, keepdims, weights, interpolation,
                     "quantile")  # fmt: skip


def _quantile(a, q, scale, axis, out, method, keepdims, weights, interpolation, name):
    # (NumPy 2: a Python number q is weak, a list or an array strong: float64 results)
    weak = isinstance(q, (int, float)) and not isinstance(q, bool)
    strong = None if weak else np.asarray(q).dtype
    q = np.asarray(q, dtype=np.float64) / scale
    if out is not None or weights is not None or interpolation is not None:
        refuse(name, "takes no out=, weights= or interpolation= on graph values")
    if method != "linear":
        refuse(name, f"computes method='linear' (NumPy's default) only, not {method!r}")
    if not np.all((q >= 0) & (q <= 1)):
        refuse(name, f"needs q within [0, {100 if name == 'percentile' else 1}]")
    if axis is not None and not isinstance(axis, (int, np.integer)):
        refuse(name, "takes one axis or None on graph values")
    # (keepdims: the reduced axes kept as 1s, after q's axes)
    kept = tuple(1 if axis is None or k == axis % a.ndim else d for k, d in enumerate(a.shape))
    if axis is None:
        a, axis = ops.reshape(a, (-1,)), 0
    axis = axis % a.ndim
    n = a.shape[axis]
    if not isinstance(n, int) or n == 0:
        refuse(name, f"needs the axis length known and not 0 at compile time (got {n})")
    result = a.dtype if dtype_info(a.dtype).is_float else "float64"
    if strong is not None:
        result = np.result_type(dtype_info(result).numpy, strong).name
    ordered = ops.sort(a, axis=axis)  # (in a's dtype: NumPy's b - a is, then scales it)

    def widened(t):
        return t if t.dtype == result else ops.cast(t, result)

    lead = (slice(None),) * axis

    def at(k):
        return ordered[(*lead, int(k))]

    picks = []
    for fraction in q.reshape(-1).tolist():
        position = fraction * (n - 1)
        below = int(np.floor(position))
        t = position - below
        low, high = at(below), at(min(below + 1, n - 1))
        step = widened(ops.subtract(high, low))
        low, high = widened(low), widened(high)
        # (from the nearer end, as NumPy's _lerp: exact at both ends)
        value = (
            ops.add(low, ops.multiply(step, t)) if t < 0.5
            else ops.subtract(high, ops.multiply(step, 1 - t))
        )  # fmt: skip
        # (a NaN anywhere in the slice sorts last and makes the result NaN, as NumPy's)
        if dtype_info(a.dtype).is_float:
            value = ops.where(ops.isnan(at(n - 1)), widened(at(n - 1)), value)
        picks.append(value)
    stacked = ops.concatenate([ops.reshape(p, (1, *p.shape)) for p in picks], axis=0)
    if keepdims:
        return ops.reshape(stacked, q.shape + kept)
    return ops.reshape(stacked, q.shape + stacked.shape[1:])


def digitize(x, bins, right=False):
    """np.digitize by ``bins`` known when tracing (an array or a list, monotonic as NumPy
    requires): the index of the bin each element of ``x`` falls in."""
    if hasattr(bins, "type"):
        refuse(
            "digitize",
            "needs bins known when tracing (NumPy checks at run time that they are "
            "monotonic); pass them as a static argument, or for increasing bins write "
            "np.searchsorted(bins, x, side='right')",
        )
    edges = np.asarray(bins)
    if edges.ndim != 1:
        raise ValueError("object too deep for desired array")
    steps = np.diff(edges)
    if np.all(steps >= 0):
        return ops.searchsorted(const(edges), x, side="left" if right else "right")
    if np.all(steps <= 0):
        flipped = const(np.ascontiguousarray(edges[::-1]))
        found = ops.searchsorted(flipped, x, side="left" if right else "right")
        return ops.subtract(np.int64(len(edges)), found)
    raise ValueError("bins must be monotonically increasing or decreasing")


def convolve(a, v, mode="full"):
    """np.convolve of two 1-D float arrays (``full``, ``same`` or ``valid``), as the
    ``conv`` op of the flipped kernel (ONNX's conv correlates)."""
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    a = a if hasattr(a, "type") else const(np.asarray(a))
    v = v if hasattr(v, "type") else const(np.asarray(v))
    if a.ndim != 1 or v.ndim != 1:
        refuse("convolve", "takes 1-D arrays")
    n, m = a.shape[0], v.shape[0]
    if not isinstance(n, int) or not isinstance(m, int) or not n or not m:
        refuse("convolve", "needs both lengths known and not 0 at compile time")
    if n < m:  # (NumPy swaps them)
        a, v, n, m = v, a, m, n
    dtype = np.result_type(dtype_info(a.dtype).numpy, dtype_info(v.dtype).numpy)
    if dtype.kind != "f" or dtype.itemsize < 4:
        refuse("convolve", f"of {dtype} arrays: nbyoc's conv takes float32 and float64; "
                           f"cast first (x.astype(np.float64))")  # fmt: skip
    a, v = (ops.cast(t, dtype.name) if t.dtype != dtype.name else t for t in (a, v))
    kernel = ops.slice(v, starts=(-1,), ends=(-(m + 1),), axes=(0,), steps=(-1,))
    full = ops.conv(ops.reshape(a, (1, 1, n)), ops.reshape(kernel, (1, 1, m)),
                    pads=(m - 1, m - 1))  # fmt: skip
    full = ops.reshape(full, (n + m - 1,))
    if mode == "full":
        return full
    start = (m - 1) // 2 if mode == "same" else m - 1
    length = n if mode == "same" else n - m + 1
    return ops.slice(full, starts=(start,), ends=(start + length,), axes=(0,))
