"""``inline_externals``: the inverse of partitioning, a module's ``main`` with every call
to another of its functions replaced by that function's body.

A function with symbolic sizes is partitioned once; a binding whose sizes change what
a backend takes (an op that becomes empty, a loop that grows past a limit) is built
from this flat function instead, partitioned for its own sizes.

>>> import nbyoc
>>> a = nbyoc.var("a", (2,))
>>> mod = nbyoc.partition(nbyoc.function([a], nbyoc.exp(a) + 1.0), "csource")
>>> list(mod.functions), nbyoc.structural_equal(inline_externals(mod).body, nbyoc.exp(a) + 1.0)
(['main', 'csource_0'], True)
"""

from __future__ import annotations

from ..ir.nodes import Call, Function, GlobalVar, IRModule, Tuple, TupleGetItem
from ..ir.traversal import operands, post_order, with_operands


def inline_externals(module: IRModule) -> Function:
    """``module['main']`` with the module's other functions inlined, recursively."""
    return _inline(module, "main")


def _inline(module: IRModule, name: str) -> Function:
    func = module[name]
    rebuilt: dict = {p: p for p in func.params}
    for node in post_order([func.body], leaves=set(func.params)):
        if node in rebuilt:
            continue
        args = [rebuilt[a] for a in operands(node)]
        if isinstance(node, Call) and isinstance(node.op, GlobalVar):
            callee = _inline(module, node.op.name_hint)
            rebuilt[node] = _substitute(callee, args)
        elif isinstance(node, TupleGetItem) and isinstance(args[0], Tuple):
            rebuilt[node] = args[0].fields[node.index]
        elif all(a is b for a, b in zip(args, operands(node))):
            rebuilt[node] = node
        else:
            rebuilt[node] = with_operands(node, args)
    return Function(
        func.params,
        rebuilt[func.body],
        {k: v for k, v in func.attrs.items() if k not in ("Compiler", "global_symbol")},
    )


def _substitute(func: Function, args):
    """``func``'s body with its parameters replaced by ``args``; a tuple result is kept
    as a ``Tuple`` (``TupleGetItem`` of it is folded when rebuilt)."""
    mapping: dict = dict(zip(func.params, args))
    for node in post_order([func.body], leaves=set(func.params)):
        if node in mapping:
            continue
        new = [mapping[a] for a in operands(node)]
        if isinstance(node, TupleGetItem) and isinstance(new[0], Tuple):
            mapping[node] = new[0].fields[node.index]
        elif all(a is b for a, b in zip(new, operands(node))):
            mapping[node] = node
        else:
            mapping[node] = with_operands(node, new)
    return mapping[func.body]
