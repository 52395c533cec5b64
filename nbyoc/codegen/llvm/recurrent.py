"""The recurrent ops (``lstm``, ``gru``, ``rnn``: ``nbyoc.ir.ops.recurrent``) in the llvm
kernel: one stage function runs a whole call, writing the packed result the host
reference writes (each step's hidden state, zero past a sequence's length, then the
last hidden state and, for an LSTM, the last cell state).

A task is one direction and one block of the batch's rows (the rows' recurrences are
independent: with one direction, the batch is cut so that every worker thread has a
task, ``_blocking``). A task:

1. *packs* its direction's W and R, transposed into panels of the tile's width (each
   segment of R's gates into panels of its own, ``recurrent_cells``): a product then
   reads each panel as one contiguous block, step after step;
2. *projects*: every step's input projection ``x W^T`` as one matrix product by
   ``nbyoc.runtime.llvm.tiles`` (the rows of all steps at once when the block is the
   whole batch, else a product per step), into scratch;
3. *steps*: per step, the block's hidden state times ``R^T`` by tiles, then the
   cell's gates fused into one loop over each active row's hidden units, the biases,
   peepholes, clip and activations in it (``recurrent_cells``); a sequence of length
   L runs steps 0 .. L - 1 (reversed: from its own step L - 1 down);
4. writes the last states, zero for an empty sequence, and zeros past each
   sequence's length.

Every size (steps, batch, input, hidden, blocks) is read at run time: one function
per structure (cell, direction, activations and their numbers, clip, flags, whether
lengths are given, dtype), so a model's layers of one structure, every batch size and
sequence length, and symbolic sizes' bindings share it. Its scratch (the projections,
the per-step products, the states, the packed weights) is planned with the kernel's
values (``buffers.Scratch``): no step allocates. float16 and bfloat16 compute in
float32 (their operands converted as they are packed or read), as the host does.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.nodes import Call, Constant
from ...ir.ops.recurrent import CELLS
from ...runtime.llvm.target import (
    tile_name,
    tile_shape,
    vector_bits,
    vector_lanes,
    worker_threads,
)
from . import rules
from .gemm import tail_rows
from .generic import symbolic_size
from .recurrent_cells import cell_step, direction_activations
from .sizes import Dim, Sizes, ceil_div, value
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


#: A block of at most this many rows multiplies its state by R in wider panels ...
WIDE_MAX_ROWS = 2
#: ... of this many vectors (8: 16 accumulators of 2 rows in AVX-512's 32 registers;
#: AVX2 has 16, hence 4 there). Measured on this project's 2-core Xeon, float32, R of
#: 128 x 512 (in L2): 1 row 2.8 us a product in panels of 32 columns, 1.6 us in panels
#: of 128; 2 rows 3.2 and 2.0 us; 4 rows 4.4 and 4.9 us (so not from 4 rows).
WIDE_VECTORS = 8


def _r_columns(dtype: str, wide: bool) -> int:
    """The width of R's panels: the tile's, or ``WIDE_VECTORS`` vectors."""
    if not wide:
        return tile_shape(dtype)[1]
    return vector_lanes(dtype) * (WIDE_VECTORS if vector_bits() >= 512 else WIDE_VECTORS // 2)


def _blocking(batch: int, directions: int) -> tuple[int, int]:
    """(blocks, rows per block) of the batch: enough tasks for the worker threads (a
    row's recurrence is independent of the others'), at most one a row."""
    wanted = max(1, min(batch, worker_threads() // directions))
    rows = -(-max(batch, 1) // wanted)
    return -(-max(batch, 1) // rows), rows


class _Layout:
    """The sizes of one call (numbers, or ``sizes.Dim`` read at run time), its segments
    and panels, and its scratch arrays' shapes."""

    def __init__(self, call: Call, sizes: Sizes | None = None):
        cell = CELLS[call.op.name]
        attrs = call.attrs
        self.cell, self.dtype = cell, call.type.dtype
        self.value_dtype = rules.value_dtype(self.dtype)
        seq, batch, inputs = call.args[0].type.shape
        self.directions = 2 if attrs["direction"] == "bidirectional" else 1
        blocks, rows = _blocking(batch, self.directions)
        numbers = (seq, batch, inputs, call.type.shape[3], blocks, rows)
        dims = numbers if sizes is None else sizes.dims(numbers)
        self.seq, self.batch, self.inputs, self.hidden, self.blocks, self.rows = dims
        self.tasks = self.directions * self.blocks
        #: the panels' widths: the tile's for W (its product has every step's rows) and
        #: for R, unless a block has so few rows that a wider tile pays (``_r_columns``)
        wide = rows <= WIDE_MAX_ROWS and not symbolic_size(call.args[0], 1)
        self.cols = {"w": tile_shape(self.value_dtype)[1], "r": _r_columns(self.value_dtype, wide)}
        self.wide = wide
        flags = {flag: attrs[flag] for flag in cell.flags}
        activations = direction_activations(
            cell.name, self.directions, attrs["activations"], attrs["activation_alpha"],
            attrs["activation_beta"],
        )  # fmt: skip
        #: each direction's step (the two of a bidirectional call may differ)
        self.steps = [
            cell_step(cell.name, self.dtype, acts, attrs["clip"], flags) for acts in activations
        ]
        self.step = self.steps[0]
        # each weights' segments, (first column, columns, its first panel, its panels),
        # and their panels in all
        self.segments, self.panels = {}, {}
        for weights, cols in self.cols.items():
            self.segments[weights], first = [], 0
            for gate, gates in self.step.segments:
                columns = gates * self.hidden
                panels = ceil_div(columns, cols)
                self.segments[weights].append((gate * self.hidden, columns, first, panels))
                first = first + panels
            self.panels[weights] = first
        self.lengths = len(call.args) > len(cell.operands)
        #: W and R packed at lowering, when constants (``recurrent_packs``); else by each
        #: task into its scratch
        self.packed = {k: isinstance(call.args[i], Constant) for i, k in ((1, "w"), (2, "r"))}

    def scratch(self) -> list[tuple[str, tuple]]:
        """(name, shape) of each scratch array, in the order the stage takes them. (No
        array is empty: Numba cannot reshape an empty one; with no steps or no inputs,
        one row or column is there and never read.)"""
        d, s, b, n = self.directions, _at_least_one(self.seq), self.batch, self.hidden
        inputs = _at_least_one(self.inputs)
        columns = self.cell.gates * n
        arrays = [
            ("projected", (d, s, b, columns)),
            ("products", (d, b, columns)),
            ("hidden", (d, b, n)),
        ]
        if self.cell.states == 2:
            arrays.append(("cell", (d, b, n)))
        if len(self.step.phases) == 2:
            arrays.append(("reset", (d, b, n)))
        for weights, depth in (("w", inputs), ("r", n)):
            if not self.packed[weights]:
                shape = (self.tasks, self.panels[weights], depth, self.cols[weights])
                arrays.append((f"{weights}_panels", shape))
        if self.dtype in rules.STORAGE:  # (x in float32, for the tiles)
            arrays.append(("x_values", (d, s, b, inputs)))
        return arrays


def _at_least_one(size):
    """``max(size, 1)``, of a number or a size read at run time."""
    if isinstance(size, Dim):
        return Dim(f"max({size}, 1)", max(size.value, 1))
    return max(size, 1)


def recurrent_scratch(call: Call) -> list[tuple[str, int]]:
    """(dtype, elements) of each scratch array of a call's stage (``StageRule.scratch``).

    >>> import nbyoc, numpy as np
    >>> z = lambda *shape: nbyoc.const(np.zeros(shape, np.float32))
    >>> y = nbyoc.rnn(nbyoc.var("x", (5, 1, 3)), z(1, 2, 3), z(1, 2, 2), z(1, 4), z(1, 1, 2))
    >>> recurrent_scratch(y)[:3]
    [('float32', 10), ('float32', 2), ('float32', 2)]
    """
    layout = _Layout(call)
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
    layout = _Layout(call)
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
    layout = _Layout(node, sizes)
    cell, count = layout.cell, len(node.args)
    names = dict(zip(cell.operands, sources))
    names["lens"] = sources[count - 1] if layout.lengths else None
    scratch = dict(zip((name for name, _ in layout.scratch()), sources[count:]))
    writer = _Writer(node, layout, names, scratch, dest)
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


class _Writer:
    """Writes one recurrent stage's source (see the module docstring)."""

    def __init__(self, node: Call, layout: _Layout, names: dict, scratch: dict, dest: str):
        self.node, self.layout, self.names, self.scratch, self.dest = (
            node, layout, names, scratch, dest,
        )  # fmt: skip
        self.imports: set[str] = set()
        self.direction = node.attrs["direction"]

    def load(self, element: str) -> str:
        return rules.load(element, self.layout.dtype)

    def setup(self) -> list[str]:
        """The per-call lines: the scratch arrays shaped, the gates' offsets."""
        lay = self.layout
        lines = [
            f"{name}_ = {self.scratch[name]}.reshape(({', '.join(map(str, shape))}))"
            for name, shape in lay.scratch()
        ]
        columns = lay.cell.gates * lay.hidden
        lines += [f"og{g} = np.uint64({g} * {lay.hidden})" for g in range(lay.cell.gates)]
        lines += [
            f"ob{g} = np.uint64({columns} + {g} * {lay.hidden})" for g in range(lay.cell.gates)
        ]
        lines.append(f"hu = np.uint64({lay.hidden})")
        return lines

    def task(self) -> list[str]:
        lay = self.layout
        lines = [
            f"d = task // {lay.blocks}",
            f"b0 = task % {lay.blocks} * {lay.rows}",
            f"b1 = min({lay.batch}, b0 + {lay.rows})",
            f"brow = {self.names['b']}[d]",
        ]
        if lay.cell.states == 2:
            lines.append(f"peep = {self.names['p']}[d]")
        lines += self.pack()
        lines += self.project()
        lines += self.start()
        lines += self.steps()
        lines += self.finish()
        return lines

    def panels(self, weights: str) -> tuple[str, str]:
        """The array holding ``weights``' panels ("w" or "r") and its first index: the
        packed constant's direction, or the task's own scratch."""
        if self.layout.packed[weights]:
            return self.names[weights], "d"
        return f"{weights}_panels_", "task"

    def pack(self) -> list[str]:
        """W's and R's rows of each segment, transposed into the task's panels (unless
        packed at lowering)."""
        lay = self.layout
        lines = []
        for weights, depth in (("w", lay.inputs), ("r", lay.hidden)):
            if lay.packed[weights]:
                continue
            cols = lay.cols[weights]
            for first, columns, panel, panels in lay.segments[weights]:
                lines += [
                    f"for p in range({panels}):",
                    f"    n0 = p * {cols}",
                    f"    valid = min({cols}, {columns} - n0)",
                    f"    for k in range({depth}):",
                    "        for jj in range(valid):",
                    f"            {weights}_panels_[task, {panel} + p, k, jj] = "
                    + self.load(f"{self.names[weights]}[d, {first} + n0 + jj, k]"),
                ]
        return lines

    def product(self, a: str, depth, rows: tuple[str, str], weights: str, target: str, segment):
        """The lines of ``target``'s columns of ``segment`` = rows ``[start, end)`` of
        ``a`` times the segment's panels of ``weights``, by tiles (``rows``: the names of
        the first row and the end): the loop over the panels, and what runs in it."""
        lay = self.layout
        panels, index = self.panels(weights)
        first, columns, panel, count = segment
        cols = lay.cols[weights]
        start, end = rows
        lines = [f"for p in range({count}):"]
        if weights == "r":
            # Every other step walks R's panels backwards: the panels the step before
            # read last are still in L2 when R is larger than it (R of 512 x 2048 float32,
            # 4 MiB, one row: 142 us a product in order, 92 us so, on this 2-core Xeon).
            lines.append(f"    p = p if step % 2 == 0 else {count} - 1 - p")
        lines += [
            f"    n0 = p * {cols}",
            f"    valid = min({cols}, {columns} - n0)",
            f"    panel = {panels}[{index}, {panel} + p]",
            f"    columns = {target}[:, {first} + n0:]",
        ]
        inner = [f"r = {start}"]
        for tile, body in self._tiles(cols, end, weights == "r" and lay.wide):
            call = f"{tile}({a}, r, panel, 0, {depth}, columns, r, valid)"
            inner += [line.replace("CALL", call) for line in body]
        return lines, inner

    def _tiles(self, cols: int, end: str, few: bool):
        """Each tile's name and its lines (the call spelt ``CALL``), over rows from ``r``
        to ``end``: full tiles, then tails of 4, 2 and 1 rows (their count is read at
        run time; ``gemm.tile_product``'s rule); ``few``: at most ``WIDE_MAX_ROWS`` rows,
        the tails alone."""
        dtype = self.layout.value_dtype
        tile_rows = tile_shape(dtype)[0]
        if not few:
            full = tile_name(dtype, tile_rows, cols)
            self.imports.add(full)
            yield full, [f"while r + {tile_rows} <= {end}:", "    CALL", f"    r += {tile_rows}"]
        for rows in tail_rows(tile_rows):
            if few and rows > WIDE_MAX_ROWS:
                continue
            tile = tile_name(dtype, rows, cols)
            self.imports.add(tile)
            yield tile, [f"if r + {rows} <= {end}:", "    CALL", f"    r += {rows}"]

    def project(self) -> list[str]:
        """Every step's ``x W^T`` for the block's rows, by panels of W: for the whole
        batch, the rows of all steps in one product; for a block, one product per row of
        the batch over all its steps (rows ``batch`` apart: a tile reads A by strides, and
        a product per step of one row took 0.16 ms of a 0.48 ms LSTM)."""
        lay = self.layout
        lines = []
        if lay.dtype in rules.STORAGE:  # the direction's copy of x in float32
            lines += [
                f"for t in range({lay.seq}):",
                "    for b in range(b0, b1):",
                f"        for k in range({lay.inputs}):",
                f"            x_values_[d, t, b, k] = {self.load(self.names['x'] + '[t, b, k]')}",
                "x3 = x_values_[d]",
            ]
        else:
            lines.append(f"x3 = {self.names['x']}")
        rows, columns = lay.seq * lay.batch, lay.cell.gates * lay.hidden
        lines += [  # (by their own lengths: with no steps, the scratch keeps one)
            f"x2 = x3.reshape((x3.shape[0] * {lay.batch}, {lay.inputs}))",
            f"p2 = projected_[d].reshape((projected_.shape[1] * {lay.batch}, {columns}))",
            f"whole = b1 - b0 == {lay.batch}",
            "runs = 1 if whole else b1 - b0",
        ]
        for segment in lay.segments["w"]:
            head, inner = self.product("xa", lay.inputs, ("0", "end"), "w", "pa", segment)
            lines += head[:-1]  # (the target is chosen per run)
            first = segment[0]
            lines += [
                "    for q in range(runs):",
                "        if whole:",
                f"            xa, pa, end = x2, p2, {rows}",
                "        else:",
                f"            xa, pa, end = x3[:, b0 + q], projected_[d][:, b0 + q], {lay.seq}",
                f"        columns = pa[:, {first} + n0:]",
                *("        " + line for line in inner),
            ]
        return lines

    def start(self) -> list[str]:
        """The block's states from the initial ones (GRU's ``r * h`` zeroed: the rows of
        ended sequences are multiplied too, and never read)."""
        lay = self.layout
        lines = [
            "for b in range(b0, b1):",
            "    hrow = hidden_[d, b]",
            f"    h0 = {self.names['initial_h']}[d, b]",
        ]
        body = [f"hrow[j] = {self.load('h0[j]')}"]
        if lay.cell.states == 2:
            lines += ["    crow = cell_[d, b]", f"    c0 = {self.names['initial_c']}[d, b]"]
            body.append(f"crow[j] = {self.load('c0[j]')}")
        if len(lay.step.phases) == 2:
            lines.append("    rhrow = reset_[d, b]")
            body.append(f"rhrow[j] = {rules.literal(0, lay.value_dtype)}")
        return [*lines, "    for j in range(hu):", *("        " + line for line in body)]

    def length(self, row: str) -> str:
        """The length of sequence ``row``."""
        lens = self.names["lens"]
        return f"np.int64({lens}[{row}])" if lens is not None else str(self.layout.seq)

    def position(self) -> str:
        """The time index of step ``step`` of a sequence of length ``n``."""
        reverse = "n - 1 - step"
        if self.direction == "forward":
            return "step"
        if self.direction == "reverse":
            return reverse
        return f"{reverse} if d == 1 else step"

    def steps(self) -> list[str]:
        lay = self.layout
        if self.names["lens"] is not None:
            lines = [
                "steps = 0",
                "for b in range(b0, b1):",
                f"    steps = max(steps, {self.length('b')})",
            ]
        else:
            lines = [f"steps = {lay.seq}"]
        lines.append("for step in range(steps):")
        states = ["hidden_[d]", "reset_[d]"]
        for k, segment in enumerate(lay.segments["r"]):
            head, inner = self.product(
                states[k], lay.hidden, ("b0", "b1"), "r", "products_[d]", segment
            )
            lines += ["    " + line for line in head]
            lines += ["        " + line for line in inner]
            rows = [
                "for b in range(b0, b1):",
                f"    n = {self.length('b')}",
                "    if step < n:",
                f"        t = {self.position()}",
                "        prow = projected_[d, t, b]",
                "        zrow = products_[d, b]",
                "        hrow = hidden_[d, b]",
                f"        yrow = {self.dest}[t, d, b]",
            ]
            if lay.cell.states == 2:
                rows.append("        crow = cell_[d, b]")
            if len(lay.step.phases) == 2:
                rows.append("        rhrow = reset_[d, b]")
            loop = self.loop([step.phases[k] for step in lay.steps])
            rows += ["        " + line for line in loop]
            lines += ["    " + line for line in rows]
        return lines

    def loop(self, phases: list[list[str]]) -> list[str]:
        """The loop over a row's hidden units running each direction's ``phases`` (one
        loop when the directions' activations are the same)."""
        loops = [["for j in range(hu):", *("    " + line for line in phase)] for phase in phases]
        if all(phase == phases[0] for phase in phases):
            return loops[0]
        return ["if d == 0:", *("    " + line for line in loops[0]),
                "else:", *("    " + line for line in loops[1])]  # fmt: skip

    def finish(self) -> list[str]:
        """The last states (zero for an empty sequence, as ONNX Runtime gives), and zeros
        in the output rows past each sequence's length."""
        lay = self.layout
        zero = rules.store(rules.literal(0, lay.dtype), lay.dtype)
        finals = [("hidden_", lay.seq)]
        if lay.cell.states == 2:
            finals.append(("cell_", lay.seq + 1))
        lines = ["for b in range(b0, b1):", f"    n = {self.length('b')}"]
        if self.names["lens"] is not None:
            lines += [
                f"    for t in range(n, {lay.seq}):",
                f"        yrow = {self.dest}[t, d, b]",
                "        for j in range(hu):",
                f"            yrow[j] = {zero}",
            ]
        for state, row in finals:
            stored = rules.store(rules.cast("srow[j]", lay.dtype), lay.dtype)
            lines += [
                f"    srow = {state}[d, b]",
                f"    final = {self.dest}[{row}, d, b]",
                "    for j in range(hu):",
                f"        final[j] = {zero} if n == 0 else {stored}",
            ]
        return lines
