"""Which axes of a graph may be cut into blocks: one label per axis, joined across ops.

Every axis of every tensor in a traced function gets a *label*. An op joins the labels
of axes it maps one to one (an elementwise op: the same axis of its operands and its
result; a matmul: the ``k`` of both operands; a transpose: permuted axes). Axes with
one label can be cut at the same places, and each block of the result depends on the
blocks of its operands with the same positions along them: that is what makes a
blockwise computation right. Each label class also records what stops it from being
cut freely:

- a *reduction* over it (sum, mean, max, min, prod, the ``k`` of a matmul): cut, each
  block gives a partial result that a tree of combines finishes (``tree_ops``);
- a *pin*: an op that needs the whole axis in one block (argmax, softmax, a slice,
  a reshape merging it with others, any op without a rule), with the reason.

Adding an op is a row in ``RULES``; an op without one pins every axis it touches.

>>> import nbyoc
>>> x = nbyoc.var("x", (8, 4))
>>> y = x - x.max(axis=1, keepdims=True)
>>> labels = analyse(nbyoc.function([x], y))
>>> labels.same(labels.of(x)[0], labels.of(y)[0]), labels.facts(labels.of(x)[1]).tree_ops
(True, ['max'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.nodes import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from ..ir.op import Op
from ..ir.traversal import post_order
from ..ir.types import TensorType

#: Reductions that a tree of partial results computes: op -> the op combining partials.
TREE_COMBINE = {"sum": "sum", "mean": "sum", "max": "max", "min": "min", "prod": "prod"}


@dataclass
class LabelFacts:
    """What one class of joined axes allows (see the module docstring)."""

    size: int
    #: why the axis must be whole, e.g. "argmax over axis 0 of Tensor[(8, 4), float32]"
    pins: list[str] = field(default_factory=list)
    #: the reducing ops (by name) whose partial results a tree can combine
    tree_ops: list[str] = field(default_factory=list)


class AxisLabels:
    """Labels of every axis of every node of a function, joined by a union-find."""

    def __init__(self):
        self._parent: list[int] = []
        self._facts: list[LabelFacts] = []
        self._nodes: dict[Expr, list[int]] = {}

    # -- building ------------------------------------------------------------------
    def fresh(self, size: int) -> int:
        self._parent.append(len(self._parent))
        self._facts.append(LabelFacts(size))
        return len(self._parent) - 1

    def join(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a == b:
            return
        fa, fb = self._facts[a], self._facts[b]
        if fa.size != fb.size:  # only axes of one length are ever joined
            raise AssertionError(f"joining axes of lengths {fa.size} and {fb.size}")
        self._parent[b] = a
        fa.pins += fb.pins
        fa.tree_ops += fb.tree_ops

    def pin(self, label: int, why: str) -> None:
        facts = self.facts(label)
        if facts.size > 1:
            facts.pins.append(why)

    def reduce(self, label: int, op: str) -> None:
        facts = self.facts(label)
        if facts.size > 1:
            facts.tree_ops.append(op)

    # -- reading -------------------------------------------------------------------
    def find(self, label: int) -> int:
        parent = self._parent
        while parent[label] != label:
            parent[label] = parent[parent[label]]
            label = parent[label]
        return label

    def same(self, a: int, b: int) -> bool:
        return self.find(a) == self.find(b)

    def facts(self, label: int) -> LabelFacts:
        return self._facts[self.find(label)]

    def of(self, node: Expr) -> list[int]:
        """The class of each axis of ``node`` (a tensor-typed node of the function)."""
        return [self.find(label) for label in self._nodes[node]]

    def set(self, node: Expr, labels: list[int]) -> None:
        self._nodes[node] = labels


def analyse(func: Function) -> AxisLabels:
    """The axis labels of every node of ``func`` (see the module docstring)."""
    labels = AxisLabels()
    for node in post_order([func.body, *func.params]):
        if isinstance(node, (Var, Constant)):
            labels.set(node, [labels.fresh(n) for n in node.type.shape])
        elif isinstance(node, Call):
            labels.set(node, _call_labels(labels, node))
        elif isinstance(node, TupleGetItem):
            source = node.tuple_value
            if isinstance(source, Tuple):
                labels.set(node, labels.of(source.fields[node.index]))
            else:  # a field of a multi-output op's result: no rule relates it
                labels.set(node, [labels.fresh(n) for n in node.type.shape])
    for node, own in labels._nodes.items():
        # Two axes of one tensor joined (x + x.T): the blocks a result block needs are
        # no longer at its own positions, so the axis is not cut.
        classes = [labels.find(label) for label in own]
        for i, c in enumerate(classes):
            if c in classes[:i]:
                labels.pin(c, f"axes {classes.index(c)} and {i} of {node.type!r} are joined")
    return labels


def _call_labels(labels: AxisLabels, call: Call) -> list[int]:
    if not isinstance(call.op, Op) or not isinstance(call.type, TensorType):
        raise NotImplementedError(f"{call!r} cannot run blockwise")
    out = [labels.fresh(n) for n in call.type.shape]
    args = [labels.of(a) for a in call.args]
    rule = RULES.get(call.op.name)
    if rule is None:
        rule = _broadcasting if call.op.kind == "elementwise" else _pin_everything
    rule(labels, call, args, out)
    return out


def _where(call: Call, axis: int, operand: int | None = None) -> str:
    """How errors name an axis: "<op> on axis <i> of Tensor[...]"."""
    t = call.type if operand is None else call.args[operand].type
    return f"{call.op.name} on axis {axis} of {t!r}"


# -- the rules: (labels, call, operand labels, result labels) -> joins, pins, reductions --
def _broadcasting(labels, call, args, out):
    """NumPy broadcasting: axes aligned from the right, joined where the lengths agree
    (a length-1 axis broadcast against a longer one stays apart)."""
    shape = call.type.shape
    for arg, operand in zip(args, call.args):
        offset = len(shape) - len(arg)
        for i, label in enumerate(arg):
            if operand.type.shape[i] == shape[offset + i]:
                labels.join(label, out[offset + i])


def _pin_everything(labels, call, args, out):
    for k, arg in enumerate(args):
        for i, label in enumerate(arg):
            labels.pin(label, f"{call.op.name} (no blockwise rule) on axis {i} of operand {k}")
    for i, label in enumerate(out):
        labels.pin(label, f"{call.op.name} (no blockwise rule) on axis {i} of its result")


def _reduction(labels, call, args, out):
    (arg,) = args
    axes = call.attrs["axis"]
    axes = tuple(range(len(arg))) if axes is None else (axes,) if isinstance(axes, int) else axes
    keep = call.attrs.get("keepdims", False)
    position = 0
    for i, label in enumerate(arg):
        if i in axes:
            if call.op.name in TREE_COMBINE:
                labels.reduce(label, call.op.name)
            else:
                labels.pin(label, _where(call, i, 0))
            position += keep
        else:
            labels.join(label, out[position])
            position += 1


def _whole_from(param: str):
    """Ops that need every axis from ``attrs[param]`` to the last whole (softmax,
    layer_norm): the leading ones are batch axes; later operands broadcast on the rest."""

    def rule(labels, call, args, out):
        start = call.attrs[param]
        for i, label in enumerate(args[0]):
            if i >= start:
                labels.pin(label, _where(call, i, 0))
        _broadcasting(labels, call, args, out)

    return rule


def _matmul(labels, call, args, out):
    """NumPy's matmul: the ``k`` of both operands joined (and reduced); ``m``, ``n`` and
    the broadcast batch axes joined with the result's."""
    la, lb = args
    k = lb[0] if len(lb) == 1 else lb[-2]
    labels.join(la[-1], k)
    labels.reduce(k, "matmul")
    position = len(out)
    if len(lb) > 1:
        position -= 1
        labels.join(lb[-1], out[position])
    if len(la) > 1:
        position -= 1
        labels.join(la[-2], out[position])
    batch, batch_shape = out[:position], call.type.shape[:position]
    for operand, node in ((la, call.args[0]), (lb, call.args[1])):
        dims, shape = operand[:-2], node.type.shape[:-2]
        offset = len(batch) - len(dims)
        for i, label in enumerate(dims):
            if shape[i] == batch_shape[offset + i]:
                labels.join(label, batch[offset + i])


def _gemm(labels, call, args, out):
    la, lb, lc = args
    ta, tb = call.attrs["trans_a"], call.attrs["trans_b"]
    m, ka = (la[1], la[0]) if ta else (la[0], la[1])
    kb, n = (lb[1], lb[0]) if tb else (lb[0], lb[1])
    labels.join(ka, kb)
    labels.pin(ka, _where(call, 0 if ta else 1, 0) + " (gemm's contraction)")
    labels.join(m, out[0])
    labels.join(n, out[1])
    _broadcasting(labels, call, [[], [], lc], out)  # only c broadcasts against the result


def _transpose(labels, call, args, out):
    for j, i in enumerate(call.attrs["axes"]):
        labels.join(args[0][i], out[j])


def _regroup(labels, call, args, out):
    """reshape, squeeze, unsqueeze, flatten: an axis kept as it is (a run of axes whose
    product is its own length on both sides) is joined; axes merged or split are pinned.
    Length-1 axes come and go freely."""
    src, dst = call.args[0].type.shape, call.type.shape
    if 0 in src:
        return _pin_everything(labels, call, args, out)
    s = [i for i, n in enumerate(src) if n != 1]
    d = [j for j, n in enumerate(dst) if n != 1]
    a = b = 0
    while a < len(s) and b < len(d):
        group_s, group_d = [s[a]], [d[b]]
        ps, pd = src[s[a]], dst[d[b]]
        a, b = a + 1, b + 1
        while ps != pd:  # the totals agree, so this ends before either list does
            if ps < pd:
                group_s.append(s[a])
                ps *= src[s[a]]
                a += 1
            else:
                group_d.append(d[b])
                pd *= dst[d[b]]
                b += 1
        if len(group_s) == 1 and len(group_d) == 1:
            labels.join(args[0][group_s[0]], out[group_d[0]])
            continue
        for i in group_s:
            labels.pin(args[0][i], _where(call, i, 0) + " (merged or split)")
        for j in group_d:
            labels.pin(out[j], _where(call, j) + " (merged or split)")


def _concatenate(labels, call, args, out):
    axis = call.attrs["axis"]
    for k, arg in enumerate(args):
        for i, label in enumerate(arg):
            if i == axis:
                labels.pin(label, _where(call, i, k))
            else:
                labels.join(label, out[i])
    labels.pin(out[axis], _where(call, axis))


def _slice(labels, call, args, out):
    shape = call.args[0].type.shape
    attrs = [call.attrs[k] for k in ("axes", "starts", "ends", "steps")]
    whole = {a for a, s, e, step in zip(*attrs) if (s, step) == (0, 1) and e >= shape[a]}
    for i, label in enumerate(args[0]):
        if i in whole:
            labels.join(label, out[i])
        else:
            labels.pin(label, _where(call, i, 0))
            labels.pin(out[i], _where(call, i))


def _gather(labels, call, args, out):
    data, indices = args
    axis = call.attrs["axis"]
    for i, label in enumerate(data):
        if i < axis:
            labels.join(label, out[i])
        elif i == axis:
            labels.pin(label, _where(call, i, 0))
        else:
            labels.join(label, out[i + len(indices) - 1])
    for i, label in enumerate(indices):
        labels.join(label, out[axis + i])


def _per_axis(param: str, untouched):
    """Ops that change some axes and leave the others (``untouched(attrs, axis, ndim)``)."""

    def rule(labels, call, args, out):
        for i, label in enumerate(args[0]):
            if untouched(call.attrs[param], i, len(args[0])):
                labels.join(label, out[i])
            else:
                labels.pin(label, _where(call, i, 0))
                labels.pin(out[i], _where(call, i))

    return rule


def _batch_norm(labels, call, args, out):
    x, *channel = args
    for i, label in enumerate(x):
        labels.join(label, out[i])
    for param in channel:
        labels.join(param[0], out[1])


def _channels_first(labels, call, args, out):
    """Pools and convolutions on (N, C, spatial...): the batch axis is free, the rest
    is the op's own business (whole)."""
    labels.join(args[0][0], out[0])
    for k, arg in enumerate(args):
        for i, label in enumerate(arg):
            if k or i:
                labels.pin(label, _where(call, i, k))
    for i, label in enumerate(out[1:], 1):
        labels.pin(label, _where(call, i))


def _global_pool(labels, call, args, out):
    labels.join(args[0][0], out[0])
    labels.join(args[0][1], out[1])
    for i, label in enumerate(args[0][2:], 2):
        labels.pin(label, _where(call, i, 0))


#: op name -> its rule; ops of kind "elementwise" not listed broadcast as NumPy does,
#: any other op not listed pins every axis.
RULES = {
    **{name: _reduction for name in ("sum", "mean", "max", "min", "prod", "argmax", "argmin")},
    "softmax": _whole_from("axis"),
    "log_softmax": _whole_from("axis"),
    "layer_norm": _whole_from("axis"),
    "matmul": _matmul,
    "gemm": _gemm,
    "transpose": _transpose,
    **{name: _regroup for name in ("reshape", "squeeze", "unsqueeze", "flatten")},
    "concatenate": _concatenate,
    "slice": _slice,
    "gather": _gather,
    "tile": _per_axis("repeats", lambda repeats, i, n: repeats[i] == 1),
    "pad": _per_axis("pads", lambda pads, i, n: pads[i] == 0 and pads[i + n] == 0),
    "batch_norm": _batch_norm,
    **{name: _channels_first for name in ("conv", "conv_transpose", "max_pool", "avg_pool")},
    **{name: _global_pool for name in ("global_avg_pool", "global_max_pool")},
}
