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
    main = module["main"]
    body = _inlined(module, main.body, {p: p for p in main.params})
    attrs = {k: v for k, v in main.attrs.items() if k not in ("Compiler", "global_symbol")}
    return Function(main.params, body, attrs)


def _inlined(module: IRModule, body, mapping: dict):
    """``body`` rebuilt on ``mapping`` (its parameters' values), each call of a module
    function replaced by that function's body on the call's arguments; a field of a
    tuple so made is the field itself."""
    rebuilt = dict(mapping)
    for node in post_order([body], leaves=set(mapping)):
        if node in rebuilt:
            continue
        args = [rebuilt[a] for a in operands(node)]
        if isinstance(node, Call) and isinstance(node.op, GlobalVar):
            callee = module[node.op.name_hint]
            rebuilt[node] = _inlined(module, callee.body, dict(zip(callee.params, args)))
        elif isinstance(node, TupleGetItem) and isinstance(args[0], Tuple):
            rebuilt[node] = args[0].fields[node.index]
        elif all(a is b for a, b in zip(args, operands(node))):
            rebuilt[node] = node
        else:
            rebuilt[node] = with_operands(node, args)
    return rebuilt[body]
