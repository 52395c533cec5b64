"""IR nodes: immutable, typed as soon as they are built.

``Var``, ``Constant``, ``Call``, ``Tuple`` and ``TupleGetItem`` are expressions
(``Expr``); a ``Function`` binds parameters to a body; an ``IRModule`` holds
named functions that call each other through ``GlobalVar``.

Nodes hash by identity, so passes can key dicts by node; use ``structural_equal`` /
``structural_hash`` to compare graphs by content. Operators on expressions build calls:
``a + b`` is ``nbyoc.add(a, b)``, ``a < b`` is ``nbyoc.less(a, b)``; ``==`` and ``!=``
raise rather than answer. (NumPy's ufuncs, array functions, methods and indexing on
graph values are the NumPy layer's, which ``nbyoc.frontend.numpy`` adds to ``Expr``.)

>>> a = Var("a", TensorType((2, 3), "float32"))
>>> y = Call("multiply", [a, a])
>>> y.type, y.op.name
(Tensor[(2, 3), float32], 'multiply')
>>> y.type = None
Traceback (most recent call last):
    ...
AttributeError: IR nodes are immutable; build a new node instead
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from ..errors import IRError, NbyocTypeError
from .dtypes import normalize_dtype
from .names import IDENTIFIER, check_backend_name, check_identifier, check_symbol, check_var_name
from .op import Op, describe, get_op, infer_call
from .symbols import SizeExpr, collecting
from .types import FuncType, TensorType, TupleType, Type

#: Function attributes with a grammar of their own (they reach generated code or text).
_CHECKED_ATTRS = {
    "global_symbol": lambda v: check_symbol(v, "global_symbol"),
    "Compiler": check_backend_name,
}


#: While set, every argument of a new ``Call``, ``Tuple`` or ``TupleGetItem`` is passed
#: through it first (``resolving_arguments``).
_ARGUMENT_RESOLVER: contextvars.ContextVar[Callable[[Expr], Expr] | None] = contextvars.ContextVar(
    "nbyoc_argument_resolver", default=None
)


@contextlib.contextmanager
def resolving_arguments(resolve: Callable[[Expr], Expr] | None):
    """Within it, nodes built take ``resolve(arg)`` for each argument ``arg`` (None: the
    argument itself): the NumPy frontend's hook for in-place updates, where a traced
    array's name stands for a newer value once the function changed the array
    (``frontend.numpy.aliasing``).

    >>> a = Var("a", TensorType((2,), "float32"))
    >>> b = Var("b", TensorType((2,), "float32"))
    >>> with resolving_arguments(lambda e: b if e is a else e):
    ...     Call("negative", [a]).args[0] is b
    True
    """
    token = _ARGUMENT_RESOLVER.set(resolve)
    try:
        yield
    finally:
        _ARGUMENT_RESOLVER.reset(token)


def check_function_name(name) -> str:
    """Function names are identifiers; an external function's is also its global symbol,
    whose stricter grammar its ``global_symbol`` attribute is checked against."""
    return check_identifier(name, "function name")


class Node:
    """Base of all IR nodes: immutable after construction."""

    __slots__ = ("__weakref__",)

    def _set(self, **fields) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("IR nodes are immutable; build a new node instead")

    __delattr__ = __setattr__

    def __str__(self) -> str:
        from .printer import astext  # (local: the printer imports nodes)

        return astext(self)


def refuse_equality(symbol: str, op: str):
    """Raise for ``x == y`` (``symbol`` ``==``, ``op`` ``equal``) or ``x != y`` on graph
    values: nodes keep identity semantics, so that lists, dicts and sets of nodes work;
    the elementwise comparison is ``nbyoc.equal`` / ``not_equal``."""
    raise NbyocTypeError(
        f"graph values are not compared with {symbol}: write nbyoc.{op}(x, y) for the "
        f"elementwise comparison ({symbol} is kept from building graphs so that nodes "
        f"work in lists and dicts; use 'is' to ask whether two nodes are the same node, "
        f"and nbyoc.structural_equal to compare graphs)"
    )


class Expr(Node):
    """An expression; ``type`` is its inferred ``TensorType`` or ``TupleType``.

    The builder's operators build calls (``+ - * / // % ** @``, unary ``-``, ``abs()``,
    ``< <= > >=``); ``==`` and ``!=`` raise rather than answer a Python bool, and nodes
    hash by identity. NumPy's ufuncs, array functions, methods such as ``.T``,
    ``.sum(axis=)`` and ``.reshape``, and tensor indexing are attached by the NumPy
    layer (``nbyoc.frontend.numpy``), which ``import nbyoc`` loads.
    """

    __slots__ = ("type",)
    type: TensorType | TupleType

    def _binary(self, name: str, other, reflected: bool = False):
        from .builder import call_op  # (local: the builder imports nodes)

        return call_op(name, other, self) if reflected else call_op(name, self, other)

    def __add__(self, other):
        return self._binary("add", other)

    def __radd__(self, other):
        return self._binary("add", other, reflected=True)

    def __sub__(self, other):
        return self._binary("subtract", other)

    def __rsub__(self, other):
        return self._binary("subtract", other, reflected=True)

    def __mul__(self, other):
        return self._binary("multiply", other)

    def __rmul__(self, other):
        return self._binary("multiply", other, reflected=True)

    def __truediv__(self, other):
        return self._binary("divide", other)

    def __rtruediv__(self, other):
        return self._binary("divide", other, reflected=True)

    def __floordiv__(self, other):
        return self._binary("floor_divide", other)

    def __rfloordiv__(self, other):
        return self._binary("floor_divide", other, reflected=True)

    def __mod__(self, other):
        return self._binary("mod", other)

    def __rmod__(self, other):
        return self._binary("mod", other, reflected=True)

    def __pow__(self, other):
        return self._binary("power", other)

    def __rpow__(self, other):
        return self._binary("power", other, reflected=True)

    def __matmul__(self, other):
        return self._binary("matmul", other)

    def __rmatmul__(self, other):
        return self._binary("matmul", other, reflected=True)

    def __neg__(self):
        from .builder import call_op  # (local: the builder imports nodes)

        return call_op("negative", self)

    def __abs__(self):
        from .builder import call_op  # (local: the builder imports nodes)

        return call_op("abs", self)

    def __lt__(self, other):
        return self._binary("less", other)

    def __le__(self, other):
        return self._binary("less_equal", other)

    def __gt__(self, other):
        return self._binary("greater", other)

    def __ge__(self, other):
        return self._binary("greater_equal", other)

    def __eq__(self, other):
        refuse_equality("==", "equal")

    def __ne__(self, other):
        refuse_equality("!=", "not_equal")

    __hash__ = object.__hash__  # nodes hash by identity (defining __eq__ would unset it)

    def __getitem__(self, index):
        """A field of a tuple value (``t[0]``). Indexing a tensor is NumPy's indexing,
        which the NumPy layer (``nbyoc.frontend.numpy.indexing``) attaches."""
        if isinstance(self.type, TensorType):
            raise NbyocTypeError(
                f"indexing a tensor ({self.type!r}) is NumPy's indexing, which "
                f"nbyoc.frontend.numpy adds to graph values; import nbyoc, or build the "
                f"slice with nbyoc.slice / nbyoc.gather"
            )
        return TupleGetItem(self, index)

    def __iter__(self):
        if not isinstance(self.type, TupleType):
            raise TypeError(f"only tuple values can be unpacked, this is {self.type!r}")
        return (TupleGetItem(self, i) for i in range(len(self.type.fields)))

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of a tensor-typed expression."""
        return self._tensor_type().shape

    @property
    def dtype(self) -> str:
        """Dtype of a tensor-typed expression."""
        return self._tensor_type().dtype

    def _tensor_type(self) -> TensorType:
        if not isinstance(self.type, TensorType):
            raise TypeError(f"this expression is a tuple {self.type!r}; index it first")
        return self.type


class Var(Expr):
    """A function parameter: a name (a hint only) and a tensor type."""

    __slots__ = ("name_hint",)
    name_hint: str
    type: TensorType

    def __init__(self, name_hint: str, type: TensorType):
        check_var_name(name_hint)
        if not isinstance(type, TensorType):
            raise NbyocTypeError(f"variable {name_hint!r} must have a TensorType, got {type!r}")
        self._set(name_hint=name_hint, type=type)

    def __repr__(self) -> str:
        return f"Var({self.name_hint}: {self.type!r})"


class Constant(Expr):
    """A constant tensor. Holds a private, read-only, C-contiguous copy of the data."""

    __slots__ = ("data",)
    data: np.ndarray
    type: TensorType

    def __init__(self, data):
        dtype = normalize_dtype(np.asarray(data).dtype)
        array = np.array(data, dtype=dtype, order="C", copy=True)  # native byte order
        array.flags.writeable = False
        self._set(data=array, type=TensorType(array.shape, dtype))

    def __repr__(self) -> str:
        return f"Constant({self.type!r})"


@dataclass(frozen=True)
class GlobalVar:
    """The name of a function in an ``IRModule``, used as the callee of a ``Call``."""

    name_hint: str
    type: FuncType

    def __post_init__(self):
        check_function_name(self.name_hint)

    def __repr__(self) -> str:
        return f"@{self.name_hint}"


class Call(Expr):
    """An op (or a module function, via its ``GlobalVar``) applied to arguments.

    ``op`` may be given by name. ``attrs`` are stored in normal form.
    ``assumes`` holds the constraints on symbolic sizes that its type relies on and
    that only the call's concrete shapes can check (``ir.symbols.Constraint``).
    """

    __slots__ = ("args", "assumes", "attrs", "op")
    op: Op | GlobalVar
    args: tuple[Expr, ...]
    attrs: Mapping[str, Any]
    assumes: tuple[Any, ...]

    def __init__(
        self, op: Op | GlobalVar | str, args: Iterable[Expr], attrs: Mapping | None = None
    ):
        args = tuple(args)
        for arg in args:
            if not isinstance(arg, Expr):
                raise IRError(f"call arguments must be IR expressions, got {arg!r}")
        resolve = _ARGUMENT_RESOLVER.get()
        if resolve is not None:
            args = tuple(map(resolve, args))
        arg_types = tuple(a.type for a in args)
        if isinstance(op, GlobalVar):
            if attrs:
                raise IRError(f"a call to {op!r} takes no attributes")
            if arg_types != op.type.params:
                raise NbyocTypeError(
                    f"call to {op!r}: arguments ({describe(arg_types)}) do not match "
                    f"its parameters ({describe(op.type.params)})"
                )
            result, attrs = op.type.ret, {}
            assumes = ()
        else:
            op = op if isinstance(op, Op) else get_op(op)
            if any(getattr(t, "symbols", None) for t in arg_types) or _symbolic(attrs):
                with collecting() as found:
                    result, attrs = infer_call(op, arg_types, attrs or {})
                assumes = tuple(found)
            else:
                result, attrs = infer_call(op, arg_types, attrs or {})
                assumes = ()
        self._set(
            op=op, args=args, attrs=MappingProxyType(dict(attrs)), type=result, assumes=assumes
        )

    def __repr__(self) -> str:
        name = self.op.name if isinstance(self.op, Op) else repr(self.op)
        return f"Call({name}, {len(self.args)} args) -> {self.type!r}"


def _symbolic(attrs) -> bool:
    """True when an attribute holds a symbolic size (a reshape's target from a model)."""
    if not attrs:
        return False
    return any(
        isinstance(v, SizeExpr) or (type(v) is tuple and any(isinstance(d, SizeExpr) for d in v))
        for v in attrs.values()
    )


class Tuple(Expr):
    """A tuple of values (used for several outputs)."""

    __slots__ = ("fields",)
    fields: tuple[Expr, ...]
    type: TupleType

    def __init__(self, fields: Iterable[Expr]):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Expr):
                raise IRError(f"tuple fields must be IR expressions, got {f!r}")
        resolve = _ARGUMENT_RESOLVER.get()
        if resolve is not None:
            fields = tuple(map(resolve, fields))
        self._set(fields=fields, type=TupleType(f.type for f in fields))

    def __repr__(self) -> str:
        return f"Tuple({len(self.fields)} fields) -> {self.type!r}"


class TupleGetItem(Expr):
    """Field ``index`` of a tuple-typed expression."""

    __slots__ = ("index", "tuple_value")
    tuple_value: Expr
    index: int

    def __init__(self, tuple_value: Expr, index: int):
        resolve = _ARGUMENT_RESOLVER.get()
        if resolve is not None:
            tuple_value = resolve(tuple_value)
        t = tuple_value.type
        if not isinstance(t, TupleType):
            raise NbyocTypeError(
                f"cannot index {t!r} with [{index!r}]: only tuple values can be indexed "
                f"(tensor slicing is not an op yet; use reshape/transpose)"
            )
        if isinstance(index, bool) or not isinstance(index, int):
            raise NbyocTypeError(f"tuple index must be an int, got {index!r}")
        n = len(t.fields)
        if not -n <= index < n:
            raise NbyocTypeError(f"tuple index {index} out of range for {t!r}")
        index %= n
        self._set(tuple_value=tuple_value, index=index, type=t.fields[index])

    def __repr__(self) -> str:
        return f"TupleGetItem([{self.index}]) -> {self.type!r}"


def _check_attrs(attrs: Mapping | None, what: str) -> Mapping:
    attrs = dict(attrs or {})
    for key, value in attrs.items():
        if not isinstance(key, str) or not IDENTIFIER.match(key):
            raise IRError(f"{what} attribute name {key!r} must be an identifier")
        if not isinstance(value, (str, int, float, bool)):
            raise IRError(
                f"{what} attribute {key}={value!r}: values must be str, int, float or bool"
            )
        if key in _CHECKED_ATTRS:
            _CHECKED_ATTRS[key](value)
    return MappingProxyType(attrs)


class Function(Node):
    """Parameters bound to a body. The body may be a ``Tuple`` (several outputs).

    ``attrs`` (str/int/float/bool values) carry facts such as ``Compiler`` and
    ``global_symbol`` for external functions. Free variables are not rejected
    here so passes can build functions step by step; ``verify`` rejects them.
    """

    __slots__ = ("attrs", "body", "params", "type")
    params: tuple[Var, ...]
    body: Expr
    attrs: Mapping[str, Any]
    type: FuncType

    def __init__(self, params: Iterable[Var], body: Expr, attrs: Mapping | None = None):
        if isinstance(params, Expr) or not isinstance(params, Iterable):
            raise IRError(
                f"function parameters must be a list of variables, e.g. "
                f"nbyoc.function([x], body); got {params!r}"
            )
        params = tuple(params)
        for p in params:
            if not isinstance(p, Var):
                raise IRError(f"function parameters must be Vars, got {p!r}")
        if not isinstance(body, Expr):
            raise IRError(f"function body must be an IR expression, got {body!r}")
        self._set(
            params=params,
            body=body,
            attrs=_check_attrs(attrs, "function"),
            type=FuncType([p.type for p in params], body.type),
        )

    @property
    def ret_type(self) -> Type:
        return self.type.ret

    def with_attrs(self, **attrs) -> Function:
        """A copy of this function with ``attrs`` added or replaced."""
        return Function(self.params, self.body, {**self.attrs, **attrs})

    def __repr__(self) -> str:
        return f"Function({self.type!r})"


class IRModule(Node):
    """Named functions; ``"main"`` is the entry point and always listed first.

    >>> x = Var("x", TensorType((3,)))
    >>> mod = IRModule({"main": Function([x], -x)})
    >>> list(mod.functions), mod["main"].type
    (['main'], fn (Tensor[(3,), float32]) -> Tensor[(3,), float32])
    """

    __slots__ = ("functions",)
    functions: Mapping[str, Function]

    def __init__(self, functions: Mapping[str, Function]):
        functions = dict(functions)
        if "main" not in functions:
            raise IRError(f"an IRModule needs a 'main' function, got {sorted(functions)}")
        ordered = {"main": functions.pop("main"), **functions}
        for name, func in ordered.items():
            check_function_name(name)
            if not isinstance(func, Function):
                raise IRError(f"module entry {name!r} must be a Function, got {func!r}")
        self._set(functions=MappingProxyType(ordered))

    def __getitem__(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            raise IRError(
                f"no function {name!r} in module; it has {', '.join(self.functions)}"
            ) from None

    def __contains__(self, name: str) -> bool:
        return name in self.functions

    def get_global_var(self, name: str) -> GlobalVar:
        """The ``GlobalVar`` to call function ``name`` with."""
        return GlobalVar(name, self[name].type)

    def __repr__(self) -> str:
        return f"IRModule({', '.join(self.functions)})"
