"""NumPy's ufuncs on graph values: a ufunc applied to a graph value builds the call of
the nbyoc op whose reference is that ufunc (the table is derived from the op registry,
so a new op with a ufunc reference needs nothing here); ``ufunc.reduce`` builds the
matching reduction and ``ufunc.accumulate`` the matching scan. Anything else raises
``NbyocTypeError`` naming the ufunc and what to write instead.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (2, 3))
>>> y = np.exp(x) * np.float32(2)
>>> y.op.name, y.args[0].op.name, np.add.reduce(x, axis=1).op.name
('multiply', 'exp', 'sum')
>>> np.arctan(x)
Traceback (most recent call last):
    ...
nbyoc.errors.NbyocTypeError: numpy.arctan has no nbyoc op yet; ...
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import NbyocTypeError
from ...ir import ops
from ...ir.builder import call_op
from ...ir.dtypes import normalize_dtype
from ...ir.op import get_op, list_ops
from .aliasing import fresh
from .arithmetic import BITWISE, bitwise, logaddexp
from .inplace import into, unbuffered
from .reductions import scan
from .refusals import unsupported_ufunc

#: ``ufunc.reduce`` -> the reduction it computes.
UFUNC_REDUCTIONS = {np.add: "sum", np.maximum: "max", np.minimum: "min", np.multiply: "prod"}
#: ``ufunc.accumulate`` -> the scan it computes.
UFUNC_SCANS = {np.add: "cumsum", np.multiply: "cumprod", np.maximum: "cummax",
               np.minimum: "cummin", np.logaddexp: "logcumsumexp"}  # fmt: skip
#: Ufuncs without an op of their own that are exactly a short graph of ops.
UFUNC_GRAPHS = {
    np.square: lambda x: x * x,
    np.positive: lambda x: x,
    np.conjugate: lambda x: x,  # real dtypes only: nbyoc has no complex ones
    np.logaddexp: logaddexp,
    # (the natural log over log(base), each rounding once more: within 2 ulp of NumPy's)
    np.log10: lambda x: ops.divide(ops.log(x), math.log(10)),
    np.log2: lambda x: ops.divide(ops.log(x), math.log(2)),
    **{getattr(np, name): bitwise(name) for name in BITWISE},
}
#: (ufunc, method) without an op of their own, and what to write instead.
UFUNC_HINTS = {
    (np.exp2, "__call__"): "write np.exp(x * np.log(2))",
    (np.cbrt, "__call__"): "write np.sign(x) * np.abs(x) ** (1 / 3)",
}


@functools.cache
def ufunc_ops() -> dict:
    """NumPy ufunc -> name of the nbyoc op whose reference it is."""
    table = {}
    for name in list_ops():
        reference = get_op(name).reference
        if isinstance(reference, np.ufunc):
            table.setdefault(reference, name)
    return table


def names() -> list[str]:
    """The ufuncs graph values answer, sorted, with ``reduce`` and ``accumulate`` where
    nbyoc has them (``add.reduce``)."""
    found = {u.__name__ for u in [*ufunc_ops(), *UFUNC_GRAPHS]}
    found |= {f"{u.__name__}.reduce" for u in UFUNC_REDUCTIONS}
    found |= {f"{u.__name__}.accumulate" for u in UFUNC_SCANS}
    return sorted(found)


def array_ufunc(ufunc, method: str, inputs, kwargs):
    """What ``Expr.__array_ufunc__`` returns: the call of the matching op; within
    ``nbyoc.jit``, ``out=`` and ``ufunc.at`` update an array in place (``inplace``)."""
    out = kwargs.pop("out", None)
    if method == "at":
        return unbuffered(ufunc, *inputs, **kwargs)
    result = computed(ufunc, method, inputs, kwargs)
    if out is not None:
        return into(out, result, f"numpy.{ufunc.__name__}")
    return fresh(result, inputs)


def computed(ufunc, method: str, inputs, kwargs):
    """The graph of ``ufunc.<method>(*inputs, **kwargs)`` (without ``out=``)."""
    name = f"numpy.{ufunc.__name__}"
    if method == "accumulate" and ufunc in UFUNC_SCANS:
        return _accumulate(ufunc, *inputs, **kwargs)
    reduce = method == "reduce" and ufunc in UFUNC_REDUCTIONS
    axis, keepdims = (kwargs.pop("axis", 0), kwargs.pop("keepdims", False)) if reduce else (0, 0)
    unsupported = sorted(k for k, v in kwargs.items() if v is not None)
    if unsupported:
        raise NbyocTypeError(
            f"{name} on graph values takes no {', '.join(unsupported)}=; nbyoc never casts "
            f"or masks silently"
        )
    if reduce:
        return getattr(ops, UFUNC_REDUCTIONS[ufunc])(inputs[0], axis=axis, keepdims=keepdims)
    if method == "__call__" and ufunc in ufunc_ops():
        return call_op(ufunc_ops()[ufunc], *inputs)
    if method == "__call__" and ufunc in UFUNC_GRAPHS:
        return UFUNC_GRAPHS[ufunc](*inputs)
    hint = UFUNC_HINTS.get((ufunc, method), "")
    what = name if method == "__call__" else f"{name}.{method}"
    raise NbyocTypeError(unsupported_ufunc(what, hint, names()))


def _accumulate(ufunc, array, axis=0, dtype=None):
    """``ufunc.accumulate``: the scan, in ``dtype`` (or the dtype NumPy accumulates the
    array's in: ``np.add.accumulate`` of int8 gives int64, of float32 float32)."""
    want = normalize_dtype(dtype or ufunc.accumulate(np.zeros(1, array.dtype)).dtype)
    return scan(UFUNC_SCANS[ufunc], array, axis, want)
