"""``legalize``: replace calls of composite ops (softmax, layer_norm, gelu...) that no
target backend takes by their decompositions into ops a backend does take.

An op with a ``decompose`` function is defined twice: by its NumPy reference (what
the host runs) and by the ops it is made of. Before annotation, each call of such an
op that none of the target backends claims is replaced by its decomposition, when
some backend claims part of what it decomposes into; otherwise it stays whole and
runs on the host with its reference, which is one NumPy call instead of several.
Decompositions may use other composite ops: they are legalised in turn.

>>> import nbyoc
>>> x = nbyoc.var("x", (2, 5))
>>> f = nbyoc.function([x], nbyoc.softmax(x, axis=1))
>>> sorted({n.op.name for n in nbyoc.ir.post_order([legalize(f, ["llvm"]).body])
...         if isinstance(n, nbyoc.ir.Call)})
['divide', 'exp', 'max', 'subtract', 'sum']
>>> legalize(f, ["host"]) is f
True
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import NbyocError, UndecidableSizeError
from ..ir.nodes import Call, Expr, Function, Tuple, TupleGetItem
from ..ir.op import Op
from ..ir.traversal import post_order
from .support import OperatorSupport

#: How deeply decompositions may nest (softmax -> ... -> primitives is 1 or 2 levels);
#: deeper means a decomposition that (indirectly) uses its own op.
MAX_DEPTH = 16


def legalize(func: Function, backends: Sequence[str] | OperatorSupport) -> Function:
    """``func`` with every composite call no backend in ``backends`` (names, or an
    ``OperatorSupport``) takes replaced by its decomposition (when a backend takes some
    of the result); ``func`` itself when nothing changes."""
    support = backends if isinstance(backends, OperatorSupport) else OperatorSupport(backends)
    if not support.backends:
        return func
    nodes = post_order([func.body])
    if not any(_is_composite(n) for n in nodes):
        return func
    rewriter = _Rewriter(support)
    body = rewriter.rewrite(func.body, nodes)
    return func if body is func.body else Function(func.params, body, func.attrs)


def _is_composite(node: Expr) -> bool:
    return isinstance(node, Call) and isinstance(node.op, Op) and node.op.decompose is not None


class _Rewriter:
    def __init__(self, support: OperatorSupport):
        self.support = support

    def claimed(self, call: Call) -> bool:
        return self.support.takes(call)

    def rewrite(self, root: Expr, nodes: list[Expr], depth: int = 0) -> Expr:
        new: dict[Expr, Expr] = {}
        for node in nodes:
            new[node] = self.rebuild(node, new, depth)
        return new[root]

    def rebuild(self, node: Expr, new: dict, depth: int) -> Expr:
        if isinstance(node, Call):
            args = [new.get(a, a) for a in node.args]
            changed = any(a is not b for a, b in zip(args, node.args))
            call = Call(node.op, args, node.attrs) if changed else node
            if _is_composite(call) and not self.claimed(call):
                return self.expand(call, depth)
            return call
        if isinstance(node, Tuple):
            fields = [new.get(f, f) for f in node.fields]
            return node if all(a is b for a, b in zip(fields, node.fields)) else Tuple(fields)
        if isinstance(node, TupleGetItem):
            value = new.get(node.tuple_value, node.tuple_value)
            return node if value is node.tuple_value else TupleGetItem(value, node.index)
        return node

    def expand(self, call: Call, depth: int) -> Expr:
        op = call.op
        if depth >= MAX_DEPTH:
            raise NbyocError(
                f"the decomposition of {op.name} nests more than {MAX_DEPTH} levels deep; "
                f"does it use {op.name} itself?"
            )
        try:
            expanded = op.decompose(*call.args, **call.attrs)
        except UndecidableSizeError:
            # (a decomposition choosing by a size the symbols leave open: the op stays
            # whole, and runs on the host)
            return call
        if not isinstance(expanded, Expr) or expanded.type != call.type:
            got = expanded.type if isinstance(expanded, Expr) else expanded
            raise NbyocError(
                f"the decomposition of {op.name} gives {got!r}, but its type rule says "
                f"{call.type!r}: the op's definition is inconsistent"
            )
        operands = set(call.args)
        if expanded in operands:  # e.g. a decomposition that is the identity
            return expanded
        inner = [n for n in post_order([expanded]) if n not in operands]
        expanded = self.rewrite(expanded, inner, depth + 1)
        parts = post_order([expanded])
        kept = any(isinstance(n, Call) and n not in operands and self.claimed(n) for n in parts)
        return expanded if kept else call
