"""The source of the llvm recurrent stage (``recurrent``): the body of one task (a
direction and a block of the batch) over a call's ``recurrent_layout.Layout``: packing
the weights not packed at lowering, the input projection, the initial states, the steps
(products by tiles, then the cells' gates: ``recurrent_cells``) and the final states.
"""

from __future__ import annotations

from ...ir.nodes import Call
from ...runtime.llvm.target import tile_name, tile_shape
from . import rules
from .gemm import tail_rows
from .recurrent_layout import WIDE_MAX_ROWS, Layout


class StageSource:
    """Writes one recurrent stage's source (see the module docstring)."""

    def __init__(self, node: Call, layout: Layout, names: dict, scratch: dict, dest: str):
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
