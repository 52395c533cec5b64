"""Structural equality and hashing of graphs.

Two graphs are structurally equal when they compute the same thing the same
way: same ops, attributes, types, constants (bit for bit) and wiring,
including which values are shared. Names of variables do not matter
(alpha-equivalence): parameters are matched by position.

>>> import nbyoc
>>> def build(name):
...     a, b = nbyoc.var(name, (4,)), nbyoc.var("b", (4,))
...     return nbyoc.function([a, b], (a + b) * 2.0)
>>> structural_equal(build("a"), build("x"))
True
>>> structural_hash(build("a")) == structural_hash(build("x"))
True
>>> a, b = nbyoc.var("a", (4,)), nbyoc.var("b", (4,))
>>> structural_equal(build("a"), nbyoc.function([a, b], (b + a) * 2.0))
False
"""

from __future__ import annotations

import hashlib

from .nodes import (
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
from .traversal import post_order


def structural_equal(lhs: Node, rhs: Node) -> bool:
    """True if ``lhs`` and ``rhs`` (functions, modules or expressions) have the same structure."""
    return type(lhs) is type(rhs) and _encode(lhs) == _encode(rhs)


def structural_hash(node: Node) -> int:
    """A 64-bit hash that is equal for structurally equal graphs.

    Stable across processes and machines, so it can key on-disk caches.
    """
    return int(structural_digest(node)[:16], 16)


def structural_digest(node) -> str:
    """A 128-bit hex digest of the structure: wide enough to key caches without
    ever mistaking one graph for another."""
    return hashlib.blake2b(repr(_encode(node)).encode(), digest_size=16).hexdigest()


def _encode(node):
    if isinstance(node, IRModule):
        return ("module", tuple((name, _encode(f)) for name, f in node.functions.items()))
    if isinstance(node, Function):
        params = {p: ("param", i) for i, p in enumerate(node.params)}
        body = _encode_graph(node.body, params)
        attrs = tuple(sorted((k, type(v).__name__, v) for k, v in node.attrs.items()))
        return ("function", tuple(p.type for p in node.params), body, attrs)
    if isinstance(node, Expr):
        return ("expr", _encode_graph(node, {}))
    raise TypeError(f"cannot compare {node!r} structurally")


def _encode_graph(root: Expr, refs: dict) -> tuple:
    """Rows in evaluation order; operands are referred to by row or parameter index."""
    refs = dict(refs)
    rows = []
    for node in post_order([root]):
        if isinstance(node, Var):
            if node not in refs:  # free variables are told apart by order of first use
                refs[node] = ("free", sum(1 for r in refs.values() if r[0] == "free"), node.type)
            continue
        rows.append(_row(node, refs))
        refs[node] = ("row", len(rows) - 1)
    return tuple(rows), refs[root]


def _row(node: Expr, refs: dict) -> tuple:
    if isinstance(node, Call):
        callee = ("global", node.op.name_hint) if isinstance(node.op, GlobalVar) else node.op.name
        # (a body compares by its structure, not its identity)
        attrs = tuple(sorted((k, _encode(v) if isinstance(v, Function) else v)
                             for k, v in node.attrs.items()))  # fmt: skip
        return ("call", callee, tuple(refs[a] for a in node.args), attrs, node.type)
    if isinstance(node, Constant):
        digest = hashlib.blake2b(node.data.tobytes(), digest_size=32).hexdigest()
        return ("const", node.type, digest)
    if isinstance(node, Tuple):
        return ("tuple", tuple(refs[f] for f in node.fields))
    if isinstance(node, TupleGetItem):
        return ("get", refs[node.tuple_value], node.index)
    raise TypeError(f"unknown node {node!r}")
