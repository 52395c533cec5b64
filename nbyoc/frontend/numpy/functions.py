"""NumPy's array functions on graph values (``__array_function__``): ``np.sum(x)``,
``np.concatenate([x, y])``, ``np.einsum(...)`` and the others below build the same graph
as their nbyoc counterparts, from builders that take NumPy's arguments (one module per
family: ``reductions``, ``shapes``, ``arithmetic``, ``sorting``, ``linalg``). Anything
else raises ``NbyocTypeError`` naming the NumPy function and what to use instead:
nothing silently turns a graph value into an array.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (2, 3))
>>> np.sum(x, axis=1, keepdims=True).type
Tensor[(2, 1), float32]
>>> np.average(x)
Traceback (most recent call last):
    ...
nbyoc.errors.NbyocTypeError: numpy.average is not supported by nbyoc.jit; write ...
"""

from __future__ import annotations

import numpy as np

from ...errors import NbyocTypeError
from ...ir import ops
from . import arithmetic, linalg, reductions, shapes, sorting, statistics
from .aliasing import fresh
from .refusals import public_name, unsupported_function

#: NumPy array function -> builder taking NumPy's arguments.
# fmt: off
ARRAY_FUNCTIONS = {
    np.sum: reductions.reduction("sum"),
    np.mean: reductions.reduction("mean"),
    np.max: reductions.reduction("max"),
    np.amax: reductions.reduction("max"),
    np.min: reductions.reduction("min"),
    np.amin: reductions.reduction("min"),
    np.prod: reductions.reduction("prod"),
    np.argmax: reductions.arg_reduction("argmax"),
    np.argmin: reductions.arg_reduction("argmin"),
    np.cumsum: reductions.cumulative("cumsum"),
    np.cumprod: reductions.cumulative("cumprod"),
    # (NumPy 2.1's array-API spellings)
    **({np.cumulative_sum: reductions.cumulative_array_api("cumsum", 0),
        np.cumulative_prod: reductions.cumulative_array_api("cumprod", 1)}
       if hasattr(np, "cumulative_sum") else {}),
    np.ptp: reductions.peak_to_peak,
    np.any: reductions.truth("any"),
    np.all: reductions.truth("all"),
    np.median: sorting.median,
    np.percentile: statistics.percentile,
    np.quantile: statistics.quantile,
    **{getattr(np, name): statistics.nan_reduction(name)
       for name in ("nansum", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd")},
    np.digitize: statistics.digitize,
    np.convolve: statistics.convolve,
    np.var: reductions.variance,
    np.std: reductions.deviation,
    np.reshape: shapes.reshape,
    np.transpose: shapes.transpose,
    np.concatenate: lambda arrays, axis=0, **kw: ops.concatenate(list(arrays), axis=axis),
    np.stack: shapes.stack,
    np.broadcast_to: shapes.broadcast_to,
    np.copy: shapes.copy,
    np.squeeze: shapes.squeeze,
    np.expand_dims: shapes.expand_dims,
    np.ravel: shapes.ravel,
    np.roll: shapes.roll,
    np.zeros_like: shapes.filled_like(lambda args: 0),
    # (any values are NumPy's empty_like; zeros are the cheapest to make)
    np.empty_like: shapes.filled_like(lambda args: 0),
    np.ones_like: shapes.filled_like(lambda args: 1),
    np.full_like: shapes.filled_like(lambda args: args[0]),
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.astype: lambda x, dtype, /, *, copy=True, device=None: x.astype(dtype),
    np.clip: arithmetic.clip,
    np.where: arithmetic.where,
    np.round: arithmetic.around,
    np.around: arithmetic.around,
    np.diff: arithmetic.diff,
    np.dot: linalg.dot,
    np.outer: linalg.outer,
    np.einsum: linalg.einsum,
    np.linalg.norm: linalg.norm,
    # (NumPy 2's array-API spellings)
    **({np.linalg.vector_norm: linalg.vector_norm,
        np.linalg.matrix_norm: linalg.matrix_norm,
        np.linalg.svdvals: linalg.svdvals}
       if hasattr(np.linalg, "vector_norm") else {}),
    np.sort: sorting.sorting("sort", "sort"),
    np.argsort: sorting.sorting("argsort", "argsort"),
    np.partition: sorting.partitioning("sort", "partition"),
    np.argpartition: sorting.partitioning("argsort", "argpartition"),
    np.take: sorting.take,
    np.take_along_axis: sorting.take_along_axis,
    np.searchsorted: sorting.searchsorted,
    np.interp: sorting.interp,
}
# fmt: on
#: The array functions whose result is a view of their first argument, as NumPy's is
#: (their builders record it: ``aliasing.view``), or may be that argument itself.
VIEWS = {
    np.reshape,
    np.transpose,
    np.broadcast_to,
    np.squeeze,
    np.expand_dims,
    np.ravel,
    np.shape,
    np.ndim,
    np.size,
}  # fmt: skip
#: Array functions without a counterpart, and what to write instead.
FUNCTION_HINTS = {
    np.average: "write (x * w).sum(axis) / w.sum() (NumPy's weights that sum to 0 raise)",
}


def names() -> list[str]:
    """The array functions graph values answer, by their public names, sorted."""
    return sorted({public_name(f) for f in ARRAY_FUNCTIONS})


def array_function(func, args, kwargs):
    """What ``Expr.__array_function__`` returns: the graph NumPy's ``func`` describes."""
    build = ARRAY_FUNCTIONS.get(func)
    if build is not None:
        result = build(*args, **kwargs)
        return result if func in VIEWS else fresh(result, [*args, *kwargs.values()])
    hint = FUNCTION_HINTS.get(func, "")
    raise NbyocTypeError(unsupported_function(public_name(func), hint, names()))
