"""``legalize_conv_transpose``: a transposed convolution that no target backend takes
becomes ordinary convolutions, one per output phase (the sub-pixel decomposition),
interleaved by a depth-to-space: every output is computed where it stays (no scatter),
so every backend that lowers ``conv`` runs it.

``conv_phases`` says which weight taps land on each output phase. The phases of one
sub-kernel shape are one conv (their sub-kernels side by side as output channels, its
output rows those all of them read); each phase is a window of its conv's output,
an empty phase (no tap lands on it) is the bias alone. The phases are then put side
by side on a phase axis, moved next to the spatial axes they interleave with (one
transpose), merged into them (a reshape) and cropped to the output. PP-OCR's DB head
upsamples with 2x2 kernels at stride 2: each of its four phases is a 1x1 conv, so the
whole op is one matrix product with four times the output channels and a transpose.

The sub-kernels are graph ops on the weight (reshape, transpose, slice, concatenate):
``fold_constant_layout``, which runs after this pass, computes them once at compile time
when the weight is a constant, and a weight computed in the graph is laid out at run
time by the same ops.

The host keeps ``conv_transpose`` whole: the op's NumPy reference (a direct sum over the
taps, each added to the output positions it lands on) is what the host runs and what
this rewrite is checked against, so it must stay an independent implementation; and on
the host the phase convs would be NumPy convs too, gaining nothing. The rewrite is made
only where some target backend takes every phase conv: with none (csource lowers no
conv), the phase convs would run on the host anyway, cut apart by copies.

A call is left whole, with the reason ``nbyoc.explain`` shows, when its spatial sizes
are symbolic (the phases depend on them), when it has more than ``MAX_PHASES`` phases,
or when no weight tap lands on its output.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (1, 24, 80, 80))
>>> w = nbyoc.const(np.ones((24, 24, 2, 2), np.float32))
>>> f = nbyoc.function([x], nbyoc.conv_transpose(x, w, strides=(2, 2)))
>>> [n.op.name for n in nbyoc.ir.post_order([legalize_conv_transpose(f, ["llvm"]).body])
...  if isinstance(n, nbyoc.ir.Call) and n.op.name in ("conv", "conv_transpose")]
['conv']
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import UndecidableSizeError
from ..ir.builder import call_op
from ..ir.dtypes import dtype_info
from ..ir.nodes import Call, Constant, Expr, Function
from ..ir.traversal import operands, post_order, with_operands
from .conv_phases import PhasePlan, plan_phases
from .regions import is_op_call
from .support import OperatorSupport, refusal, register_rewrite

#: The most phases (the product of the strides) a call is rewritten with. Each phase is
#: a piece of the interleaving concatenate, and a stride far beyond the kernel makes
#: phases that are nearly all empty (the fuzzer's stride of 2**40 would be 2**40 of
#: them); 3-D at stride 4 is 64.
MAX_PHASES = 64
# Calls whose phases are mostly empty (a kernel smaller than its stride) are rewritten
# too. Measured on llvm against the host (2 loaded cores, medians): 32 channels at 64x64
# with kernel 1 at stride 2, kernel 2 at strides 3 and 4 ran 17x, 29-42x and 11-28x
# faster; only small ones ran slower (8 channels, kernel 1, stride 3: 0.50 ms against
# 0.14 ms), where leaving the call to the host would also cut the region around it.


def legalize_conv_transpose(func: Function, backends: Sequence[str] | OperatorSupport) -> Function:
    """``func`` with every ``conv_transpose`` that no backend in ``backends`` (names, or
    an ``OperatorSupport``) takes, and whose phase convs one does, replaced by those
    convs interleaved; ``func`` itself when nothing changes."""
    support = backends if isinstance(backends, OperatorSupport) else OperatorSupport(backends)
    nodes = post_order([func.body])
    if not support.backends or not any(_is_conv_transpose(n) for n in nodes):
        return func
    new: dict[Expr, Expr] = {}
    for node in nodes:
        args = [new.get(a, a) for a in operands(node)]
        changed = any(a is not b for a, b in zip(args, operands(node)))
        rebuilt = with_operands(node, args) if changed else node
        if _is_conv_transpose(rebuilt) and not support.takes(rebuilt):
            phased = phase_convs(rebuilt)
            if not isinstance(phased, str) and all(support.takes(c) for c in phased.convs):
                rebuilt = phased.value
        if rebuilt is not node:
            new[node] = rebuilt
    if func.body not in new:
        return func
    return Function(func.params, new[func.body], func.attrs)


def _is_conv_transpose(node: Expr) -> bool:
    return is_op_call(node) and node.op.name == "conv_transpose"


@dataclass(frozen=True)
class Phased:
    """A ``conv_transpose`` rewritten: its ``value`` and the phase ``convs`` in it."""

    value: Expr
    convs: tuple[Call, ...]


def phase_convs(call: Call) -> Phased | str:
    """``call`` (a ``conv_transpose``) as phase convs interleaved, or why it is not
    rewritten (a reason for ``nbyoc.explain``).

    >>> import nbyoc
    >>> x, w = nbyoc.var("x", (1, 4, 5, 5)), nbyoc.var("w", (4, 2, 3, 3))
    >>> phased = phase_convs(nbyoc.conv_transpose(x, w, strides=(2, 2)))
    >>> [c.args[1].type.shape for c in phased.convs]  # taps 0 and 2, or 1, per axis
    [(2, 4, 2, 2), (2, 4, 2, 1), (2, 4, 1, 2), (2, 4, 1, 1)]
    """
    x, w = call.args[:2]
    # (a symbolic batch is kept; the geometry of the phases and their weights is not)
    sizes = (*x.type.shape[1:], *w.type.shape, *call.type.shape[2:])
    if not all(isinstance(n, int) for n in sizes):
        return "its phases depend on its symbolic channel or spatial sizes"
    attrs = call.attrs
    k = x.type.ndim - 2
    count = math.prod(attrs["strides"])
    if count > MAX_PHASES:
        return f"its strides {attrs['strides']} make {count} phases, more than {MAX_PHASES}"
    plan = plan_phases(x.type.shape[2:], w.type.shape[2:], attrs["strides"],
                       attrs["dilations"], attrs["pads"], call.type.shape[2:])  # fmt: skip
    if not plan.convs:
        return "no weight tap lands on its output (it is the bias alone)"
    try:
        return _Builder(call, plan, k).build()
    except UndecidableSizeError as e:  # (a step the symbolic batch leaves open)
        return f"its phases need a size the symbols leave open ({e})"


class _Builder:
    """The graph of one rewritten call, from its phase plan."""

    def __init__(self, call: Call, plan: PhasePlan, k: int):
        self.call, self.plan, self.k = call, plan, k
        self.x, self.w = call.args[:2]
        self.bias = call.args[2] if len(call.args) == 3 else None
        self.group = call.attrs["group"]
        self.channels = self.x.type.shape[1] // self.group  # input channels per group
        self.outputs = self.w.type.shape[1]  # output channels per group
        self.batch = self.x.type.shape[0]
        self.rows = tuple(a.rows for a in plan.axes)

    def build(self) -> Phased:
        g, m, k = self.group, self.outputs, self.k
        # (C, M / group, kernel...) -> (group, M / group, C / group, kernel...): conv's
        # layout, by group
        kernel = self.w.type.shape[2:]
        weight = call_op("reshape", self.w, newshape=(g, self.channels, m, *kernel))
        weight = call_op("transpose", weight, axes=(0, 2, 1, *range(3, 3 + k)))
        convs, outs = [], []
        for pc in self.plan.convs:
            conv = self.conv(weight, pc)
            convs.append(conv)
            shape = (self.batch, g, len(pc.members), m, *pc.out_rows)
            outs.append(call_op("reshape", conv, newshape=shape))
        if self.plan.count == 1:  # (all strides 1: one phase, the conv is the result)
            return Phased(convs[0], tuple(convs))
        pieces = [self.piece(outs, run) for run in self.runs()]
        phases = pieces[0] if len(pieces) == 1 else call_op("concatenate", *pieces, axis=2)
        strides = tuple(a.stride for a in self.plan.axes)
        value = call_op("reshape", phases, newshape=(self.batch, g, *strides, m, *self.rows))
        # (N, group, strides..., M / group, rows...) -> (N, group, M / group, rows[0],
        # strides[0], rows[1], strides[1], ...): each phase next to the axis it interleaves
        order = [0, 1, 2 + k]
        for axis in range(k):
            order += [3 + k + axis, 2 + axis]
        value = call_op("transpose", value, axes=tuple(order))
        wide = tuple(r * s for r, s in zip(self.rows, strides))
        value = call_op("reshape", value, newshape=(self.batch, g * m, *wide))
        lengths = tuple(a.length for a in self.plan.axes)
        if wide != lengths:
            value = call_op("slice", value, starts=(0,) * k, ends=lengths,
                            axes=tuple(range(2, 2 + k)))  # fmt: skip
        return Phased(value, tuple(convs))

    def conv(self, weight: Expr, pc) -> Call:
        g, m, k = self.group, self.outputs, self.k
        subs = []
        for member in pc.members:
            taps = self.plan.taps(member)
            starts = tuple(t[-1] for t in taps)
            steps = tuple(-a.step for a in self.plan.axes)
            # (before the first tap: -(size + 1), as slice's normal form says it)
            kernel = self.w.type.shape[2:]
            ends = tuple(t[0] - a.step if t[0] >= a.step else -(n + 1)
                         for t, a, n in zip(taps, self.plan.axes, kernel))  # fmt: skip
            sub = call_op("slice", weight, starts=starts, ends=ends,
                          axes=tuple(range(3, 3 + k)), steps=steps)  # fmt: skip
            subs.append(call_op("reshape", sub, newshape=(g, 1, m, self.channels, *pc.kernel)))
        sub = subs[0] if len(subs) == 1 else call_op("concatenate", *subs, axis=1)
        p = len(pc.members)
        sub = call_op("reshape", sub, newshape=(g * p * m, self.channels, *pc.kernel))
        operands = [self._input(pc), sub]
        if self.bias is not None:
            bias = call_op("reshape", self.bias, newshape=(g, 1, m))
            bias = bias if p == 1 else call_op("concatenate", *[bias] * p, axis=1)
            operands.append(call_op("reshape", bias, newshape=(g * p * m,)))
        return call_op("conv", *operands, strides=(1,) * k, pads=pc.pads,
                       dilations=tuple(a.dilation for a in self.plan.axes), group=g)  # fmt: skip

    def _input(self, pc) -> Expr:
        sizes = self.x.type.shape[2:]
        if all(s == 0 and e == n for s, e, n in zip(pc.starts, pc.ends, sizes)):
            return self.x
        return call_op("slice", self.x, starts=pc.starts, ends=pc.ends,
                       axes=tuple(range(2, 2 + self.k)))  # fmt: skip

    def runs(self) -> list[tuple]:
        """The phases in row-major order, cut into runs that are one piece each: empty
        phases (``(None, count)``), or consecutive members of one conv at one offset
        (``(conv, first, last + 1, offset)``)."""
        where = {}
        for j, pc in enumerate(self.plan.convs):
            for i, (member, offset) in enumerate(zip(pc.members, pc.offsets)):
                where[member] = (j, i, offset)
        runs: list[list] = []
        for phase in self.plan.phases:
            found = where.get(phase)
            last = runs[-1] if runs else None
            if found is None:
                if last is not None and last[0] is None:
                    last[1] += 1
                else:
                    runs.append([None, 1])
                continue
            j, i, offset = found
            if last is not None and last[0] == j and last[2] == i and last[3] == offset:
                last[2] = i + 1
            else:
                runs.append([j, i, i + 1, offset])
        return [tuple(r) for r in runs]

    def piece(self, outs: list[Expr], run: tuple) -> Expr:
        """One run's values, (N, group, phases, M / group, rows...)."""
        g, m, k = self.group, self.outputs, self.k
        if run[0] is None:
            shape = (self.batch, g, run[1], m, *self.rows)
            dtype = self.call.type.dtype
            if self.bias is None:
                fill = Constant(np.zeros((), dtype_info(dtype).numpy))
            else:
                fill = call_op("reshape", self.bias, newshape=(1, g, 1, m) + (1,) * k)
                if self.bias.type.dtype != dtype:
                    fill = call_op("cast", fill, to=dtype)
            return call_op("broadcast_to", fill, shape=shape)
        j, first, end, offset = run
        pc = self.plan.convs[j]
        whole = (first, end) == (0, len(pc.members)) and pc.out_rows == self.rows
        if whole:
            return outs[j]
        return call_op(
            "slice", outs[j], starts=(first, *offset),
            ends=(end, *(o + r for o, r in zip(offset, self.rows))),
            axes=(2, *range(4, 4 + k)),
        )  # fmt: skip


def _why_whole(call: Call, compiler: str) -> str | None:
    """Why the rewrite leaves ``call`` whole for ``compiler`` (for ``refusal``)."""
    phased = phase_convs(call)
    if isinstance(phased, str):
        return f"the phase rewrite leaves it whole: {phased}"
    for conv in phased.convs:
        reason = refusal(compiler, conv)
        if reason is not None:
            return f"its phase convs are refused too: {reason}"
    return None


register_rewrite("conv_transpose", _why_whole)
