"""Neural-network ops. Composite ones are defined twice: by a NumPy reference (what the
host runs) and by a decomposition into primitive ops (what a backend without the op
runs, fused: ``nbyoc.transform.legalize``).

>>> import nbyoc
>>> x = nbyoc.var("x", (2, 5), "int32")
>>> nbyoc.softmax(x, axis=-1).type, dict(nbyoc.softmax(x, -1).attrs)
(Tensor[(2, 5), float64], {'axis': 1})
"""

from __future__ import annotations

import operator

import numpy as np

from ...errors import NbyocTypeError
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import to_float
from ..op import Op, register_op
from ..types import TensorType


def normalize_axis(op_name: str, t: TensorType, axis: int) -> int:
    """One axis of ``t`` in ``[0, ndim)``, or a type error saying which axes exist."""
    axis = operator.index(axis)
    if not -t.ndim <= axis < t.ndim:
        raise NbyocTypeError(
            f"{op_name}({t!r}): axis {axis} is out of range; use an axis in "
            f"[{-t.ndim}, {t.ndim - 1}]"
        )
    return axis % t.ndim


def _along_axis_rule(name: str):
    """Same shape, float result, one non-empty axis (softmax and friends)."""

    def infer(types, attrs):
        (t,) = types
        axis = normalize_axis(name, t, attrs["axis"])
        if t.shape[axis] == 0:
            raise NbyocTypeError(f"{name}({t!r}): axis {axis} is empty; {name} needs elements")
        return TensorType(t.shape, to_float(t.dtype)), {"axis": axis}

    return infer


def _as_float(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _softmax_reference(x, axis):
    x = _as_float(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax_reference(x, axis):
    x = _as_float(x)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _shifted(x, axis):
    # Subtracting the maximum keeps exp from overflowing; exp(0) = 1 keeps the sum >= 1.
    x = x if x.type.dtype == to_float(x.type.dtype) else call_op("multiply", x, 1.0)
    return call_op("subtract", x, call_op("max", x, axis=axis, keepdims=True))


def _softmax_decomposition(x, axis):
    e = call_op("exp", _shifted(x, axis))
    return call_op("divide", e, call_op("sum", e, axis=axis, keepdims=True))


def _log_softmax_decomposition(x, axis):
    shifted = _shifted(x, axis)
    total = call_op("sum", call_op("exp", shifted), axis=axis, keepdims=True)
    return call_op("subtract", shifted, call_op("log", total))


# name -> (NumPy reference, decomposition, summary)
ALONG_AXIS_OPS = {
    "softmax": (_softmax_reference, _softmax_decomposition,
                "``exp(x) / sum(exp(x))`` along ``axis`` (computed without overflow)"),
    "log_softmax": (_log_softmax_reference, _log_softmax_decomposition,
                    "``log(softmax(x))`` along ``axis``, without forming the softmax"),
}  # fmt: skip

for _name, (_reference, _decomposition, _summary) in ALONG_AXIS_OPS.items():
    register_op(
        Op(_name, 1, _along_axis_rule(_name), _reference, "reduce", _summary,
           attrs={"axis": Attr("int", -1)}, decompose=_decomposition)
    )  # fmt: skip
