"""The layout of one recurrent call in the llvm stage (``recurrent``): its sizes (numbers
at lowering, or ``sizes.Dim`` the stage reads at run time), how the batch is cut into
blocks, the segments of W's and R's columns and the panels they are packed into, and
the scratch arrays the stage takes.

>>> import nbyoc, numpy as np
>>> z = lambda *shape: nbyoc.const(np.zeros(shape, np.float32))
>>> y = nbyoc.gru(nbyoc.var("x", (5, 9, 3)), z(1, 6, 3), z(1, 6, 2), z(1, 12), z(1, 9, 2))
>>> layout = Layout(y)
>>> layout.segments["r"], [name for name, _ in layout.scratch()]
([(0, 4, 0, 1), (4, 2, 1, 1)], ['projected', 'products', 'hidden', 'reset'])
"""

from __future__ import annotations

from ...ir.nodes import Call, Constant
from ...ir.ops.recurrent import CELLS
from ...runtime.llvm.target import tile_shape, vector_bits, vector_lanes, worker_threads
from . import rules
from .generic import symbolic_size
from .recurrent_cells import cell_step, direction_activations
from .sizes import Dim, Sizes, ceil_div

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


def blocking(batch: int, directions: int) -> tuple[int, int]:
    """(blocks, rows per block) of the batch: enough tasks for the worker threads (a
    row's recurrence is independent of the others'), at most one a row."""
    wanted = max(1, min(batch, worker_threads() // directions))
    rows = -(-max(batch, 1) // wanted)
    return -(-max(batch, 1) // rows), rows


class Layout:
    """The sizes of one call (numbers, or ``sizes.Dim`` read at run time), its segments
    and panels, and its scratch arrays' shapes."""

    def __init__(self, call: Call, sizes: Sizes | None = None):
        cell = CELLS[call.op.name]
        attrs = call.attrs
        self.cell, self.dtype = cell, call.type.dtype
        self.value_dtype = rules.value_dtype(self.dtype)
        seq, batch, inputs = call.args[0].type.shape
        self.directions = 2 if attrs["direction"] == "bidirectional" else 1
        blocks, rows = blocking(batch, self.directions)
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
