"""The recurrent ops (``lstm``, ``gru``, ``rnn``: ``nbyoc.ir.ops.recurrent``) in the llvm
kernel: one stage function runs a whole call, writing the packed result the host
reference writes (each step's hidden state, zero past a sequence's length, then the
last hidden state and, for an LSTM, the last cell state). This module is the op's
``StageRule``; ``recurrent_layout`` lays a call out, ``recurrent_source`` writes the
stage, ``recurrent_cells`` each cell's gates.

W and R are transposed into panels of a tile's width (each segment of R's gates into
panels of its own: GRU multiplies its candidate's rows apart), at lowering when they
are constants (``recurrent_packs``; a model's always are), else by each task: a
product then reads each panel as one contiguous block, step after step. A task is
one direction and one block of the batch's rows (the rows' recurrences are
independent: with one direction, the batch is cut so that every worker thread has a
task, ``recurrent_layout.blocking``). A task:

1. *projects*: every step's input projection ``x W^T`` by ``nbyoc.runtime.llvm.tiles``,
   as one matrix product of all steps' rows for the whole batch, else one per row of
   the block over all its steps, into scratch;
2. *steps*: per step, the block's hidden state times ``R^T`` by tiles (every other step
   walking R's panels backwards, so that the ones read last are still in L2; a block
   of one or two rows in wider panels), then the cell's gates fused into one loop over
   each active row's hidden units, biases, peepholes, clip and activations in it; a
   sequence of length L runs steps 0 .. L - 1 (reversed: from its own step L - 1
   down);
3. writes the last states, zero for an empty sequence, and zeros past each sequence's
   length.

Every size (steps, batch, input, hidden, blocks) is read at run time: one function
per structure (cell, direction, activations and their numbers, clip, flags, whether
lengths are given, dtype, wide panels or not), so a model's layers of one structure,
batch sizes and sequence lengths share it, and so do the bindings of symbolic sizes
(which never take the wide panels, whose choice reads the batch). Its scratch (the
projections, the per-step products, the states, the weights a task packs) is planned
with the kernel's values (``buffers.Scratch``): the stage allocates nothing. float16
and bfloat16 compute in float32 (their operands converted as they are packed or
read), as the host does. Lengths outside ``[0, seq]`` raise in the kernel, before the
stage (``length_checks``).
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.nodes import Call
from ...ir.ops.recurrent import CELLS
from . import rules
from .recurrent_layout import Layout
from .recurrent_source import StageSource
from .sizes import Sizes, value
from .stages import StageBody


def recurrent_supported(call: Call) -> bool:
    """Whether llvm lowers this recurrent call: a float dtype the kernel computes (float32,
    float64; float16 and bfloat16 in float32). Symbolic sizes are lowered too: each
    binding's kernel passes its sizes to the one stage function."""
    return rules.value_dtype(call.type.dtype) in ("float32", "float64")


def recurrent_work(call: Call) -> int:
    """A call's multiply-adds: every step of every row of every direction multiplies its
    input and its hidden state by all gates' weights."""
    x, r = call.args[0].type.shape, call.args[2].type.shape
    seq, batch, inputs = x
    directions, columns, hidden = r
    return directions * seq * batch * columns * (inputs + hidden)


def length_checks(call: Call, operands: list[str]) -> list[str]:
    """The kernel lines raising ValueError unless every sequence length lies in
    ``[0, seq]`` (as the host reference does), before the stage reads by them."""
    cell = CELLS[call.op.name]
    if len(operands) == len(cell.operands):
        return []
    seq, batch, _ = call.args[0].type.shape
    return [
        f"for j0 in range({batch}):",
        f"    n = {operands[-1]}[j0]",
        f"    if n < 0 or n > {seq}:",
        f'        raise ValueError("nbyoc: {call.op.name}: every sequence_lens value must lie '
        f'in [0, {seq}]")',
    ]


def recurrent_scratch(call: Call) -> list[tuple[str, int]]:
    """(dtype, elements) of each scratch array of a call's stage (``StageRule.scratch``).

    >>> import nbyoc, numpy as np
    >>> z = lambda *shape: nbyoc.const(np.zeros(shape, np.float32))
    >>> y = nbyoc.rnn(nbyoc.var("x", (5, 1, 3)), z(1, 2, 3), z(1, 2, 2), z(1, 4), z(1, 1, 2))
    >>> recurrent_scratch(y)[:3]
    [('float32', 10), ('float32', 2), ('float32', 2)]
    """
    layout = Layout(call)
    return [(layout.value_dtype, math.prod(shape)) for _, shape in layout.scratch()]


def recurrent_packs(call: Call, index: int) -> np.ndarray | None:
    """What the stage takes in place of operand ``index`` when it is a constant
    (``StageRule.packs``): W's (1) and R's (2) rows transposed into the panels its tiles
    read, (directions, panels, input or hidden, tile columns) in the value dtype; None
    for the other operands.

    >>> import nbyoc
    >>> z = lambda *shape: nbyoc.const(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
    >>> y = nbyoc.rnn(nbyoc.var("x", (5, 1, 3)), z(1, 2, 3), z(1, 2, 2), z(1, 4), z(1, 1, 2))
    >>> panels = recurrent_packs(y, 1)
    >>> panels.shape[:3], panels[0, 0, :, :2].tolist()  # W^T, then columns never read
    ((1, 1, 3), [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
    """
    if index not in (1, 2):
        return None
    layout = Layout(call)
    which = "wr"[index - 1]
    weights = np.asarray(call.args[index].data).astype(layout.value_dtype)
    directions, _, depth = weights.shape
    cols = layout.cols[which]
    panels = np.zeros((directions, layout.panels[which], depth, cols), layout.value_dtype)
    for first, columns, panel, count in layout.segments[which]:
        for p in range(count):
            start = first + p * cols
            stop = min(first + columns, start + cols)
            panels[:, panel + p, :, : stop - start] = weights[:, start:stop].transpose(0, 2, 1)
    return panels


def recurrent_stage(node: Call, sources, dest: str, parallel: bool, epilogue=None) -> StageBody:
    """``node`` (an lstm, gru or rnn call) into ``dest``, as a stage function's body;
    ``sources``: its operands' names, then its scratch arrays' (``recurrent_scratch``)."""
    assert epilogue is None, "internal: a recurrent op takes no epilogue"
    sizes = Sizes()
    layout = Layout(node, sizes)
    cell, count = layout.cell, len(node.args)
    names = dict(zip(cell.operands, sources))
    names["lens"] = sources[count - 1] if layout.lengths else None
    scratch = dict(zip((name for name, _ in layout.scratch()), sources[count:]))
    writer = StageSource(node, layout, names, scratch, dest)
    lines = writer.task()
    seq, batch = value(layout.seq), value(layout.batch)
    work = recurrent_work(node) // max(1, value(layout.tasks))
    return StageBody(
        lines,
        value(layout.tasks),
        max(1, work + seq * batch),
        writer.setup(),
        writer.imports,
        sizes=sizes,
        helpers=set().union(*(step.helpers for step in layout.steps)),
    )
