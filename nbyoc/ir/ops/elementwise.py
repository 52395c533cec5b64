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
import math

import numpy as np

from ...errors import NbyocTypeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import DTYPES, dtype_info
from ..nodes import Expr
from ..op import Op, describe, register_op
from ..symbols import require
from ..types import TensorType


def broadcast_shapes(op_name: str, types: tuple[TensorType, ...]) -> tuple[int, ...]:
    """NumPy's broadcasting of the operands' shapes, or a type error saying where it fails.

    A symbolic size meeting an int ``c`` (not 1) gives ``c`` and meeting another
    symbol gives the first operand's; either way the call then needs the other size
    to be 1 or equal, a constraint checked when the sizes are known.

    >>> broadcast_shapes("add", (TensorType((4, 1)), TensorType((3,))))
    (4, 3)
    >>> broadcast_shapes("add", (TensorType(("n", 1)), TensorType((3,))))
    (n, 3)
    """
    ndim = max(len(t.shape) for t in types)
    out = []
    for axis in range(-ndim, 0):
        dims = {t.shape[axis] for t in types if len(t.shape) >= -axis}
        sizes = dims - {1}
        symbolic = [d for d in sizes if d.__class__ is not int]
        if symbolic:
            out.append(_symbolic_broadcast(op_name, types, axis, sizes))
            continue
        if len(sizes) > 1:
            raise NbyocTypeError(
                f"{op_name}({describe(types)}): shapes do not broadcast: sizes "
                f"{sorted(sizes)} meet at axis {axis}; make trailing dimensions equal or 1 "
                f"(e.g. with reshape)"
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _symbolic_broadcast(op_name: str, types, axis: int, sizes: set):
    known = sorted(d for d in sizes if d.__class__ is int)
    if len(known) > 1:
        raise NbyocTypeError(
            f"{op_name}({describe(types)}): shapes do not broadcast: sizes {known} "
            f"meet at axis {axis}; make trailing dimensions equal or 1 (e.g. with reshape)"
        )
    if known:
        result = known[0]
    else:  # the first operand's size, so that the result does not depend on set order
        result = next(t.shape[axis] for t in types if len(t.shape) >= -axis
                      and t.shape[axis] in sizes)  # fmt: skip
    for d in sorted(sizes - {result}, key=str):
        require("broadcast", d, result, where=f"{op_name} at axis {axis}")
    return result


@functools.cache
def numpy_loop(ufunc: np.ufunc, dtypes: tuple[str, ...]) -> tuple[str, ...]:
    """The dtypes NumPy computes ``ufunc`` in for operands of ``dtypes``: the operands'
    (after NumPy's casts), then the result's. The type rules of the elementwise ops are
    this, so every result dtype is NumPy's own.

    >>> numpy_loop(np.add, ("uint8", "int8")), numpy_loop(np.exp, ("int8",))
    (('int16', 'int16', 'int16'), ('float16', 'float16'))
    """
    if "bfloat16" in dtypes:  # (NumPy's loops know it with few partners: as float16)
        proxy = "float32" if "float16" in dtypes else "float16"
        names = numpy_loop(ufunc, tuple(proxy if d == "bfloat16" else d for d in dtypes))
        return tuple("bfloat16" if n == "float16" and proxy == "float16" else n for n in names)
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
    dtypes = tuple(a.type.dtype for a in call.args)
    return ELEMENTWISE_LOOPS[call.op.name](dtypes, call.attrs)


#: op -> its loop rule: ``(operand dtypes, attrs) -> (loop operand dtypes..., result)``.
ELEMENTWISE_LOOPS: dict = {}


def ufunc_loop(ufunc: np.ufunc):
    """The loop rule of an op that computes like ``ufunc``."""
    return lambda dtypes, attrs: numpy_loop(ufunc, dtypes)


def register_elementwise(
    name, arity, reference, summary, loop=None, attrs=None, decompose=None, moves_only=None
):
    """Register an elementwise op: one table row. Its dtypes follow ``loop`` (by default
    NumPy's loop of ``reference``, which must then be a ufunc); its shape, NumPy's
    broadcasting of the operands.

    >>> from nbyoc.ir.op import get_op
    >>> get_op("add").kind, ELEMENTWISE_LOOPS["add"](("int8", "int8"), {})
    ('elementwise', ('int8', 'int8', 'int8'))
    """
    ELEMENTWISE_LOOPS[name] = loop or ufunc_loop(reference)
    return register_op(Op(name, arity, _elementwise_rule(name), reference, "elementwise", summary,
                          attrs=attrs or {}, decompose=decompose,
                          moves_only=moves_only))  # fmt: skip


# name -> (NumPy reference, summary)
BINARY_OPS = {
    "add": (np.add, "Elementwise ``lhs + rhs``"),
    "subtract": (np.subtract, "Elementwise ``lhs - rhs``"),
    "multiply": (np.multiply, "Elementwise ``lhs * rhs``"),
    "divide": (np.true_divide, "Elementwise true division ``lhs / rhs``"),
    "maximum": (np.maximum, "Elementwise maximum (NaN propagates)"),
    "minimum": (np.minimum, "Elementwise minimum (NaN propagates)"),
    "power": (np.power, "Elementwise ``lhs ** rhs``"),
    "floor_divide": (np.floor_divide, "Elementwise ``lhs // rhs`` (rounded down; x // 0 is 0 "
                     "for integers, as in NumPy)"),
    "mod": (np.remainder, "Elementwise remainder with the divisor's sign (NumPy's ``%``)"),
    "fmod": (np.fmod, "Elementwise remainder with the dividend's sign (C's ``fmod``)"),
}  # fmt: skip


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a non-positive number never overflows, so both branches are exact. float16
    # is computed in float32 and rounded once, as NumPy computes float16.
    dtype = numpy_loop(np.exp, (x.dtype.name,))[-1]
    x = x.astype(np.float32 if dtype == "float16" else dtype)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(dtype)


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    # NumPy has no erf: Python's (correctly rounded to float64), rounded to the dtype.
    dtype = numpy_loop(np.sin, (x.dtype.name,))[-1]
    return np.asarray(_ERF(x.astype(np.float64)), np.float64).astype(dtype)


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
    "floor": (np.floor, "Elementwise largest integer not above x (integers unchanged)"),
    "ceil": (np.ceil, "Elementwise smallest integer not below x (integers unchanged)"),
    "round": (
        np.round,
        "Elementwise nearest integer, halves to even (``np.round``; integers unchanged)",
    ),
    "sign": (np.sign, "Elementwise -1, 0 or 1 by the sign of x (NaN stays NaN)"),
    "reciprocal": (np.reciprocal, "Elementwise ``1 / x`` of floats"),
    "sin": (np.sin, "Elementwise sine"),
    "cos": (np.cos, "Elementwise cosine"),
    "erf": (_erf, "Elementwise error function"),
    "log1p": (np.log1p, "Elementwise ``log(1 + x)``, accurate near 0 (where ``log(1 + x)`` "
              "loses x's digits to the rounding of ``1 + x``)"),
    "expm1": (np.expm1, "Elementwise ``exp(x) - 1``, accurate near 0 (where ``exp(x) - 1`` "
              "cancels)"),
}  # fmt: skip


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
            loop = ELEMENTWISE_LOOPS[name](tuple(t.dtype for t in types), attrs)
        except NbyocTypeError as e:
            raise NbyocTypeError(f"{name}({describe(types)}): {e}") from None
        return TensorType(shape, loop[-1]), attrs

    return infer


def _binary_builder(name: str):
    summary = BINARY_OPS[name][1]

    def build(lhs: Operand, rhs: Operand) -> Expr:
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

    def build(x: Operand) -> Expr:
        return call_op(name, x)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"""{summary}.

    >>> import nbyoc
    >>> nbyoc.{name}(nbyoc.var("x", (4,))).type
    Tensor[(4,), float32]
    """
    return build


#: Ops that compute like a ufunc other than their reference.
LIKE = {"sigmoid": np.exp, "relu": np.abs, "erf": np.sin}


def _floats_only(name: str, ufunc: np.ufunc):
    def loop(dtypes, attrs):
        if not all(dtype_info(d).is_float for d in dtypes):
            raise NbyocTypeError(
                f"{name} takes floats (the integer form truncates: 1 / 2 is 0); "
                f"cast the operand to a float dtype first"
            )
        return numpy_loop(ufunc, dtypes)

    return loop


def _round_loop(dtypes, attrs):
    # np.round leaves integers as they are (floor's loops) but rounds bools as rint does.
    return numpy_loop(np.rint if dtypes[0] == "bool" else np.floor, dtypes)


LOOPS = {"reciprocal": _floats_only("reciprocal", np.reciprocal), "round": _round_loop}

for _name, (_fn, _summary) in BINARY_OPS.items():
    register_elementwise(_name, 2, _fn, _summary, loop=ufunc_loop(LIKE.get(_name, _fn)))

for _name, (_fn, _summary) in UNARY_OPS.items():
    _loop = LOOPS.get(_name) or ufunc_loop(LIKE.get(_name, _fn))
    register_elementwise(_name, 1, _fn, _summary, loop=_loop)


def _cast_loop(dtypes, attrs):
    return (dtypes[0], attrs["to"])


def _cast(x, to):
    return x.astype(to)


register_elementwise(
    "cast", 1, _cast, "Elementwise conversion to dtype ``to`` (as ``x.astype(to)``). Floats "
    "to integers truncate toward zero, on every backend as in NumPy, wherever the truncated "
    "value fits ``to`` (for uint32: -1 < x < 2**32); NaN, infinities and other values are "
    "undefined, as in C: NumPy warns and gives what its processor gives, and a backend may "
    "give something else (clip to the range first where they can occur)",
    loop=_cast_loop, attrs={"to": Attr("dtype")}, moves_only=True,
)  # fmt: skip


def _clip_bounds(dtype: str, attrs) -> tuple:
    """clip's bounds for ``dtype``: None where there is none (or it cannot bind)."""
    info = dtype_info(dtype)
    bounds = []
    for key in ("min", "max"):
        value = attrs[key]
        if value is not None and info.is_integer:
            if math.isnan(value) or (math.isfinite(value) and value != int(value)):
                raise NbyocTypeError(
                    f"clip of {dtype}: {key}={value!r} is not an integer; cast x to a float "
                    f"dtype to clip at fractions"
                )
            if not info.min < value < info.max:  # at or past an end of the range
                # On its own side it never binds; past the other end it binds everything,
                # to that end (clip(uint8, max=0) is all zeros, clip(int8, min=200) 127).
                never = value <= info.min if key == "min" else value >= info.max
                value = None if never else (info.max if key == "min" else info.min)
            value = None if value is None else int(value)
        bounds.append(value)
    return tuple(bounds)


def _clip_loop(dtypes, attrs):
    if dtype_info(dtypes[0]).kind == "bool":
        raise NbyocTypeError("clip takes numbers, not bools")
    _clip_bounds(dtypes[0], attrs)  # refuses fractional bounds of integers
    return (dtypes[0], dtypes[0])


def _clip(x, min, max):
    low, high = _clip_bounds(x.dtype.name, {"min": min, "max": max})
    if low is not None:
        x = np.maximum(x, x.dtype.type(low))
    if high is not None:
        x = np.minimum(x, x.dtype.type(high))
    return x


def _clip_decomposition(x, min, max):
    low, high = _clip_bounds(x.type.dtype, {"min": min, "max": max})
    if low is not None:
        x = call_op("maximum", x, low)
    if high is not None:
        x = call_op("minimum", x, high)
    return x


register_elementwise(
    "clip", 1, _clip, "Elementwise ``minimum(maximum(x, min), max)``; bounds are numbers "
    "(None: unbounded) converted to x's dtype; NaN stays NaN",
    loop=_clip_loop, attrs={"min": Attr("float", None), "max": Attr("float", None)},
    decompose=_clip_decomposition,
)  # fmt: skip

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
