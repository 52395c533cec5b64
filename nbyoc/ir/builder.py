"""The graph-building API: ``var``, ``const``, ``tuple``, ``function`` and ``call_op``.

One builder function per op lives next to that op in ``nbyoc.ir.ops``; all of
them go through :func:`call_op`, which turns Python scalars, NumPy scalars and
arrays into constants with NumPy 2's dtype rules.

>>> import nbyoc
>>> a, b = nbyoc.var("a", (2, 2)), nbyoc.var("b", (2, 2))
>>> f = nbyoc.function([a, b], [a + b, a * 2])
>>> f.ret_type
(Tensor[(2, 2), float32], Tensor[(2, 2), float32])
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy as np

from ..errors import IRError, NbyocTypeError
from .dtypes import promote, scalar_dtype
from .nodes import Call, Constant, Expr, Function, Tuple, Var
from .types import TensorType


def var(name: str, shape, dtype="float32") -> Var:
    """A graph input of static ``shape`` and ``dtype`` (default float32).

    >>> var("x", (10, 10))
    Var(x: Tensor[(10, 10), float32])
    """
    return Var(name, TensorType(shape, dtype))


def const(value, dtype=None) -> Constant:
    """A constant tensor from an array, a nested list or a scalar.

    Without ``dtype``, the value's own NumPy dtype is kept (a Python float is
    float64, a Python int int64). Constants are strong, like NumPy arrays: to
    let a scalar follow its partner's dtype, write it as a plain Python number
    in the expression instead (``x * 2.0``).

    >>> const([1, 2, 3], "float32").type
    Tensor[(3,), float32]
    """
    if isinstance(value, Expr):
        raise IRError("const() takes data, not an IR expression")
    if dtype is not None:
        return Constant(np.asarray(value, dtype=np.dtype(dtype)))
    array = np.asarray(value)
    if array.dtype == np.bool_:
        raise NbyocTypeError("bool constants are not supported; use integers 0/1")
    return Constant(array)


def tuple(fields: Sequence[Expr]) -> Expr:
    """A tuple of expressions; index it with ``t[i]``.

    >>> x = var("x", (3,))
    >>> t = tuple([x, -x])
    >>> t[1].type
    Tensor[(3,), float32]
    """
    return Tuple(_as_exprs(fields))


def function(params: Sequence[Var], body, attrs=None) -> Function:
    """A function of ``params``; ``body`` is one expression or a list/tuple of outputs.

    Every variable the body uses must be a parameter, and parameters must be distinct.

    >>> x = var("x", (3,))
    >>> function([x], [x + 1, x * x]).ret_type
    (Tensor[(3,), float32], Tensor[(3,), float32])
    """
    if isinstance(body, (list, builtins.tuple)):
        body = Tuple(_as_exprs(body))
    elif not isinstance(body, Expr):
        raise IRError(f"function body must be an expression or a list of them, got {body!r}")
    from .verify import verify

    return verify(Function(params, body, attrs))


def _as_exprs(values) -> list[Expr]:
    exprs = list(values)
    for v in exprs:
        if not isinstance(v, Expr):
            raise IRError(f"expected IR expressions, got {v!r}; wrap data with nbyoc.const")
    return exprs


def call_op(name: str, *args, **attrs) -> Call:
    """Apply the op called ``name``; non-IR operands become constants.

    Python ``int``/``float`` operands are weak (they follow the dtype of the
    tensor operands); NumPy scalars, arrays and lists are strong.

    >>> x = var("x", (3,), "int32")
    >>> call_op("add", x, 2).type, call_op("add", x, 2.5).type
    (Tensor[(3,), int32], Tensor[(3,), float64])
    """
    tensor_dtypes = [
        a.type.dtype for a in args if isinstance(a, Expr) and isinstance(a.type, TensorType)
    ]
    partner = promote(*tensor_dtypes) if tensor_dtypes else None
    operands = [_as_operand(a, partner) for a in args]
    return Call(name, operands, attrs)


def _as_operand(value, partner: str | None) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, (bool, np.generic)):
        return Constant(np.asarray(value, dtype=scalar_dtype(value, partner)))
    if isinstance(value, (np.ndarray, np.generic, list)):
        return const(value)
    raise NbyocTypeError(
        f"cannot use {value!r} ({type(value).__name__}) as an operand; "
        f"use an IR expression, a number or a NumPy array"
    )
