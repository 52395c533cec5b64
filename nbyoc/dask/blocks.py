"""The functions each block task runs: parts of the traced graph rebuilt at block shapes.

A traced function is typed at the arrays' whole shapes. A block task needs the same
computation typed at the shapes of its blocks, and sometimes only a part of it (the
partial result of a tree reduction) or with some nodes replaced by inputs (a tree
reduction's combined result; a constant cut into blocks). ``BlockGraph.build`` does
both in one walk: it rebuilds the graph from its nodes, each axis at the length its
label has in the blocks (``sizes``), and returns the block ``Function`` with the
*sources* of its parameters (which array each one comes from).

Attributes that hold a shape (reshape's ``newshape``, broadcast_to's ``shape``) are
rewritten to the block's; every other attribute keeps its meaning in a block, which
is what ``nbyoc.dask.axes`` makes sure of before an axis is cut.

>>> import nbyoc
>>> from nbyoc.dask.axes import analyse
>>> x = nbyoc.var("x", (8, 4))
>>> f = nbyoc.function([x], nbyoc.exp(x) + 1.0)
>>> graph = BlockGraph(f, analyse(f))
>>> rows = graph.labels.of(x)[0]
>>> block, sources = graph.build([graph.value(f.body)], {rows: 2})
>>> block.ret_type, sources
(Tensor[(2, 4), float32], [('param', 0)])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir.builder import call_op
from ..ir.nodes import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from ..ir.traversal import operands, post_order
from ..ir.types import TensorType
from .axes import AxisLabels

#: Attributes holding the result's shape, rewritten to the block's.
SHAPE_ATTRS = {"reshape": "newshape", "broadcast_to": "shape", "expand": "shape"}


@dataclass
class Cut:
    """A node computed elsewhere (a tree reduction) and read as an input here: a
    parameter of ``dtype`` whose axes have ``labels``, and ``finish``, which builds
    the node's value from it (e.g. a mean from a sum: divide and squeeze)."""

    labels: list[int]
    dtype: str
    finish: Callable[[Expr], Expr]


class BlockGraph:
    """The traced function and its axis labels, rebuilt at block shapes on demand."""

    def __init__(self, func: Function, labels: AxisLabels):
        self.func = func
        self.labels = labels
        #: nodes read as inputs instead of computed: constants cut into blocks, cuts
        self.lifted: dict[Expr, tuple] = {}
        #: the constants lifted, by number
        self.constants: list[Constant] = []
        self._cuts: list[Cut] = []

    def lift_constant(self, node: Constant) -> None:
        """Make ``node`` a parameter (its data is cut into blocks like an input's)."""
        self.constants.append(node)
        self.lifted[node] = ("const", len(self.constants) - 1)

    def cut(self, node: Expr, cut: Cut) -> int:
        """Read ``node`` from a parameter built by ``cut``; returns the cut's number."""
        self._cuts.append(cut)
        self.lifted[node] = ("cut", len(self._cuts) - 1)
        return len(self._cuts) - 1

    def cut_info(self, number: int) -> Cut:
        return self._cuts[number]

    def value(self, node: Expr) -> Callable:
        """An output of ``build``: the rebuilt ``node``."""
        return lambda rebuilt: rebuilt(node)

    def build(self, outputs: list[Callable], sizes: dict[int, int]) -> tuple[Function, list]:
        """The block function computing ``outputs`` (each given the function that maps an
        original node to its rebuilt value) with axes of label ``c`` at ``sizes[c]`` (a
        label not in ``sizes``: its whole length). Returns the function and the source
        of each parameter: ``("param", i)``, ``("const", node)`` or ``("cut", k)``."""
        labels = self.labels
        memo: dict[Expr, Expr] = {}
        params: dict[tuple, Var] = {}

        def shape(label_list) -> tuple[int, ...]:
            return tuple(sizes.get(c, labels.facts(c).size) for c in label_list)

        def parameter(source, name, label_list, dtype) -> Var:
            if source not in params:
                params[source] = Var(name, TensorType(shape(label_list), dtype))
            return params[source]

        def rebuilt(root: Expr) -> Expr:
            # (a lifted node is read, not computed: the walk stops there)
            for node in post_order([root], leaves=self.lifted):
                if node not in memo:
                    memo[node] = self._rebuild(node, memo, labels, shape, parameter)
            return memo[root]

        bodies = [output(rebuilt) for output in outputs]
        order = {p: i for i, p in enumerate(self.func.params)}
        sources = sorted(params, key=lambda s: _source_rank(s, order))
        body = bodies[0] if len(bodies) == 1 else Tuple(bodies)
        return Function([params[s] for s in sources], body), [_plain(s, order) for s in sources]

    def _rebuild(self, node, memo, labels, shape, parameter) -> Expr:
        lifted = self.lifted.get(node)
        if lifted is not None:
            if lifted[0] == "const":
                return parameter(lifted, f"const{lifted[1]}", labels.of(node), node.type.dtype)
            cut = self._cuts[lifted[1]]
            return cut.finish(parameter(lifted, f"cut{lifted[1]}", cut.labels, cut.dtype))
        if isinstance(node, Var):
            return parameter(("param", node), node.name_hint, labels.of(node), node.type.dtype)
        if isinstance(node, Constant):
            return node
        args = [memo[a] for a in operands(node)]
        if isinstance(node, Call):
            attrs = dict(node.attrs)
            if node.op.name in SHAPE_ATTRS:
                attrs[SHAPE_ATTRS[node.op.name]] = shape(labels.of(node))
            return Call(node.op, args, attrs)
        if isinstance(node, Tuple):
            return Tuple(args)
        if isinstance(node, TupleGetItem):
            return TupleGetItem(args[0], node.index)
        raise NotImplementedError(f"{node!r} cannot be rebuilt at block shapes")


def _source_rank(source: tuple, order: dict) -> tuple:
    kind, what = source
    return (0, order[what]) if kind == "param" else (1 if kind == "const" else 2, what)


def _plain(source: tuple, order: dict) -> tuple:
    kind, what = source
    return ("param", order[what]) if kind == "param" else source


def partial_reduction(call: Call, rebuilt_input: Expr) -> Expr:
    """A reduction's partial result on one block: the same reduction (a mean's: the sum)
    over the same axes, keeping them as length 1."""
    op = "sum" if call.op.name == "mean" else call.op.name
    return call_op(op, rebuilt_input, axis=call.attrs["axis"], keepdims=True)
