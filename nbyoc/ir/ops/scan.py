"""Scans: running sums, products, extremes and log-sum-exps along one axis (``cumsum``,
``cumprod``, ``cummax``, ``cummin``, ``logcumsumexp``), each a ufunc's ``accumulate``.

Every scan takes ``axis`` (one axis, stored non-negative), ``reverse`` (run from the
end of the axis: ONNX's CumSum attribute) and ``exclusive`` (each element leaves
itself out: the first result is the scan's identity). Result dtypes are NumPy's:
``np.cumsum`` and ``np.cumprod`` widen small integers and bool to int64 (uint64 for
unsigned ones), as ``np.sum`` does; ``logcumsumexp`` is ``np.logaddexp.accumulate``,
in the float dtype of NumPy's logaddexp loop (float16 for int8, float64 for int32). A
scan runs step by step, as NumPy's, so float sums match NumPy's to the bit where the
backend computes in the same dtype.

>>> import nbyoc
>>> x = nbyoc.var("x", (2, 5), "int32")
>>> s = nbyoc.cumsum(x, axis=-1, reverse=True)
>>> s.type, dict(s.attrs)
(Tensor[(2, 5), int64], {'axis': 1, 'reverse': True, 'exclusive': False})
>>> nbyoc.cumsum(x).shape  # no axis: over the flattened tensor, as np.cumsum
(10,)
"""

from __future__ import annotations

import numpy as np

from ...errors import NbyocTypeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import accumulate, dtype_info, same
from ..nodes import Expr
from ..op import Op, register_op
from ..types import TensorType
from .elementwise import numpy_loop
from .nn import normalize_axis


def _logaddexp_dtype(dtype: str) -> str:
    # NumPy's loop of logaddexp (int8 computes in float16, int32 in float64)
    return numpy_loop(np.logaddexp, (dtype, dtype))[-1]


def _lowest(dtype: str):
    info = dtype_info(dtype)
    return False if info.kind == "bool" else -np.inf if info.is_float else info.min


def _highest(dtype: str):
    info = dtype_info(dtype)
    return True if info.kind == "bool" else np.inf if info.is_float else info.max


# name -> (ufunc whose accumulate it is, result dtype rule, identity of a result dtype,
#          summary)
SCAN_OPS = {
    "cumsum": (np.add, accumulate, lambda dtype: 0,
               "Running sum along ``axis`` (``np.cumsum``; small integers and bool sum in "
               "int64 or uint64, as in NumPy)"),
    "cumprod": (np.multiply, accumulate, lambda dtype: 1,
                "Running product along ``axis`` (``np.cumprod``)"),
    "cummax": (np.maximum, same, _lowest,
               "Running maximum along ``axis`` (``np.maximum.accumulate``; NaN propagates)"),
    "cummin": (np.minimum, same, _highest,
               "Running minimum along ``axis`` (``np.minimum.accumulate``; NaN propagates)"),
    "logcumsumexp": (np.logaddexp, _logaddexp_dtype, lambda dtype: -np.inf,
                     "Running ``log(sum(exp(x)))`` along ``axis`` without overflow "
                     "(``np.logaddexp.accumulate``)"),
}  # fmt: skip

SCAN_ATTRS = {"axis": Attr("int"), "reverse": Attr("bool", False), "exclusive": Attr("bool", False)}


def _scan_rule(name: str, dtype_rule):
    def infer(types, attrs):
        (t,) = types
        if t.ndim == 0:
            raise NbyocTypeError(
                f"{name}({t!r}): a 0-d tensor has no axis to scan; reshape it to (1,) first "
                f"(nbyoc.{name}(x) with no axis scans the flattened tensor)"
            )
        axis = normalize_axis(name, t, attrs["axis"])
        return TensorType(t.shape, dtype_rule(t.dtype)), {**attrs, "axis": axis}

    return infer


def _scan_reference(ufunc: np.ufunc, dtype_rule, identity):
    def reference(x, axis, reverse, exclusive):
        dtype = dtype_info(dtype_rule(x.dtype.name)).numpy
        x = x.astype(dtype, copy=False)
        if reverse:
            x = np.flip(x, axis)
        out = ufunc.accumulate(x, axis=axis, dtype=dtype)
        if exclusive and x.shape[axis]:
            # Each element leaves itself out: the identity, then the inclusive scan
            # shifted by one (NumPy adds the same values in the same order).
            first = np.full((*x.shape[:axis], 1, *x.shape[axis + 1 :]), identity(dtype.name),
                            dtype)  # fmt: skip
            out = np.concatenate([first, np.delete(out, -1, axis=axis)], axis=axis)
        if reverse:
            out = np.flip(out, axis)
        return np.ascontiguousarray(out)

    return reference


for _name, (_ufunc, _rule, _identity, _summary) in SCAN_OPS.items():
    register_op(
        Op(_name, 1, _scan_rule(_name, _rule), _scan_reference(_ufunc, _rule, _identity),
           "reduce", _summary, attrs=SCAN_ATTRS)
    )  # fmt: skip


def _scan_builder(name: str):
    def build(
        x: Operand, axis: int | None = None, reverse: bool = False, exclusive: bool = False
    ) -> Expr:
        if axis is None:  # as NumPy: over the flattened tensor
            x, axis = call_op("reshape", x, newshape=(-1,)), 0
        return call_op(name, x, axis=axis, reverse=reverse, exclusive=exclusive)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"""{name}(x, axis=None, reverse=False, exclusive=False): {SCAN_OPS[name][3]}.

    With ``axis=None`` the scan runs over the flattened tensor (a 1-D result), as
    NumPy's. ``reverse`` scans from the end; ``exclusive`` leaves each element out.

    >>> import nbyoc
    >>> nbyoc.{name}(nbyoc.var("x", (2, 3)), axis=1).shape
    (2, 3)
    """
    return build


cumsum = _scan_builder("cumsum")
cumprod = _scan_builder("cumprod")
cummax = _scan_builder("cummax")
cummin = _scan_builder("cummin")
logcumsumexp = _scan_builder("logcumsumexp")
