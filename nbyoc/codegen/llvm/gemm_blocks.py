"""A tiled matmul in blocks of packed operands, as BLAS libraries compute it (BLIS's
loops): the lines of a task computing its rows of ``c = a @ b``.

Per block of ``K_PART`` values of K, the task copies its rows of A into *micro-panels*
(``a_pack[t, kk, i]``: the tile's rows side by side, one K step after the other), and
per block of ``column_block`` columns of B, those columns into panels of the tile's
width (``b_pack[p, kk, j]``, read along B's rows, so that the copy streams). Each
tile then reads two contiguous streams: its micro-panel of A, ``K_PART x rows``
(12 KiB for 12 rows of float32: in L1), and a panel of B, ``K_PART x columns``
(32 KiB), the block of which stays in L2 while the task's tiles pass over it. Unpacked,
the rows of A lie ``k`` values apart: at 2048 float64 (16 KiB apart) twelve rows fall
in the same L1 set and the tile ran at 36 instead of 58 GFLOP/s; a panel of B read in
place (rows ``n`` apart) thrashes L1 and L2 the same way.

One task per thread for a single product (a static share of rows, the same for each),
so that B is copied once per thread, not once per small task. The copies are loops of
a constant trip count along the contiguous side (a trip count read at run time left
the 32 values of a panel's row to the vectorised loop's scalar remainder: the copies
then took a third of the product's time).

Measured on this project's AMD EPYC (Zen 4, one thread, process time, medians;
NumPy's OpenBLAS beside it in the same process): 1024^3 float32 96.6 GFLOP/s
(OpenBLAS 99.9), float64 49.4 (50.3); 2048^3 float32 99.6 (101.1), float64 51.1
(51.5; read in place it ran at 8.2); 4096 x 1024 x 1024 float32 99.7 (98.8). The
tiles alone, without the copies, ran at 105-112: the copies cost the rest.
"""

from __future__ import annotations

import numpy as np

from ...ir.dtypes import dtype_info
from ...runtime.llvm.target import cache_bytes, tile_name, tile_shape, worker_threads
from .sizes import ceil_div

#: Values of K a block of the product sums over: a panel of B (K_PART x 32 float32
#: or 16 float64 columns) is 32 KiB. 256 and 512 measured alike; 128 lost 2-4%
#: (C read and written once per block).
K_PART = 256
#: The L2 size assumed where the system does not say (bytes, one core's).
DEFAULT_L2_BYTES = 1 << 20


def column_block(dtype: str) -> int:
    """Columns of B packed at a time: a block of K_PART rows that fills half of one
    core's L2 (a multiple of the tile's columns)."""
    cols = tile_shape(dtype)[1]
    itemsize = dtype_info(dtype).itemsize
    fits = cache_bytes(2, DEFAULT_L2_BYTES) // 2 // (K_PART * itemsize)
    return max(cols, fits // cols * cols)


def task_rows(rows: int, matrices: int, tile_rows: int) -> int:
    """Rows per task of a product of ``matrices`` matrices of ``rows`` rows: the rows
    of each shared out over the worker threads the matrices leave idle, a multiple of
    the tile's rows.

    >>> task_rows(1024, 1, 12) % 12, task_rows(1024, 1 << 20, 12)  # (matrices to spare)
    (0, 1032)
    """
    groups = max(1, -(-worker_threads() // matrices))
    tiles = -(-rows // tile_rows)
    return tile_rows * -(-tiles // min(groups, tiles))


def blocked_product(dtype: str, arrays, sizes, r0: str, r1: str, group, packed_b=False):
    """The setup lines, the lines computing rows ``[r0, r1)`` of ``c = a @ b`` in
    blocks of packed operands, and the tiles they import. ``arrays``: the names of the
    2-D ``a``, ``b`` and ``c`` (``c`` with unit-stride rows); ``sizes``: (rows, k, n)
    of the product; ``group``: the most rows a task takes (for the buffers). With
    ``packed_b``, ``b`` is B packed once already (``packed_panels``: a constant
    weight), which no task copies."""
    a, b, c = arrays
    _, k, n = sizes
    tile_rows, cols = tile_shape(dtype)
    block = column_block(dtype)
    if packed_b:
        panels, copy_b = f"{b}[kb, nb * {block // cols} + {{p}}]", [f"full = nl // {cols}"]
    else:
        panels, copy_b = "b_pack[{p}]", _pack_b(b, cols)
    lines = [
        f"for kb in range({ceil_div(k, K_PART)}):",
        f"    k0 = kb * {K_PART}",
        f"    kl = min({K_PART}, {k} - k0)",
        *_indent(_pack_a(a, tile_rows, r0, r1)),
        f"    for nb in range({ceil_div(n, block)}):",
        f"        n0 = nb * {block}",
        f"        nl = min({block}, {n} - n0)",
        *_indent(copy_b, 2),
        "        if kb == 0:",
        *_indent(_tiles(dtype, c, r0, r1, panels, accumulate=False), 3),
        "        else:",
        *_indent(_tiles(dtype, c, r0, r1, panels, accumulate=True), 3),
    ]
    a_panels = ceil_div(group, tile_rows)
    setup = [f"a_pack = np.empty(({a_panels}, {K_PART}, {tile_rows}), np.{dtype})"]
    if not packed_b:
        setup.append(f"b_pack = np.empty(({block // cols}, {K_PART}, {cols}), np.{dtype})")
    imports = {tile_name(dtype, rows, cols, acc) for rows in _all_rows(tile_rows)
               for acc in (False, True)}  # fmt: skip
    return setup, lines, imports


def _all_rows(tile_rows: int) -> list[int]:
    return [tile_rows, *tail_rows(tile_rows)]


def tail_rows(tile_rows: int) -> list[int]:
    """The row counts of the tiles that take the last rows of a product whose row count
    is read at run time: powers of two below the full tile's, largest first.

    >>> tail_rows(6), tail_rows(12)
    ([4, 2, 1], [8, 4, 2, 1])
    """
    rows, found = 1, []
    while rows < tile_rows:
        found.insert(0, rows)
        rows *= 2
    return found


def _indent(lines: list[str], depth: int = 1) -> list[str]:
    return ["    " * depth + line for line in lines]


def _pack_a(a: str, tile_rows: int, r0: str, r1: str) -> list[str]:
    """Lines copying rows ``[r0, r1)`` of ``a``'s K block into micro-panels (the last
    one holding the rows left)."""
    return [
        "t = 0",
        f"r = {r0}",
        f"while r < {r1}:",
        f"    if r + {tile_rows} <= {r1}:",
        "        for kk in range(kl):",
        f"            for i in range({tile_rows}):",
        f"                a_pack[t, kk, i] = {a}[r + i, k0 + kk]",
        "    else:",
        "        for kk in range(kl):",
        f"            for i in range({r1} - r):",
        f"                a_pack[t, kk, i] = {a}[r + i, k0 + kk]",
        f"    r += {tile_rows}",
        "    t += 1",
    ]


def _pack_b(b: str, cols: int) -> list[str]:
    """Lines copying columns ``[n0, n0 + nl)`` of ``b``'s K block into panels, a row
    of B at a time (the last panel holding the columns left)."""
    return [
        f"full = nl // {cols}",
        "for kk in range(kl):",
        "    for p in range(full):",
        f"        for j in range({cols}):",
        f"            b_pack[p, kk, j] = {b}[k0 + kk, n0 + p * {cols} + j]",
        f"    for j in range(nl - full * {cols}):",
        f"        b_pack[full, kk, j] = {b}[k0 + kk, n0 + full * {cols} + j]",
    ]


def _tiles(dtype: str, c: str, r0: str, r1: str, panel: str, accumulate: bool) -> list[str]:
    """Lines running the tiles over the task's rows and the block's panels (``panel``:
    the expression of panel ``{p}`` of the block): full tiles with the panels' columns
    a constant (the tile's masks fold away), the last part panel with its count, then
    the rows left in tiles of 8, 4, 2 and 1 rows (one stage for every row count:
    ``tail_rows``)."""
    tile_rows, cols = tile_shape(dtype)
    full = tile_name(dtype, tile_rows, cols, accumulate)

    def panels(tile: str, row: str, offset: str) -> list[str]:
        # (``panel``'s {p} is the call's own, filled by ``format`` below)
        call = f"{tile}(ap, {offset}, {panel}, 0, kl, {c}[:, n0 + {{p}} * {cols}:], {row}, "
        return [
            "for p in range(full):",
            "    " + call.format(p="p") + f"{cols})",
            f"if full * {cols} < nl:",
            "    " + call.format(p="full") + f"nl - full * {cols})",
        ]

    lines = [
        "t = 0",
        f"r = {r0}",
        f"while r + {tile_rows} <= {r1}:",
        "    ap = a_pack[t].T",
        *_indent(panels(full, "r", "0")),
        f"    r += {tile_rows}",
        "    t += 1",
        f"if r < {r1}:",
        "    ap = a_pack[t].T",
        "    i = 0",
    ]
    for rows in tail_rows(tile_rows):
        tail = tile_name(dtype, rows, cols, accumulate)
        lines += [
            f"    if r + i + {rows} <= {r1}:",
            *_indent(panels(tail, "r + i", "i"), 2),
            f"        i += {rows}",
        ]
    return lines


def packed_panels(b: np.ndarray, dtype: str) -> np.ndarray:
    """A constant B (k, n) as ``blocked_product`` reads it packed: ``(k blocks, panels,
    K_PART, tile columns)``, panel ``q`` of K block ``kb`` holding
    ``B[kb * K_PART + kk, q * cols + j]``, zero past B's last row and column (the tiles
    read whole panels; the zeros add nothing, and no stored column comes from them).

    >>> b = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> packed = packed_panels(b, "float32")
    >>> cols = tile_shape("float32")[1]
    >>> packed.shape == (1, 1, K_PART, cols), packed[0, 0, :3, :4].tolist()
    (True, [[0.0, 1.0, 2.0, 0.0], [3.0, 4.0, 5.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    """
    cols = tile_shape(dtype)[1]
    k, n = b.shape
    k_blocks, panels = ceil_div(k, K_PART), ceil_div(n, cols)
    padded = np.zeros((k_blocks * K_PART, panels * cols), dtype)
    padded[:k, :n] = b
    return np.ascontiguousarray(
        padded.reshape(k_blocks, K_PART, panels, cols).transpose(0, 2, 1, 3)
    )
