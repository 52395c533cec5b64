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

import functools

import numpy as np

from ...errors import NbyocTypeError
from ..builder import call_op
from ..dtypes import DTYPES
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


@functools.cache
def numpy_loop(ufunc: np.ufunc, dtypes: tuple[str, ...]) -> tuple[str, ...]:
    """The dtypes NumPy computes ``ufunc`` in for operands of ``dtypes``: the operands'
    (after NumPy's casts), then the result's. The type rules of the elementwise ops are
    this, so every result dtype is NumPy's own.

    >>> numpy_loop(np.add, ("uint8", "int8")), numpy_loop(np.exp, ("int8",))
    (('int16', 'int16', 'int16'), ('float16', 'float16'))
    """
    try:
        resolved = ufunc.resolve_dtypes((*(np.dtype(d) for d in dtypes), None))
    except TypeError as e:  # NumPy has no loop (e.g. subtract of bools)
        raise NbyocTypeError(
            f"NumPy refuses {ufunc.__name__} on {', '.join(dtypes)}: {e}"
        ) from None
    names = tuple(d.name for d in resolved)
    if any(n not in DTYPES for n in names):
        raise NbyocTypeError(
            f"{ufunc.__name__} on {', '.join(dtypes)} computes in {', '.join(names)}, "
            f"which nbyoc does not support"
        )
    return names


def loop_dtypes(call) -> tuple[str, ...]:
    """The dtypes an elementwise call computes in: its operands' (as NumPy casts them),
    then its result's. Backends read operands as these.

    >>> import nbyoc
    >>> loop_dtypes(nbyoc.var("a", (2,), "int8") + nbyoc.var("b", (2,), "uint8"))
    ('int16', 'int16', 'int16')
    """
    return numpy_loop(ELEMENTWISE_LOOPS[call.op.name], tuple(a.type.dtype for a in call.args))


# name -> (NumPy reference, summary)
BINARY_OPS = {
    "add": (np.add, "Elementwise ``lhs + rhs``"),
    "subtract": (np.subtract, "Elementwise ``lhs - rhs``"),
    "multiply": (np.multiply, "Elementwise ``lhs * rhs``"),
    "divide": (np.true_divide, "Elementwise true division ``lhs / rhs``"),
    "maximum": (np.maximum, "Elementwise maximum (NaN propagates)"),
    "minimum": (np.minimum, "Elementwise minimum (NaN propagates)"),
    "power": (np.power, "Elementwise ``lhs ** rhs``"),
}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a non-positive number never overflows, so both branches are exact. float16
    # is computed in float32 and rounded once, as NumPy computes float16.
    dtype = numpy_loop(np.exp, (x.dtype.name,))[-1]
    x = x.astype(np.float32 if dtype == "float16" else dtype)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(dtype)


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


UNARY_OPS = {
    "negative": (np.negative, "Elementwise ``-x``"),
    "abs": (np.abs, "Elementwise absolute value"),
    "exp": (np.exp, "Elementwise ``e ** x``"),
    "log": (np.log, "Elementwise natural logarithm"),
    "sqrt": (np.sqrt, "Elementwise square root"),
    "tanh": (np.tanh, "Elementwise hyperbolic tangent"),
    "sigmoid": (_sigmoid, "Elementwise logistic function ``1 / (1 + exp(-x))``"),
    "relu": (_relu, "Elementwise ``max(x, 0)``"),
}

#: op -> the NumPy ufunc whose loops give its dtypes: its reference when that is a
#: ufunc, else the ufunc that computes like it (sigmoid like exp, relu like abs).
ELEMENTWISE_LOOPS = {
    name: fn if isinstance(fn, np.ufunc) else {"sigmoid": np.exp, "relu": np.abs}[name]
    for name, (fn, _) in {**BINARY_OPS, **UNARY_OPS}.items()
}


def same_type(types, attrs):
    """The type rule of an op whose result has its (first) operand's type.

    >>> same_type((TensorType((2,), "int8"),), {})
    (Tensor[(2,), int8], {})
    """
    return types[0], attrs


def _elementwise_rule(name: str):
    def infer(types, attrs):
        shape = broadcast_shapes(name, types) if len(types) > 1 else types[0].shape
        try:
            loop = numpy_loop(ELEMENTWISE_LOOPS[name], tuple(t.dtype for t in types))
        except NbyocTypeError as e:
            raise NbyocTypeError(f"{name}({describe(types)}): {e}") from None
        return TensorType(shape, loop[-1]), attrs

    return infer


def _binary_builder(name: str):
    summary = BINARY_OPS[name][1]

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
    summary = UNARY_OPS[name][1]

    def build(x):
        return call_op(name, x)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"""{summary}.

    >>> import nbyoc
    >>> nbyoc.{name}(nbyoc.var("x", (4,))).type
    Tensor[(4,), float32]
    """
    return build


for _name, (_fn, _summary) in BINARY_OPS.items():
    register_op(Op(_name, 2, _elementwise_rule(_name), _fn, "elementwise", _summary))

for _name, (_fn, _summary) in UNARY_OPS.items():
    register_op(Op(_name, 1, _elementwise_rule(_name), _fn, "elementwise", _summary))

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
