"""Neural-network ops. Composite ones are defined twice: by a NumPy reference (what the
host runs) and by a decomposition into primitive ops (what a backend without the op
runs, fused: ``nbyoc.transform.legalize``).

>>> import nbyoc
>>> x = nbyoc.var("x", (2, 5), "int32")
>>> nbyoc.softmax(x, axis=-1).type, dict(nbyoc.softmax(x, -1).attrs)
(Tensor[(2, 5), float64], {'axis': 1})
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ...errors import NbyocTypeError
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import dtype_info, promote, to_float
from ..op import Op, get_op, register_op
from ..types import TensorType
from .elementwise import broadcast_shapes


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


# -- activations: float-only elementwise ops defined by decomposition ---------------------

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_GAMMA = 1.0507009873554804934193349852946


def _float_activation_rule(name: str, arity: int = 1):
    def infer(types, attrs):
        for t in types:
            if not dtype_info(t.dtype).is_float:
                raise NbyocTypeError(
                    f"{name}({t!r}): activations take float tensors; cast the input first "
                    f"(nbyoc.cast(x, 'float32'))"
                )
        shape = broadcast_shapes(name, types) if arity > 1 else types[0].shape
        return TensorType(shape, promote(*(t.dtype for t in types))), attrs

    return infer


def _act(name):
    return lambda *args, **kw: call_op(name, *args, **kw)


_where, _mul, _add = _act("where"), _act("multiply"), _act("add")
_exp, _erf, _tanh = _act("exp"), _act("erf"), _act("tanh")


def _elu_like(x, alpha, scale):
    # x where x > 0, else alpha * (exp(x) - 1); the reference computes the same steps.
    negative = _mul(call_op("subtract", _exp(x), 1.0), alpha)
    out = _where(call_op("greater", x, 0.0), x, negative)
    return out if scale == 1.0 else _mul(out, scale)


def _elu_reference(x, alpha, scale=1.0):
    out = np.where(x > 0, x, (np.exp(x) - x.dtype.type(1)) * x.dtype.type(alpha))
    return out if scale == 1.0 else out * x.dtype.type(scale)


def _hard_sigmoid(x, alpha, beta):
    return call_op("clip", _add(_mul(x, alpha), beta), min=0.0, max=1.0)


def _hard_sigmoid_reference(x, alpha, beta):
    t = x.dtype.type
    return np.minimum(np.maximum(x * t(alpha) + t(beta), t(0)), t(1))


def _softplus(x):
    # log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|)).
    tail = call_op("log", _add(_exp(call_op("negative", call_op("abs", x))), 1.0))
    return _add(call_op("maximum", x, 0.0), tail)


def _softplus_reference(x):
    t = x.dtype.type
    return np.maximum(x, t(0)) + np.log(np.exp(-np.abs(x)) + t(1))


_GELU_TANH_SCALE = math.sqrt(2 / math.pi)


def _gelu(x, approximate):
    if approximate == "tanh":
        inner = _mul(_add(x, _mul(_mul(_mul(x, x), x), 0.044715)), _GELU_TANH_SCALE)
        return _mul(_mul(x, 0.5), _add(_tanh(inner), 1.0))
    return _mul(_mul(x, 0.5), _add(_erf(_mul(x, 1 / math.sqrt(2))), 1.0))


def _gelu_reference(x, approximate):
    t = x.dtype.type
    if approximate == "tanh":
        inner = (x + x * x * x * t(0.044715)) * t(_GELU_TANH_SCALE)
        return x * t(0.5) * (np.tanh(inner) + t(1))
    erf = get_op("erf").reference
    return x * t(0.5) * (erf(x * t(1 / math.sqrt(2))) + t(1))


def _leaky(x, slope):
    return _where(call_op("greater_equal", x, 0.0), x, _mul(x, slope))


def _leaky_reference(x, slope):
    slope = (
        x.dtype.type(slope) if np.ndim(slope) == 0 and not isinstance(slope, np.ndarray) else slope
    )
    return np.where(x >= 0, x, x * slope).astype(np.result_type(x, slope), copy=False)


# name -> (arity, attrs, NumPy reference, decomposition, summary)
ACTIVATIONS = {
    "leaky_relu": (1, {"alpha": Attr("float", 0.01)}, lambda x, alpha: _leaky_reference(x, alpha),
                   lambda x, alpha: _leaky(x, alpha), "``x`` where x >= 0, else ``alpha * x``"),
    "prelu": (2, {}, _leaky_reference, _leaky,
              "``x`` where x >= 0, else ``slope * x`` (slope broadcasts against x)"),
    "elu": (1, {"alpha": Attr("float", 1.0)}, lambda x, alpha: _elu_reference(x, alpha),
            lambda x, alpha: _elu_like(x, alpha, 1.0), "``x`` where x > 0, else "
            "``alpha * (exp(x) - 1)``"),
    "selu": (1, {"alpha": Attr("float", SELU_ALPHA), "gamma": Attr("float", SELU_GAMMA)},
             lambda x, alpha, gamma: _elu_reference(x, alpha, gamma),
             lambda x, alpha, gamma: _elu_like(x, alpha, gamma), "``gamma * elu(x, alpha)``"),
    "softplus": (1, {}, _softplus_reference, _softplus, "``log(1 + exp(x))``, without overflow"),
    "hard_sigmoid": (1, {"alpha": Attr("float", 0.2), "beta": Attr("float", 0.5)},
                     _hard_sigmoid_reference, _hard_sigmoid,
                     "``clip(alpha * x + beta, 0, 1)``"),
    "hard_swish": (1, {}, lambda x: x * _hard_sigmoid_reference(x, 1 / 6, 0.5),
                   lambda x: _mul(x, _hard_sigmoid(x, 1 / 6, 0.5)),
                   "``x * hard_sigmoid(x, 1/6, 1/2)``"),
    "gelu": (1, {"approximate": Attr("str", "none", choices=("none", "tanh"))}, _gelu_reference,
             _gelu, "``x * Phi(x)``: by erf (``approximate='none'``) or the tanh formula"),
}  # fmt: skip

for _name, (_arity, _attrs, _reference, _decomposition, _summary) in ACTIVATIONS.items():
    register_op(
        Op(_name, _arity, _float_activation_rule(_name, _arity), _reference, "elementwise",
           _summary, attrs=_attrs, decompose=_decomposition)
    )  # fmt: skip


# -- normalisation, gemm and global pools: defined by decomposition ----------------------


def _float_operands(name, types):
    for t in types:
        if not dtype_info(t.dtype).is_float:
            raise NbyocTypeError(f"{name}({t!r}): takes float tensors; cast the input first")


def _batch_norm_rule(types, attrs):
    x, *params = types
    _float_operands("batch_norm", types)
    if x.ndim < 2:
        raise NbyocTypeError(f"batch_norm({x!r}): needs (N, C, ...) input")
    for t in params:
        if t.shape != (x.shape[1],):
            raise NbyocTypeError(
                f"batch_norm: scale, bias, mean and var must have shape ({x.shape[1]},) "
                f"(one value per channel), got {t!r}"
            )
    return TensorType(x.shape, promote(*(t.dtype for t in types))), attrs


def _per_channel(x_ndim: int, value):
    return call_op("reshape", value, newshape=(-1,) + (1,) * (x_ndim - 2))


def _batch_norm(x, scale, bias, mean, var, epsilon):
    n = x.type.ndim
    inv = call_op("divide", _per_channel(n, scale),
                  call_op("sqrt", call_op("add", _per_channel(n, var), epsilon)))  # fmt: skip
    centred = call_op("subtract", x, _per_channel(n, mean))
    return call_op("add", call_op("multiply", centred, inv), _per_channel(n, bias))


def _batch_norm_reference(x, scale, bias, mean, var, epsilon):
    shape = (-1,) + (1,) * (x.ndim - 2)
    s, b, m, v = (np.reshape(p, shape) for p in (scale, bias, mean, var))
    return (x - m) * (s / np.sqrt(v + v.dtype.type(epsilon))) + b


def _layer_norm_rule(types, attrs):
    x, scale, bias = types
    _float_operands("layer_norm", types)
    (axis,) = (normalize_axis("layer_norm", x, attrs["axis"]),)
    normalized = x.shape[axis:]
    for t in (scale, bias):
        if broadcast_shapes("layer_norm", (t, TensorType(normalized, t.dtype))) != normalized:
            raise NbyocTypeError(
                f"layer_norm: scale and bias must broadcast to the normalised shape "
                f"{normalized}, got {t!r}"
            )
    return TensorType(x.shape, promote(*(t.dtype for t in types))), {**attrs, "axis": axis}


def _layer_norm(x, scale, bias, axis, epsilon):
    axes = tuple(range(axis, x.type.ndim))
    centred = call_op("subtract", x, call_op("mean", x, axis=axes, keepdims=True))
    var = call_op("mean", call_op("multiply", centred, centred), axis=axes, keepdims=True)
    normed = call_op("divide", centred, call_op("sqrt", call_op("add", var, epsilon)))
    return call_op("add", call_op("multiply", normed, scale), bias)


def _layer_norm_reference(x, scale, bias, axis, epsilon):
    axes = tuple(range(axis, x.ndim))
    centred = x - x.mean(axis=axes, keepdims=True)
    var = (centred * centred).mean(axis=axes, keepdims=True)
    return centred / np.sqrt(var + var.dtype.type(epsilon)) * scale + bias


def _gemm_shapes(types, attrs):
    a, b, c = types
    if a.ndim != 2 or b.ndim != 2:
        raise NbyocTypeError(f"gemm: a and b must be 2-D, got {a!r} and {b!r}")
    (m, k) = a.shape[::-1] if attrs["trans_a"] else a.shape
    (k2, n) = b.shape[::-1] if attrs["trans_b"] else b.shape
    if k != k2:
        raise NbyocTypeError(f"gemm: inner dimensions differ ({k} vs {k2}) after the transposes")
    if broadcast_shapes("gemm", (c, TensorType((m, n), c.dtype))) != (m, n):
        raise NbyocTypeError(f"gemm: c {c!r} does not broadcast to ({m}, {n})")
    return (m, n)


def _gemm_rule(types, attrs):
    _float_operands("gemm", types)
    shape = _gemm_shapes(types, attrs)
    return TensorType(shape, promote(*(t.dtype for t in types))), attrs


def _gemm(a, b, c, alpha, beta, trans_a, trans_b):
    a = call_op("transpose", a) if trans_a else a
    b = call_op("transpose", b) if trans_b else b
    product = call_op("matmul", a, b)
    product = product if alpha == 1.0 else call_op("multiply", product, alpha)
    return call_op("add", product, c if beta == 1.0 else call_op("multiply", c, beta))


def _gemm_reference(a, b, c, alpha, beta, trans_a, trans_b):
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    product = a @ b
    dtype = product.dtype.type
    product = product if alpha == 1.0 else product * dtype(alpha)
    return product + (c if beta == 1.0 else c * np.asarray(c).dtype.type(beta))


def _global_pool_rule(name):
    def infer(types, attrs):
        (x,) = types
        if x.ndim < 3:
            raise NbyocTypeError(f"{name}({x!r}): needs (N, C, spatial...) input")
        dtype = to_float(x.dtype) if name == "global_avg_pool" else x.dtype
        return TensorType(x.shape[:2] + (1,) * (x.ndim - 2), dtype), attrs

    return infer


def _global_pool(reduction):
    def decompose(x):
        return call_op(reduction, x, axis=tuple(range(2, x.type.ndim)), keepdims=True)

    def reference(x):
        return np.asarray(getattr(np, reduction)(x, axis=tuple(range(2, x.ndim)), keepdims=True))

    return decompose, reference


register_op(Op("batch_norm", 5, _batch_norm_rule, _batch_norm_reference, "elementwise",
               "Inference batch normalisation over axis 1: "
               "``(x - mean) * scale / sqrt(var + epsilon) + bias``",
               attrs={"epsilon": Attr("float", 1e-5)}, decompose=_batch_norm))  # fmt: skip
register_op(Op("layer_norm", 3, _layer_norm_rule, _layer_norm_reference, "reduce",
               "``(x - mean) / sqrt(var + epsilon) * scale + bias`` over the axes from "
               "``axis`` to the last", attrs={"axis": Attr("int", -1),
               "epsilon": Attr("float", 1e-5)}, decompose=_layer_norm))  # fmt: skip
register_op(Op("gemm", 3, _gemm_rule, _gemm_reference, "matmul",
               "``alpha * op(a) @ op(b) + beta * c`` with optional transposes (ONNX Gemm)",
               attrs={"alpha": Attr("float", 1.0), "beta": Attr("float", 1.0),
                      "trans_a": Attr("bool", False), "trans_b": Attr("bool", False)},
               decompose=_gemm))  # fmt: skip
for _name, _reduction in [("global_avg_pool", "mean"), ("global_max_pool", "max")]:
    _decompose, _reference = _global_pool(_reduction)
    register_op(Op(_name, 1, _global_pool_rule(_name), _reference, "reduce",
                   f"The {_reduction} over every spatial axis of (N, C, ...), kept as length 1",
                   decompose=_decompose))  # fmt: skip
