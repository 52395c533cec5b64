"""Walking the dataflow graph: operands of a node, and a deterministic post-order.

The walk is iterative, so graphs of any depth (a chain of 100 000 adds) work
without touching Python's recursion limit.

>>> from nbyoc.ir.nodes import Var
>>> from nbyoc.ir.types import TensorType
>>> a = Var("a", TensorType((2,)))
>>> y = (a + 1) * a
>>> [type(n).__name__ for n in post_order([y])]
['Var', 'Constant', 'Call', 'Call']
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from ..errors import WellFormednessError
from .nodes import Call, Constant, Expr, GlobalVar, Tuple, TupleGetItem, Var


def operands(node: Expr) -> tuple[Expr, ...]:
    """The expressions ``node`` reads directly, in order."""
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Tuple):
        return node.fields
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    return ()


def with_operands(node: Expr, args: list[Expr]) -> Expr:
    """``node`` rebuilt on new operands (a leaf is itself).

    >>> from nbyoc.ir.nodes import Var
    >>> from nbyoc.ir.types import TensorType
    >>> a, b = Var("a", TensorType((2,))), Var("b", TensorType((2,)))
    >>> with_operands(a + a, [a, b]).args == (a, b)
    True
    """
    if isinstance(node, (Var, Constant)):
        return node
    if isinstance(node, Call):
        return Call(node.op, args, node.attrs)
    if isinstance(node, Tuple):
        return Tuple(args)
    if isinstance(node, TupleGetItem):
        return TupleGetItem(args[0], node.index)
    raise WellFormednessError(f"cannot rebuild {node!r} on new operands")


def post_order(roots: Iterable[Expr], leaves: Container[Expr] = ()) -> list[Expr]:
    """Every node reachable from ``roots``, each once, operands before users; the walk
    does not go below a node in ``leaves`` (it is listed, its operands are not).

    The order is the one a left-to-right depth-first walk meets them in, so the
    same graph always gives the same order.
    """
    order: list[Expr] = []
    done: set[Expr] = set()  # nodes hash by identity

    def below(node: Expr):
        return iter(() if node in leaves else operands(node))

    for root in roots:
        if root in done:
            continue
        done.add(root)
        stack = [(root, below(root))]
        while stack:
            node, pending = stack[-1]
            for child in pending:
                if child not in done:
                    done.add(child)
                    stack.append((child, below(child)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def last_reads(schedule: list[Expr]) -> dict[Expr, int]:
    """For each node read in ``schedule`` (nodes in evaluation order), the position
    of its last reader: after that step its buffer can be freed or reused.

    >>> from nbyoc.ir.nodes import Var
    >>> from nbyoc.ir.types import TensorType
    >>> a = Var("a", TensorType((2,)))
    >>> t = a + a
    >>> last_reads([t, t * a]) == {a: 1, t: 1}
    True
    """
    last: dict[Expr, int] = {}
    for position, node in enumerate(schedule):
        for operand in operands(node):
            last[operand] = position
    return last


def callees_first(module) -> list[str]:
    """The names of ``module``'s functions ordered so that each comes after every
    function it calls (``GlobalVar`` calls).

    >>> from nbyoc.ir.nodes import Function, IRModule, Var
    >>> from nbyoc.ir.types import TensorType
    >>> x = Var("x", TensorType((2,)))
    >>> callees_first(IRModule({"main": Function([x], -x)}))
    ['main']
    """
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order or name in visiting:
            return
        visiting.add(name)
        for node in post_order([module[name].body]):
            if isinstance(node, Call) and isinstance(node.op, GlobalVar):
                visit(node.op.name_hint)
        order.append(name)

    for name in module.functions:
        visit(name)
    return order
