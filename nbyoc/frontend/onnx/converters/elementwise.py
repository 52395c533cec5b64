"""Elementwise ONNX ops: arithmetic, comparisons, logic, casts, activations.

ONNX broadcasts elementwise operands as NumPy does, and its operands share one
dtype, so most ops are a direct call; where ONNX's result differs from NumPy's
(integer Div truncates, Pow keeps the base's dtype, IsInf can pick a sign) the
converter says how.
"""

from __future__ import annotations

import numpy as np

from ....ir.builder import call_op
from ....ir.dtypes import dtype_info
from ..dtypes import onnx_dtype
from ..node import Node, as_expr
from . import converter

#: ONNX op -> nbyoc op, for ops that are one call on all their inputs.
DIRECT = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Neg": "negative", "Abs": "abs",
    "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Tanh": "tanh", "Sigmoid": "sigmoid",
    "Relu": "relu", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign",
    "Reciprocal": "reciprocal", "Sin": "sin", "Cos": "cos", "Erf": "erf", "IsNaN": "isnan",
    "Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
    "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or",
    "Xor": "logical_xor", "Not": "logical_not", "Where": "where", "Identity": "identity",
    "Softplus": "softplus", "HardSwish": "hard_swish", "PRelu": "prelu",
}  # fmt: skip


def _direct(nbyoc_op: str):
    def convert(node: Node):
        return call_op(nbyoc_op, *(node.expr(i) for i in range(len(node.inputs))))

    convert.__name__ = nbyoc_op
    return convert


for _onnx_op, _nbyoc_op in DIRECT.items():
    converter(_onnx_op)(_direct(_nbyoc_op))


@converter("Div")
def divide(node: Node):
    a, b = node.expr(0), node.expr(1)
    info = dtype_info(a.type.dtype)
    if info.is_float:
        return call_op("divide", a, b)
    quotient = call_op("floor_divide", a, b)
    if info.kind != "int":
        return quotient
    # ONNX's integer division truncates toward zero; floor division rounds down, one
    # less when there is a remainder and the operands' signs differ.
    remainder = call_op("mod", a, b)
    signs_differ = call_op("logical_xor", call_op("less", a, 0), call_op("less", b, 0))
    behind = call_op("logical_and", call_op("not_equal", remainder, 0), signs_differ)
    return call_op("where", behind, call_op("add", quotient, 1), quotient)


@converter("Pow")
def power(node: Node):
    base, exponent = node.expr(0), node.expr(1)
    result = call_op("power", base, exponent)
    if result.type.dtype != base.type.dtype:  # ONNX: the base's dtype
        result = call_op("cast", result, to=base.type.dtype)
    return result


@converter("Mod")
def mod(node: Node):
    a, b = node.expr(0), node.expr(1)
    if node.attr("fmod", 0):
        return call_op("fmod", a, b)
    if dtype_info(a.type.dtype).is_float and node.opset < 28:
        raise node.fail("fmod=0 on floats is invalid before opset 28 (use fmod=1)")
    return call_op("mod", a, b)  # the divisor's sign, as Python's % (and ONNX 28's floats)


def _fold(nbyoc_op: str):
    def convert(node: Node):
        values = [node.expr(i) for i in range(len(node.inputs)) if node.has(i)]
        if not values:
            raise node.fail("needs at least one input")
        result = values[0]
        for v in values[1:]:
            result = call_op(nbyoc_op, result, v)
        return result

    convert.__name__ = f"variadic_{nbyoc_op}"
    return convert


converter("Max")(_fold("maximum"))
converter("Min")(_fold("minimum"))
converter("Sum")(_fold("add"))


@converter("Mean")
def mean(node: Node):
    total = _fold("add")(node)
    return call_op("divide", total, float(sum(node.has(i) for i in range(len(node.inputs)))))


@converter("Cast")
def cast(node: Node):
    to = onnx_dtype(node.attr("to"), node.where)
    return call_op("cast", saturated(node.expr(0), to, node.attr("saturate", 1)), to=to)


@converter("CastLike")
def cast_like(node: Node):
    like = node.expr(1).type.dtype  # only its dtype is read: a known input stays known
    saturate = node.attr("saturate", 1)
    if isinstance(node.inputs[0], np.ndarray):
        node.computing(node.inputs[0].shape, like)
        x = node.inputs[0]
        if _saturates(x.dtype, like, saturate):
            finite = dtype_info(like).finite_max
            x = np.clip(x.astype(np.float32), -finite, finite)
        return x.astype(like)
    return call_op("cast", saturated(node.expr(0), like, saturate), to=like)


def _saturates(source, to: str, saturate: int) -> bool:
    """Whether a cast from ``source`` to ``to`` saturates (``saturate`` set, ``to`` a
    narrow float: float8 or float4) and needs a clip to do it."""
    target = dtype_info(to)
    return bool(saturate) and target.is_float and not target.computed


def saturated(x, to: str, saturate: int):
    """``x``, clipped to ``to``'s finite range when a cast to it saturates (ONNX's
    ``saturate``, the default: an out-of-range value or an infinity becomes the
    largest finite value of its sign, NaN stays NaN; without it, they become inf or
    NaN, as a float8 cast gives); other dtypes (and NaN) are left to the cast."""
    if not _saturates(x.type.dtype, to, saturate):
        return x
    source = dtype_info(x.type.dtype)
    if not (source.is_float and source.computed):  # (an integer, or a narrow type)
        x = call_op("cast", x, to="float32")
    finite = dtype_info(to).finite_max
    return call_op("clip", x, min=-finite, max=finite)


@converter("IsInf")
def isinf(node: Node):
    x = node.expr(0)
    result = call_op("isinf", x)
    positive, negative = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    if positive and negative:
        return result
    if not (positive or negative):
        return call_op("logical_and", result, False)
    side = call_op("greater" if positive else "less", x, 0)
    return call_op("logical_and", result, side)


def _bound(node: Node, index: int, x):
    """A Clip bound as an expression of x's dtype (None when left out)."""
    if not node.has(index):
        return None
    bound = node.inputs[index]
    if isinstance(bound, np.ndarray):
        return np.asarray(bound, dtype=x.type.dtype)
    return node.expr(index)


@converter("Clip")
def clip_attributes(node: Node):
    x = node.expr(0)
    low, high = node.attr("min", -np.inf), node.attr("max", np.inf)
    return call_op("clip", x, float(low), float(high))


@converter("Clip", since=11)
def clip(node: Node):
    x = node.expr(0)
    result = x
    low, high = _bound(node, 1, x), _bound(node, 2, x)
    if low is not None:
        result = call_op("maximum", result, as_expr(low))
    if high is not None:
        result = call_op("minimum", result, as_expr(high))
    return result if result is not x else call_op("identity", x)


@converter("LeakyRelu")
def leaky_relu(node: Node):
    return call_op("leaky_relu", node.expr(0), alpha=node.attr("alpha", 0.01))


@converter("Elu")
def elu(node: Node):
    return call_op("elu", node.expr(0), alpha=node.attr("alpha", 1.0))


@converter("Selu")
def selu(node: Node):
    # ONNX's defaults are float32 roundings of SELU's constants.
    alpha = node.attr("alpha", 1.67326319217681884765625)
    gamma = node.attr("gamma", 1.05070102214813232421875)
    return call_op("selu", node.expr(0), alpha=alpha, gamma=gamma)


@converter("HardSigmoid")
def hard_sigmoid(node: Node):
    return call_op(
        "hard_sigmoid", node.expr(0), alpha=node.attr("alpha", 0.2), beta=node.attr("beta", 0.5)
    )


@converter("Gelu", since=20)
def gelu(node: Node):
    return call_op("gelu", node.expr(0), approximate=node.attr("approximate", "none"))


@converter("Softsign")
def softsign(node: Node):
    x = node.expr(0)
    return call_op("divide", x, call_op("add", call_op("abs", x), 1.0))


@converter("ThresholdedRelu")
def thresholded_relu(node: Node):
    x = node.expr(0)
    alpha = node.attr("alpha", 1.0)
    return call_op("where", call_op("greater", x, alpha), x, call_op("multiply", x, 0.0))


@converter("Mish", since=18)
def mish(node: Node):
    x = node.expr(0)
    return call_op("multiply", x, call_op("tanh", call_op("softplus", x)))


@converter("Tan")
def tan(node: Node):
    x = node.expr(0)
    return call_op("divide", call_op("sin", x), call_op("cos", x))
