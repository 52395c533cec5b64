"""What a converter sees of one ONNX node: its inputs as nbyoc values, its attributes
as Python values, the opset, and helpers that say clearly what is wrong.

A value is either an nbyoc ``Expr`` (computed when the function runs) or a NumPy
array known while importing (an initializer, a constant, folded shape arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ... import limits
from ...errors import ModelImportError, NeedsConstantError, shown
from ...ir.builder import const
from ...ir.nodes import Expr, Var
from ...ir.traversal import post_order

Value = Expr | np.ndarray


@dataclass
class Node:
    """One ONNX node, ready for its converter."""

    op_type: str
    name: str
    inputs: list[Value | None]  # None: an optional input left out ("")
    input_names: list[str]
    attrs: dict = field(default_factory=dict)
    opset: int = 0
    n_outputs: int = 1
    domain: str = ""  # ("" for ai.onnx; "com.microsoft" for ONNX Runtime's contrib ops)

    @property
    def where(self) -> str:
        return where_of(self.op_type, self.name)

    def fail(self, message: str) -> ModelImportError:
        return ModelImportError(f"{self.where}: {message}")

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def has(self, index: int) -> bool:
        return index < len(self.inputs) and self.inputs[index] is not None

    def expr(self, index: int) -> Expr:
        """Input ``index`` as an nbyoc expression (a known array becomes a constant)."""
        if not self.has(index):
            raise self.fail(f"input {index} is required")
        return as_expr(self.inputs[index])

    def known(self, index: int, what: str) -> np.ndarray:
        """Input ``index``'s value, which must be known while importing (``what`` says
        what the op uses it for)."""
        if not self.has(index):
            raise self.fail(f"input {index} ({what}) is required")
        value = self.inputs[index]
        if isinstance(value, np.ndarray):
            return value
        sources = tuple(
            dict.fromkeys(n.name_hint for n in post_order([value]) if isinstance(n, Var))
        )
        shown = ", ".join(repr(s) for s in sources) or "a computation"
        raise NeedsConstantError(
            f"{self.where}: input {index} ({what}, {self.input_names[index]!r}) must be known "
            f"when importing, since nbyoc shapes are static; it depends on graph input(s) "
            f"{shown}: fix them with from_onnx(..., constants={{name: array}})",
            sources,
        )

    def ints(self, index: int, what: str) -> tuple[int, ...]:
        values = self.known(index, what)
        if values.dtype == object:  # (a size array: ``size_values``)
            from .size_values import needs_values

            raise needs_values(self.where, values, f"input {index} ({what}) must be known")
        if not np.issubdtype(values.dtype, np.integer):
            raise self.fail(f"input {index} ({what}) must hold integers, got {values.dtype}")
        return tuple(int(v) for v in values.reshape(-1))

    def sizes(self, index: int, what: str) -> tuple:
        """Input ``index`` as sizes: ints, and symbolic sizes where the model computed
        them from a dynamic dimension (a reshape's target, slice bounds)."""
        values = self.known(index, what)
        if values.dtype != object:
            return self.ints(index, what)
        from .size_values import known_ints

        return known_ints(values)

    def axis(self, axis: int, ndim: int, what: str = "axis") -> int:
        """``axis`` (negative counts from the end) as an index into ``ndim`` axes."""
        if not -ndim <= axis < ndim:
            raise self.fail(f"{what} {axis} is out of range for a {ndim}-D input")
        return axis % ndim

    def computing(self, shape, dtype) -> None:
        """Refuse (``LimitError``) to compute, while importing, a value of ``shape`` and
        ``dtype`` larger than the limit ``folded_bytes``: called before allocating it."""
        if any(d < 0 for d in shape):
            raise self.fail(f"cannot make a value of shape {tuple(shape)} (negative size)")
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        limits.check("folded_bytes", nbytes, "a value computed while importing")

    def refuse(self, attribute: str, allowed) -> None:
        """Refuse ``attribute`` unless its value is ``allowed`` (a feature nbyoc does
        not offer, named in the error)."""
        value = self.attrs.get(attribute, allowed)
        if value != allowed:
            raise self.fail(f"{attribute}={value!r} is not supported (only {allowed!r})")


def where_of(op_type: str, name: str) -> str:
    """How errors name a node: ``Conv node 'conv1'``, or ``Conv node`` without a name."""
    return f"{op_type} node {shown(name)}" if name else f"{op_type} node"


def as_expr(value: Value) -> Expr:
    """An nbyoc expression for ``value``: a known array becomes a constant."""
    return const(value) if isinstance(value, np.ndarray) else value
