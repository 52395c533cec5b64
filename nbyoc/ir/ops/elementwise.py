"""Elementwise ops: binary ones with NumPy broadcasting, and unary ones.

Each op is one table row: name, NumPy reference, and how the result dtype
follows from the operands'. The builder functions (``nbyoc.add`` ...) are made
from the same rows.

>>> import nbyoc
>>> x = nbyoc.var("x", (4, 1), "int32")
>>> nbyoc.divide(x, nbyoc.var("y", (3,), "int32")).type
Tensor[(4, 3), float64]
"""

from __future__ import annotations

import numpy as np

from ...errors import NbyocTypeError
from ..builder import call_op
from ..dtypes import promote, same, to_float
from ..op import Op, describe, register_op
from ..types import TensorType


def broadcast_shapes(op_name: str, types: tuple[TensorType, ...]) -> tuple[int, ...]:
    """NumPy's broadcasting of the operands' shapes, or a type error saying where it fails.

    >>> broadcast_shapes("add", (TensorType((4, 1)), TensorType((3,))))
    (4, 3)
    """
    ndim = max(len(t.shape) for t in types)
    out = []
    for axis in range(-ndim, 0):
        dims = {t.shape[axis] for t in types if len(t.shape) >= -axis}
        sizes = dims - {1}
        if len(sizes) > 1:
            raise NbyocTypeError(
                f"{op_name}({describe(types)}): shapes do not broadcast: sizes "
                f"{sorted(sizes)} meet at axis {axis}; make trailing dimensions equal or 1 "
                f"(e.g. with reshape)"
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


# name -> (NumPy reference, dtype rule on the promoted operand dtype, summary)
BINARY_OPS = {
    "add": (np.add, same, "Elementwise ``lhs + rhs``"),
    "subtract": (np.subtract, same, "Elementwise ``lhs - rhs``"),
    "multiply": (np.multiply, same, "Elementwise ``lhs * rhs``"),
    "divide": (np.true_divide, to_float, "Elementwise true division ``lhs / rhs``"),
    "maximum": (np.maximum, same, "Elementwise maximum (NaN propagates)"),
    "minimum": (np.minimum, same, "Elementwise minimum (NaN propagates)"),
    "power": (np.power, same, "Elementwise ``lhs ** rhs``"),
}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a non-positive number never overflows, so both branches are exact.
    x = x if x.dtype.kind == "f" else x.astype(np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


UNARY_OPS = {
    "negative": (np.negative, same, "Elementwise ``-x``"),
    "abs": (np.abs, same, "Elementwise absolute value"),
    "exp": (np.exp, to_float, "Elementwise ``e ** x``"),
    "log": (np.log, to_float, "Elementwise natural logarithm"),
    "sqrt": (np.sqrt, to_float, "Elementwise square root"),
    "tanh": (np.tanh, to_float, "Elementwise hyperbolic tangent"),
    "sigmoid": (_sigmoid, to_float, "Elementwise logistic function ``1 / (1 + exp(-x))``"),
    "relu": (_relu, same, "Elementwise ``max(x, 0)``"),
}


def _binary_rule(name, dtype_rule):
    def infer(types, attrs):
        shape = broadcast_shapes(name, types)
        return TensorType(shape, dtype_rule(promote(*(t.dtype for t in types)))), attrs

    return infer


def _unary_rule(dtype_rule):
    def infer(types, attrs):
        return TensorType(types[0].shape, dtype_rule(types[0].dtype)), attrs

    return infer


def _binary_builder(name: str):
    summary = BINARY_OPS[name][2]

    def build(lhs, rhs):
        return call_op(name, lhs, rhs)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"""{summary}, with NumPy broadcasting and dtype promotion.

    Python numbers are accepted on either side and follow the tensor's dtype.

    >>> import nbyoc
    >>> nbyoc.{name}(nbyoc.var("a", (2, 3)), nbyoc.var("b", (3,))).shape
    (2, 3)
    """
    return build


def _unary_builder(name: str):
    summary = UNARY_OPS[name][2]

    def build(x):
        return call_op(name, x)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"""{summary}.

    >>> import nbyoc
    >>> nbyoc.{name}(nbyoc.var("x", (4,))).type
    Tensor[(4,), float32]
    """
    return build


for _name, (_fn, _rule, _summary) in BINARY_OPS.items():
    register_op(Op(_name, 2, _binary_rule(_name, _rule), _fn, "elementwise", _summary))

for _name, (_fn, _rule, _summary) in UNARY_OPS.items():
    register_op(Op(_name, 1, _unary_rule(_rule), _fn, "elementwise", _summary))

# The builder functions, spelt out so readers and tools can find them.
add = _binary_builder("add")
subtract = _binary_builder("subtract")
multiply = _binary_builder("multiply")
divide = _binary_builder("divide")
maximum = _binary_builder("maximum")
minimum = _binary_builder("minimum")
power = _binary_builder("power")
negative = _unary_builder("negative")
abs = _unary_builder("abs")
exp = _unary_builder("exp")
log = _unary_builder("log")
sqrt = _unary_builder("sqrt")
tanh = _unary_builder("tanh")
sigmoid = _unary_builder("sigmoid")
relu = _unary_builder("relu")
