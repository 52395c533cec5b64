"""The readable text form of the IR (in the spirit of Relay's), read back by ``parse``.

Every intermediate value is bound to a numbered ``%n`` in evaluation order, so
shared values stay shared; the last line is the result. Types follow each
binding as a comment.

>>> import nbyoc
>>> a, b = nbyoc.var("a", (2, 2)), nbyoc.var("b", (2, 2))
>>> print(nbyoc.function([a, b], (a + b) * 2.0))
fn (%a: Tensor[(2, 2), float32], %b: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  %0 = add(%a, %b) /* Tensor[(2, 2), float32] */;
  %1 = const(2.0, dtype=float32) /* Tensor[(), float32] */;
  multiply(%0, %1) /* Tensor[(2, 2), float32] */
}
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import numpy as np

from .nodes import (
    IDENTIFIER,
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    IRModule,
    Node,
    Tuple,
    TupleGetItem,
    Var,
)
from .op import Op
from .symbols import SizeExpr
from .traversal import post_order

#: Constants with more elements than this are printed as base64 rather than a list.
MAX_LITERAL_ELEMENTS = 64


def astext(node: Node, show_types: bool = True, note: Callable[[Expr], str] | None = None) -> str:
    """The text form of a function, module or expression.

    ``note(node)`` may return a remark printed as a ``//`` comment after the
    node's line. In a module, calls to functions with a ``Compiler`` attribute
    are noted with that backend, and such functions get a heading comment.
    """
    if isinstance(node, IRModule):
        return _module_text(node, show_types)
    if isinstance(node, Function):
        return _Printer(show_types, note).function(node, "fn ")
    if isinstance(node, Expr):
        return "\n".join(_Printer(show_types, note).body(node))
    raise TypeError(f"cannot print {node!r}")


def value_names(func: Function) -> dict[Expr, str]:
    """The name each parameter and intermediate value of ``func`` has in its text form
    (``%a``, ``%0``, ``%1``, ...; the result, which the text does not name, is absent).

    >>> import nbyoc
    >>> a = nbyoc.var("a", (2,))
    >>> t = nbyoc.exp(a)
    >>> names = value_names(nbyoc.function([a], t * t))
    >>> names[a], names[t]
    ('%a', '%0')
    """
    printer = _Printer(show_types=False)
    printer.function(func, "fn ")
    return dict(printer.names)


def _module_text(module: IRModule, show_types: bool) -> str:
    backend = {name: f.attrs.get("Compiler") for name, f in module.functions.items()}

    def note(node):
        if isinstance(node, Call) and isinstance(node.op, GlobalVar):
            runs_on = backend.get(node.op.name_hint)
            return f"runs on {runs_on}" if runs_on else ""
        return ""

    parts = []
    for name, func in module.functions.items():
        text = _Printer(show_types, note).function(func, f"def @{name}")
        if backend[name]:
            # (a composite by the name of its kernel: what the backend runs)
            ops = [n.attrs.get("Composite") or n.op.name
                   for n in post_order([func.body]) if isinstance(n, Call)]  # fmt: skip
            text = f"// @{name} runs on {backend[name]}: {', '.join(ops)}\n{text}"
        parts.append(text)
    return "\n\n".join(parts)


def format_attr(value) -> str:
    """An attribute value in text form: ints, floats, bools, None, strings, int lists;
    a symbolic size is written as a string of its text."""
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    if isinstance(value, (str, SizeExpr)):
        return json.dumps(str(value))  # a symbolic size as its text, read back by its kind
    if isinstance(value, float):
        return repr(value)
    return str(value)  # int, bool, None


def format_constant(data: np.ndarray) -> str:
    """``const(...)`` text for an array: a nested list when small, else base64."""
    dtype = data.dtype.name
    if 0 < data.size <= MAX_LITERAL_ELEMENTS:
        return f"const({_literal(data)}, dtype={dtype})"
    encoded = base64.b64encode(
        data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
    ).decode()
    return f'const(base64="{encoded}", shape={format_attr(data.shape)}, dtype={dtype})'


def _literal(array: np.ndarray) -> str:
    if array.ndim == 0:
        # str() of a NumPy scalar is the shortest text that reads back to the same value.
        return str(array[()])
    return "[" + ", ".join(_literal(row) for row in array) + "]"


class _Printer:
    def __init__(self, show_types: bool, note: Callable[[Expr], str] | None = None):
        self.show_types = show_types
        self.note = note
        self.names: dict[Expr, str] = {}
        self.taken: set[str] = set()
        self.counter = 0

    def function(self, func: Function, head: str) -> str:
        params = ", ".join(f"{self._name_var(p)}: {p.type!r}" for p in func.params)
        attrs = ""
        if func.attrs:
            items = ", ".join(f"{k}={format_attr(v)}" for k, v in func.attrs.items())
            attrs = f" attrs({items})"
        lines = [f"{head}({params}) -> {func.ret_type!r}{attrs} {{"]
        lines += ["  " + line for line in self.body(func.body)]
        lines.append("}")
        return "\n".join(lines)

    def body(self, root: Expr) -> list[str]:
        lines = []
        for node in post_order([root]):
            if isinstance(node, Var):
                if node not in self.names:  # a free variable
                    self._name_var(node)
                continue
            if node is root:
                break
            text = self._expr(node)
            self.names[node] = name = f"%{self.counter}"
            self.counter += 1
            lines.append(f"{name} = {text}{self._type_note(node)};{self._note(node)}")
        final = self.names[root] if isinstance(root, Var) else self._expr(root)
        lines.append(final + self._type_note(root) + self._note(root))
        return lines

    def _type_note(self, node: Expr) -> str:
        return f" /* {node.type!r} */" if self.show_types else ""

    def _note(self, node: Expr) -> str:
        remark = self.note(node) if self.note else ""
        return f"  // {remark}" if remark else ""

    def _name_var(self, var: Var) -> str:
        base = var.name_hint if IDENTIFIER.match(var.name_hint) else "v"
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        self.names[var] = f"%{name}"
        return self.names[var]

    def _attr(self, value) -> str:
        if isinstance(value, Function):  # a body: its own names, indented under the call
            nested = _Printer(self.show_types).function(value, "fn ")
            return nested.replace("\n", "\n  ")
        return format_attr(value)

    def _expr(self, node: Expr) -> str:
        if isinstance(node, Call):
            args = [self.names[a] for a in node.args]
            args += [f"{k}={self._attr(v)}" for k, v in node.attrs.items()]
            callee = node.op.name if isinstance(node.op, Op) else f"@{node.op.name_hint}"
            return f"{callee}({', '.join(args)})"
        if isinstance(node, Tuple):
            inner = ", ".join(self.names[f] for f in node.fields)
            return f"({inner},)" if len(node.fields) == 1 else f"({inner})"
        if isinstance(node, TupleGetItem):
            return f"{self.names[node.tuple_value]}.{node.index}"
        if isinstance(node, Constant):
            return format_constant(node.data)
        raise TypeError(f"cannot print {node!r}")
