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
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import IRError, NbyocTypeError
from .attrs import REQUIRED
from .dtypes import promote, scalar_dtype
from .nodes import Call, Constant, Expr, Function, Tuple, Var
from .op import get_op
from .types import TensorType
from .verify import verify

if TYPE_CHECKING:
    from .annotations import DTypeLike, Operand, ShapeLike


def var(name: str, shape: ShapeLike, dtype: DTypeLike = "float32") -> Var:
    """A graph input of static ``shape`` and ``dtype`` (default float32).

    >>> var("x", (10, 10))
    Var(x: Tensor[(10, 10), float32])
    """
    return Var(name, TensorType(shape, dtype))


#: id() of each live weak scalar value -> the Python type it stands for (see
#: ``weak_scalar``); by id, as graph values refuse ``==``; an entry goes with its node.
_WEAK: dict[int, type] = {}


def _mark_weak(value: Expr, kind: type) -> None:
    _WEAK[id(value)] = kind
    weakref.finalize(value, _WEAK.pop, id(value), None)


def weak_scalar(name: str, kind: type) -> Var:
    """A 0-d graph input standing for a Python ``bool``, ``int`` or ``float`` argument
    (``nbyoc.jit`` traces scalar arguments with these): weak, as a Python number is in
    an expression (NumPy 2, NEP 50). Next to a tensor it takes that tensor's dtype
    kind; its own dtype (bool, int64, float64: what the caller passes) is what it has
    alone. An op of weak scalars only is weak too.

    >>> s, x = weak_scalar("s", float), var("x", (3,))
    >>> (x * s).type, (s * 2).type, (x + s * 2).type
    (Tensor[(3,), float32], Tensor[(), float64], Tensor[(3,), float32])
    """
    if kind not in (bool, int, float):
        raise NbyocTypeError(f"a weak scalar stands for a bool, int or float, not {kind!r}")
    value = Var(name, TensorType((), scalar_dtype(kind(0), None)))
    _mark_weak(value, kind)
    return value


def weak_kind(value) -> type | None:
    """The Python type a weak scalar value stands for, else None."""
    return _WEAK.get(id(value)) if isinstance(value, Expr) else None


def const(value: ArrayLike, dtype: DTypeLike | None = None) -> Constant:
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
    return Constant(np.asarray(value))


def tuple(fields: Sequence[Expr]) -> Expr:
    """A tuple of expressions; index it with ``t[i]``.

    >>> x = var("x", (3,))
    >>> t = tuple([x, -x])
    >>> t[1].type
    Tensor[(3,), float32]
    """
    return Tuple(_as_exprs(fields))


def function(
    params: Sequence[Var], body: Expr | Sequence[Expr], attrs: Mapping[str, Any] | None = None
) -> Function:
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
    return verify(Function(params, body, attrs))


def _as_exprs(values) -> list[Expr]:
    exprs = list(values)
    for v in exprs:
        if not isinstance(v, Expr):
            raise IRError(f"expected IR expressions, got {v!r}; wrap data with nbyoc.const")
    return exprs


def call_op(name: str, *args: Operand, **attrs: Any) -> Call:
    """Apply the op called ``name``; non-IR operands become constants.

    Python ``int``/``float`` operands are weak (they follow the dtype of the
    tensor operands); NumPy scalars, arrays and lists are strong.

    >>> x = var("x", (3,), "int32")
    >>> call_op("add", x, 2).type, call_op("add", x, 2.5).type
    (Tensor[(3,), int32], Tensor[(3,), float64])
    """
    tensor_dtypes = [
        a.type.dtype
        for a in args
        if isinstance(a, Expr) and isinstance(a.type, TensorType) and weak_kind(a) is None
    ]
    partner = promote(*tensor_dtypes) if tensor_dtypes else None
    operands = [_as_operand(a, partner) for a in args]
    call = Call(name, operands, attrs)
    kinds = [weak_kind(a) if isinstance(a, Expr) else type(a) for a in args]
    if (
        not tensor_dtypes
        and any(weak_kind(a) for a in args)
        and all(k in (bool, int, float) for k in kinds)
        and call.type.ndim == 0
    ):
        # the kind of what Python computes from numbers of these kinds
        kind = float if name == "divide" else type(sum(k(0) for k in kinds))
        _mark_weak(call, bool if call.type.dtype == "bool" else kind)
    return call


def _as_operand(value, partner: str | None) -> Expr:
    if isinstance(value, Expr):
        kind = weak_kind(value)
        if kind is not None and partner is not None:
            dtype = scalar_dtype(kind(0), partner)
            if dtype != value.type.dtype:
                return Call("cast", [value], {"to": dtype})
        return value
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        return Constant(np.asarray(value, dtype=scalar_dtype(value, partner)))
    if isinstance(value, (np.ndarray, np.generic, list)):
        return const(value)
    raise NbyocTypeError(
        f"cannot use {value!r} ({type(value).__name__}) as an operand; "
        f"use an IR expression, a number or a NumPy array"
    )


def op_builder(name: str) -> Callable[..., Call]:
    """The builder function of a registered op: its operands, then its attributes
    (positionally in declared order, or by keyword). Ops whose family module defines
    no builder of their own get this one (see ``nbyoc.ir.ops``).

    >>> from nbyoc.ir.op import get_op
    >>> softmax = op_builder("softmax")
    >>> softmax(var("x", (2, 3)), 0).attrs["axis"]
    0
    """
    op = get_op(name)
    attr_names = list(op.attrs)

    def build(*args: Any, **attrs: Any) -> Call:
        if op.arity is None:  # one or more operands, given as one sequence
            if not args or isinstance(args[0], Expr):
                raise NbyocTypeError(f"{name} takes its operands as one list: {name}([a, b], ...)")
            operands, rest = list(args[0]), args[1:]
        else:
            operands, rest = args[: op.arity], args[op.arity :]
            if len(operands) < op.arity:
                raise NbyocTypeError(f"{name} takes {op.arity} operand(s), got {len(operands)}")
        if len(rest) > len(attr_names):
            raise NbyocTypeError(
                f"{name} takes {op.arity} operand(s) and the attributes "
                f"{', '.join(attr_names) or 'none'}; got {len(rest)} more positional argument(s)"
            )
        for key, value in zip(attr_names, rest):
            if key in attrs:
                raise NbyocTypeError(f"{name}: attribute {key} given twice")
            attrs[key] = value
        return call_op(name, *operands, **attrs)

    names = {None: "xs", 1: "x", 2: "lhs, rhs"}
    operand_text = names[op.arity] if op.arity in names else ", ".join("abcdefgh"[: op.arity])
    attr_text = "".join(
        f", {k}" if spec.default is REQUIRED else f", {k}={spec.default!r}"
        for k, spec in op.attrs.items()
    )
    build.__name__ = build.__qualname__ = name
    build.__module__ = "nbyoc"
    build.__doc__ = (
        f"{name}({operand_text}{attr_text})\n\n{op.summary}.\n\n"
        f"Attributes go positionally after the operands or by keyword; "
        f"``nbyoc.ir.get_op({name!r})`` describes the op."
    )
    return build
