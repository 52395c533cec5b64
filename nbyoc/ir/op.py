"""The op registry: each op's name, type rule and NumPy reference, registered together.

An :class:`Op` is looked up by name when a ``Call`` is built. Its type rule runs
at once, so every node knows its shape and dtype; its reference implementation
is what the host executor runs.

>>> get_op("add").kind, get_op("sum").defaults
('elementwise', {'axis': None, 'keepdims': False})
>>> get_op("ad_d")
Traceback (most recent call last):
    ...
nbyoc.errors.UnknownOpError: unknown op 'ad_d'; did you mean 'add'? ...
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import DuplicateRegistrationError, NbyocTypeError, UnknownOpError
from .attrs import REQUIRED, Attr
from .dtypes import computable
from .types import TensorType, Type

#: The kinds of op. Backends use them to decide what can be fused into one loop. A
#: ``control`` op's bodies are programs of their own, compiled for the executable's
#: backends; a ``composite`` op's body is the definition of one backend's fused kernel.
OP_KINDS = ("elementwise", "reduce", "matmul", "layout", "control", "composite")

TypeRule = Callable[[tuple[TensorType, ...], dict], tuple[TensorType, dict]]


@dataclass(frozen=True, eq=False)
class Op:
    """An operator: what it accepts, what it returns, and how NumPy computes it.

    ``infer(arg_types, attrs)`` returns the result type and the attributes in
    normal form (e.g. negative axes resolved), or raises ``NbyocTypeError``.
    ``reference(*arrays, **attrs)`` returns an ``ndarray`` of exactly that type
    (or, for a 0-d result, possibly a NumPy scalar of that dtype, as ufuncs do).
    ``arity`` is the number of operands, or ``None`` for "one or more".
    ``attrs`` maps each attribute name to its typed spec (``nbyoc.ir.attrs.Attr``):
    a given value is checked and normalised by it before the type rule runs.
    ``decompose(*args, **attrs)``, if given, builds the same result from other ops;
    ``nbyoc.transform.legalize`` uses it for a backend that lacks the op.
    ``moves_only`` says that the op only moves or converts values, never computes with
    them, so it takes the narrow dtypes (``nbyoc.ir.dtypes.NARROW_DTYPES``); ``None``
    (the default) means "if it is a layout op".
    """

    name: str
    arity: int | None
    infer: TypeRule
    reference: Callable[..., np.ndarray]
    kind: str
    summary: str
    attrs: Mapping[str, Attr] = field(default_factory=dict)
    decompose: Callable[..., object] | None = None
    moves_only: bool | None = None

    @property
    def takes_narrow(self) -> bool:
        """Whether the op takes operands and results of the narrow dtypes."""
        return self.kind == "layout" if self.moves_only is None else self.moves_only

    @property
    def defaults(self) -> dict:
        """Each attribute's default (``REQUIRED`` where the caller must give it)."""
        return {name: spec.default for name, spec in self.attrs.items()}

    def __repr__(self) -> str:
        return f"Op({self.name})"


_REGISTRY: dict[str, Op] = {}


def register_op(op: Op) -> Op:
    """Add ``op`` to the registry; a second op of the same name is refused."""
    if op.name in _REGISTRY:
        raise DuplicateRegistrationError(f"op {op.name!r} is already registered")
    if op.kind not in OP_KINDS:
        raise ValueError(f"op kind must be one of {OP_KINDS}, got {op.kind!r}")
    for name, spec in op.attrs.items():
        if not isinstance(spec, Attr):
            raise TypeError(
                f"op {op.name!r}: attribute {name!r} needs a spec, nbyoc.ir.attrs.Attr(kind, "
                f"default), got {spec!r}"
            )
    _REGISTRY[op.name] = op
    return op


#: Names other tools give nbyoc's ops (the BYOC guide's ExampleJSON, NumPy, ONNX,
#: PyTorch), for the hint when such a name is used where an op name is expected.
OTHER_NAMES = {
    "mul": "multiply", "sub": "subtract", "div": "divide", "true_divide": "divide",
    "truediv": "divide", "neg": "negative", "pow": "power", "absolute": "abs", "amax": "max",
    "mm": "matmul", "dot": "matmul", "concat": "concatenate", "permute": "transpose",
    "view": "reshape", "logistic": "sigmoid",
}  # fmt: skip


def get_op(name: str) -> Op:
    """The registered op called ``name``.

    >>> get_op("mul")
    Traceback (most recent call last):
        ...
    nbyoc.errors.UnknownOpError: unknown op 'mul'; did you mean 'multiply'? ...
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        other = OTHER_NAMES.get(name) if isinstance(name, str) else None
        close = (
            [other] if other in _REGISTRY else difflib.get_close_matches(str(name), _REGISTRY, n=1)
        )
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UnknownOpError(
            f"unknown op {name!r}; {hint}registered ops: {', '.join(sorted(_REGISTRY))}"
        ) from None


def list_ops() -> list[str]:
    """Names of all registered ops, in registration order.

    >>> "matmul" in list_ops()
    True
    """
    return list(_REGISTRY)


def describe(types) -> str:
    """Operand types as the error messages print them."""
    return ", ".join(map(repr, types))


def infer_call(op: Op, arg_types: tuple[Type, ...], attrs: Mapping) -> tuple[TensorType, dict]:
    """Check arity, operand kinds and attribute names, then run the op's type rule."""
    n = len(arg_types)
    if (op.arity is None and n == 0) or (op.arity is not None and n != op.arity):
        want = "one or more operands" if op.arity is None else f"{op.arity} operand(s)"
        raise NbyocTypeError(f"{op.name} takes {want}, got {n}: ({describe(arg_types)})")
    for i, t in enumerate(arg_types):
        if not isinstance(t, TensorType):
            raise NbyocTypeError(
                f"{op.name}: operand {i} is {t!r}, not a tensor; "
                f"pick a field of the tuple with expr[index]"
            )
        if not op.takes_narrow:
            computable(t.dtype, f"{op.name}: operand {i}")
    unknown = set(attrs) - set(op.attrs)
    if unknown:
        allowed = ", ".join(op.attrs) or "none"
        raise NbyocTypeError(
            f"{op.name}: unknown attribute(s) {', '.join(sorted(unknown))}; allowed: {allowed}"
        )
    full = {}
    for name, spec in op.attrs.items():
        if name in attrs:
            full[name] = spec.normalise(op.name, name, attrs[name])
        elif spec.default is REQUIRED:
            raise NbyocTypeError(f"{op.name}: attribute {name} is required")
        else:
            full[name] = spec.default
    return op.infer(arg_types, full)
