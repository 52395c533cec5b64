"""matmul in the llvm kernel, with the elementwise ops after it (its *epilogue*: a
bias, an activation, a residual) applied to each block of rows of the result while
the block is still in cache.

Three ways, chosen per call by its dtype:

- **tiles** (float32 and float64, both operands at least 2-D): the product is cut
  into groups of rows, one task each, shared out over the kernel's threads; a task
  runs ``nbyoc.runtime.llvm.tiles``' register-blocked tiles over its rows, then its
  epilogue on its rows. In the kernel's own threads, at BLAS speed. A product wide
  enough and with rows enough (``packs_b``) runs in blocks of packed operands, one
  task per thread (``gemm_blocks``; a constant B, a layer's weight, packed once at
  lowering: ``packs_constant_b``); a smaller one reads its operands in place, a
  panel of columns at a time, and one deeper than ``DEEP_K`` sums K in parts of
  ``K_BLOCK`` (accumulating tiles after the first), so that the rows of a part and a
  panel stay in cache (BLAS's ``kc`` blocking). A product of few rows and a B wider
  than a core's L2 (a classifier's last layer) is cut by its columns instead, each
  task all rows and a block of panels (``column_blocks``), so that B is read once; a
  constant B then comes packed into its panels at lowering (``matmul_packs``).
- **rows** (float16, computed in float32): each output row is ``K`` multiply-adds of
  rows of ``b`` into an accumulator row, vectorised along the row.
- **loops**: integer and bool products and products with a 1-D operand; taken only
  while small (``LOOP_MAX_WORK`` multiply-adds: beyond, NumPy's BLAS or its integer
  loops on the host are as fast).

Float products accumulate in their own dtype, as BLAS does (float16 in float32).
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.dtypes import dtype_info
from ...ir.nodes import Call, Constant
from ...runtime.llvm.target import (
    last_level_cache_bytes,
    tile_name,
    tile_shape,
    tiles_supported,
)
from . import rules
from .gemm_blocks import blocked_product, packed_panels, tail_rows, task_rows
from .generic import symbolic_size
from .loops import loop_nest, outer, subscript
from .sizes import Sizes, ceil_div, value
from .stages import Lead, StageBody

#: A matmul without tiles or rows is taken up to this many multiply-adds.
LOOP_MAX_WORK = 1 << 16
#: Bytes of A one task's rows hold (they stay in L2 while the panels of B pass).
ROW_GROUP_BYTES = 1 << 17
#: Products of at most this many rows take the streaming tiles (``tile_product``).
STREAM_ROWS = 16
#: Tasks a matrix's rows are cut into when it has rows enough: several per thread,
#: so that threads finishing early take more.
TASKS_PER_MATRIX = 16


def uses_tiles(node: Call) -> bool:
    """Whether this matmul runs as tiles (float32/float64 operands of its dtype, both
    at least 2-D)."""
    a, b = node.args
    dtype = node.type.dtype
    return (
        tiles_supported(dtype)
        and a.type.ndim >= 2
        and b.type.ndim >= 2
        and a.type.dtype == dtype
        and b.type.dtype == dtype
    )


def takes_epilogue(node: Call) -> bool:
    """Whether the matmul's emitter runs an epilogue per row (the tiles and rows ways)."""
    a, b = node.args
    return a.type.ndim >= 2 and b.type.ndim >= 2 and dtype_info(node.type.dtype).is_float


def matmul_supported(call: Call) -> bool:
    """Whether llvm takes this matmul: tiles and rows at any size, loops while small.

    >>> import nbyoc
    >>> a, i = nbyoc.var("a", (512, 512)), nbyoc.var("i", (512, 512), "int32")
    >>> matmul_supported(a @ a), matmul_supported(i @ i)
    (True, False)
    """
    if takes_epilogue(call):
        return True
    return call.type.size * call.args[0].type.shape[-1] <= LOOP_MAX_WORK


def matmul_stage(node: Call, sources, dest: str, parallel: bool, epilogue=None) -> StageBody:
    """NumPy's matmul (batched, broadcasting, 1-D operands) into ``dest``, as a stage
    function's body; ``epilogue``, given the names of an output row's leading indices,
    returns the lines to run on that row once it is written."""
    if not takes_epilogue(node):
        assert epilogue is None, "internal: an epilogue for a matmul without rows"
        return _loops_matmul(node, sources, dest)
    if uses_tiles(node):
        return _tiled_matmul(node, sources, dest, epilogue)
    return _rows_matmul(node, sources, dest, epilogue)


def _batch(node: Call, sizes: Sizes):
    """The batch shape (its extents read at run time), and for each operand its batch
    subscript (broadcast axes at 0: structure)."""
    a, b = node.args
    batch = node.type.shape[:-2]
    names = [f"i{d}" for d in range(len(batch))]
    return (
        sizes.dims(batch),
        names,
        _batch_subscript(batch, names, a.type.shape, isinstance(a, Constant)),
        _batch_subscript(batch, names, b.type.shape, isinstance(b, Constant)),
    )


def _batch_subscript(batch, names, shape, invariant: bool = False) -> list[str]:
    """An operand of ``shape``'s subscript over the batch axes named ``names``: "0" on
    an axis it broadcasts (NumPy's rule, leading axes aligned from the right), and for an
    ``invariant`` operand (a constant) on every axis of extent 1: its code is then the
    same at every batch size (``kernel_arrays.element_index``)."""
    lead = shape[:-2]
    pad = len(batch) - len(lead)
    return [
        "0" if n == 1 and (invariant or batch[pad + d] != 1) else names[pad + d]
        for d, n in enumerate(lead)
    ]


def _rows_matmul(node, sources, dest, epilogue) -> StageBody:
    a_name, b_name = sources
    a, b = node.args
    dtype = node.type.dtype
    acc_dtype = rules.value_dtype(dtype)
    sizes = Sizes()
    m, k, n = sizes.dims((a.type.shape[-2], a.type.shape[-1], b.type.shape[-1]))
    batch, names, a_batch, b_batch = _batch(node, sizes)
    if epilogue is not None:
        epilogue = epilogue.sized((*batch, m, n))
    rows = value(math.prod(batch) * m)
    a_value = rules.load(f"{a_name}[{subscript([*a_batch, 'm', 'kk'])}]", a.type.dtype)
    b_value = rules.load(f"{b_name}[{subscript([*b_batch, 'kk', 'j'])}]", b.type.dtype)
    out = f"{dest}[{subscript([*names, 'm', 'j'])}]"
    position = _unravel("task", [*batch, m], [*names, "m"])
    stored = rules.store(rules.cast("acc[j]", dtype), dtype)
    body = [
        *position,
        f"for j in range({n}):",
        f"    acc[j] = {rules.cast('0', acc_dtype)}",
        f"for kk in range({outer(k)}):",
        f"    av = {rules.cast(a_value, acc_dtype)}",
        f"    for j in range({n}):",
        f"        acc[j] += av * {rules.cast(b_value, acc_dtype)}",
        f"for j in range({n}):",
        f"    {out} = {stored}",
    ]
    if epilogue is not None:
        body += epilogue([*names, "m"])
    setup = [f"acc = np.empty({n}, {rules.NP_TYPES[acc_dtype]})"]
    lead = Lead(value(batch[0]), 1, rows // value(batch[0])) if batch else Lead(value(m))
    return StageBody(body, rows, value(k * n), setup, lead=lead, sizes=sizes)


def _unravel(flat: str, shape, names) -> list[str]:
    """Lines binding ``names`` to the C-order position ``flat`` in ``shape``."""
    lines, current = [], flat
    for d in reversed(range(1, len(shape))):
        lines += [f"{names[d]} = {current} % {shape[d]}", f"q{d} = {current} // {shape[d]}"]
        current = f"q{d}"
    return [*lines, f"{names[0]} = {current}"]


def row_group(
    rows: int,
    depth: int,
    itemsize: int,
    tile_rows: int,
    tasks: int = TASKS_PER_MATRIX,
    limit: int = ROW_GROUP_BYTES,
) -> int:
    """Rows per task of a product of ``rows`` x ``depth`` A: a multiple of the tile's
    rows, about ``rows / tasks``, its A at most ``limit`` bytes."""
    tiles = -(-rows // tile_rows)
    per_task = -(-tiles // tasks)
    fits = max(1, limit // max(1, depth * itemsize * tile_rows))
    return tile_rows * max(1, min(per_task, fits))


#: B's bytes from which a product of few rows shares its columns out rather than its
#: rows: more than a core's L2 holds (1-2 MiB on today's x86 cores), so that every task
#: reading all of B streams it from L3 or memory again.
WIDE_B_BYTES = 1 << 21


def column_blocks(matrices: int, rows: int, depth: int, k: int, n: int, itemsize: int,
                  cols: int) -> int:  # fmt: skip
    """Blocks of panels the columns of a product read in place are cut into, each
    block one task with all of a matrix's rows (1: the rows are cut, as ``row_group``
    says). Cut when all of A's rows fit one task (``ROW_GROUP_BYTES`` of ``depth``
    values), B is wider than ``WIDE_B_BYTES`` and the matrices alone are fewer than
    ``TASKS_PER_MATRIX``: each task of rows would stream all of B again, and the rows'
    tiles share it out unevenly (16 rows: 12 and 4). ddddocr's older recogniser's
    16 x 1024 x 8210 float32 product (B 34 MB), on this project's 2-core VM under load,
    one process, interleaved, medians of 21: cut by rows 56 ms, cut by columns 34 ms,
    and with B's panels packed (``matmul_packs``) 8.8 ms; NumPy's OpenBLAS 54 ms.

    >>> column_blocks(1, 16, 1024, 1024, 8210, 4, 32), column_blocks(1, 16, 1024, 1024, 512, 4, 32)
    (16, 1)
    """
    if rows * depth * itemsize > ROW_GROUP_BYTES or k * n * itemsize <= WIDE_B_BYTES:
        return 1
    if matrices >= TASKS_PER_MATRIX:
        return 1
    return min(-(-n // cols), -(-TASKS_PER_MATRIX // matrices))


#: A task's rows of A from which its product is computed in blocks of packed operands
#: (``gemm_blocks``: each panel's k rows lie ``n`` values apart in B, at n = 1024
#: float32 4 KiB, so they all fall in the same L1 sets; packed they are one contiguous
#: block). A task packs all of B, so one of fewer rows pays the copies for too little
#: work: on this project's AMD EPYC (12-row tiles, one thread, M x 1024 x 1024), read
#: in place / in blocks, float32 at 12 rows 89 / 47 GFLOP/s, 48 rows 92 / 65, 128 rows
#: 93 / 88, 192 rows 95 / 93; and at 2048 rows 76 / 105, float64 7.8 / 53 (K = 2048:
#: twelve rows of A 16 KiB apart share their L1 set).
PACK_MIN_ROWS = 128


def packs_b(rows: int, k: int, n: int, cols: int) -> bool:
    """Whether a tiled product whose tasks would take ``rows`` rows of A runs in blocks
    of packed operands (``gemm_blocks``): B wider than one panel (else its rows are
    the panel, contiguous), and rows enough.

    >>> packs_b(258, 1024, 1024, 32), packs_b(258, 1024, 32, 32), packs_b(6, 64, 1024, 32)
    (True, False, False)
    """
    return n > cols and rows >= PACK_MIN_ROWS and k > 1


def tile_product(
    dtype: str,
    arrays,
    sizes,
    r0: str,
    r1: str,
    accumulate=False,
    panels=None,
    packed=False,
    offsets: str | None = None,
) -> tuple[list[str], set[str]]:
    """Lines computing rows ``[r0, r1)`` of ``c = a @ b`` by tiles, and the tiles they
    import. ``arrays``: the names of the 2-D ``a``, ``b`` (unit-stride rows) and ``c``;
    ``sizes``: (rows of the whole product, k, n: a number or an expression). ``r0``
    must be a multiple of the tile's rows and ``r1 - r0`` one too, except at the end of
    the product, so the last tile's rows are always ``rows % tile rows``. The operands
    are read in place (a product large enough to gain from copying them runs in
    blocks: ``gemm_blocks``). With ``accumulate``, the product is added to ``c``.
    ``panels``: the names of the first panel of columns and of the one past the last
    to compute (``column_blocks``), else all of them; ``packed``: ``b`` is B's panels
    (``matmul_packs``), each a contiguous (k, tile columns) block; ``offsets``: the name
    of an int64 array, ``b`` then a flat array holding row ``k`` of B at ``offsets[k]``
    (the indirect tiles of ``runtime.llvm.tiles``)."""
    a, b, c = arrays
    m, k, n = sizes
    tile_rows, cols = tile_shape(dtype)
    indirect = offsets is not None
    # A product of few rows reads each panel of B once or twice, and a B larger than
    # the last-level cache from memory: its tiles prefetch B's rows ahead
    # (``runtime.llvm.tiles.PREFETCH_ROWS``). Where B stays in cache, prefetching only
    # adds loads: a 1 x 1024 @ 1024 x 4096 product (16 MiB) ran 0.25 -> 0.32 ms with it.
    known = [value(size) for size in (m, k, n)]
    stream = (
        not indirect
        and all(isinstance(size, int) for size in known)
        and known[0] <= STREAM_ROWS
        and known[1] * known[2] * np.dtype(dtype).itemsize > last_level_cache_bytes()
    )
    tile = tile_name(dtype, tile_rows, cols, accumulate, indirect, stream)
    imports = {tile}
    # The tail's rows: a row count in the code picks its one tile; one read at run time
    # (a batch, a sequence) takes them in tiles of 4, 2 and 1 rows, so that the stage is
    # the same for every count (a new batch size compiles nothing) and the B panel is
    # read at most three times more for the last rows.
    fixed_rows = isinstance(m, int)
    if fixed_rows:
        tails = (
            [tile_name(dtype, m % tile_rows, cols, accumulate, indirect, stream)]
            if m % tile_rows
            else []
        )
    else:
        tails = [
            tile_name(dtype, count, cols, accumulate, indirect, stream)
            for count in tail_rows(tile_rows)
        ]
    imports.update(tails)

    def panel(valid: str) -> list[str]:
        source, column, target = b, "n0", c
        lines = []
        if packed:  # (the panel's own block, and C from its first column)
            source, column, target = "bp", "0", "cp"
            lines += [f"bp = {b}[n0 // {cols}]", f"cp = {c}[:, n0:]"]
        if indirect:
            source = f"{source}, {offsets}"
        lines += [
            f"r = {r0}",
            f"while r + {tile_rows} <= {r1}:",
            f"    {tile}({a}, r, {source}, {column}, {k}, {target}, r, {valid})",
            f"    r += {tile_rows}",
        ]
        if fixed_rows and tails:
            call = f"{tails[0]}({a}, r, {source}, {column}, {k}, {target}, r, {valid})"
            lines += [f"if r < {r1}:", f"    {call}"]
        for tail, rows in zip(() if fixed_rows else tails, tail_rows(tile_rows)):
            call = f"{tail}({a}, r, {source}, {column}, {k}, {target}, r, {valid})"
            lines += [f"if r + {rows} <= {r1}:", f"    {call}", f"    r += {rows}"]
        return lines

    if isinstance(n, str):  # (a count the code computes: only known at run time)
        count = f"({n} + {cols - 1}) // {cols}"
        span = f"{panels[0]}, min({panels[1]}, {count})" if panels else count
        lines = [
            f"for p in range({span}):",
            f"    n0 = p * {cols}",
            f"    valid = min({cols}, {n} - n0)",
            *("    " + line for line in panel("valid")),
        ]
        return lines, imports
    # Panels with every column valid, then the last part-panel, each with its count of
    # columns a constant: the tile's masks fold away (with the count only known at run
    # time, a product 10 columns wide ran 2x slower). With ``n`` read at run time, its
    # remainder stays written in (structure), the count of full panels is read.
    full, rest = n // cols, value(n) % cols
    lines = []
    if value(full):
        span = f"{panels[0]}, min({panels[1]}, {full})" if panels else outer(full)
        lines += [
            f"for p in range({span}):",
            f"    n0 = p * {cols}",
            *("    " + line for line in panel(str(cols))),
        ]
    if rest and panels:  # (the part-panel: the last block's)
        lines += [f"if {panels[1]} > {full}:", f"    n0 = {full * cols}",
                  *("    " + line for line in panel(str(rest)))]  # fmt: skip
    elif rest:
        lines += [f"n0 = {full * cols}", *panel(str(rest))]
    return lines, imports


def _task_shape(node: Call) -> tuple[int, bool, int]:
    """A tiled matmul's rows per task, whether it runs in blocks of packed operands
    (``packs_b``), and the blocks its columns are cut into (``column_blocks``: then a
    task takes all of a matrix's rows)."""
    a, b = node.args
    dtype = node.type.dtype
    mv, kv, nv = (value(d) for d in (a.type.shape[-2], a.type.shape[-1], b.type.shape[-1]))
    tile_rows, cols = tile_shape(dtype)
    itemsize = dtype_info(dtype).itemsize
    depth = min(kv, K_BLOCK) if kv > DEEP_K else kv
    matrices = value(math.prod(node.type.shape[:-2]))
    group = task_rows(mv, matrices, tile_rows)
    if packs_b(min(group, mv), kv, nv, cols):  # (a group may pass the rows)
        return group, True, 1
    blocks = column_blocks(matrices, mv, depth, kv, nv, itemsize, cols)
    return (mv if blocks > 1 else row_group(mv, depth, itemsize, tile_rows)), False, blocks


def packs_panels(node: Call) -> bool:
    """Whether a tiled matmul takes its B, a 2-D constant, as panels packed at lowering
    (``matmul_packs``): when its columns are cut into blocks (``column_blocks``, a B
    wider than a core's L2), the k rows of a panel read in place lie ``n`` values
    apart, each in a page of its own (ddddocr's 8210 columns: 1024 pages a panel)."""
    b = node.args[1]
    constant = isinstance(b, Constant) and b.type.ndim == 2
    return constant and uses_tiles(node) and _task_shape(node)[2] > 1


def matmul_packs(call: Call, index: int) -> np.ndarray | None:
    """What the stage takes in place of operand ``index`` when it is a constant
    (``StageRule.packs``), B packed once, at lowering: for a product in blocks of
    packed operands (``packs_constant_b``), in the panels ``blocked_product`` reads
    (``gemm_blocks.packed_panels``: K blocks of panels); for one cut by its columns
    (``packs_panels``), in panels of the tile's columns, (panels, k, tile columns),
    zero past the last column; else None.

    >>> import nbyoc
    >>> w = nbyoc.const(np.ones((512, 256), np.float32))
    >>> matmul_packs(nbyoc.var("x", (1024, 512)) @ w, 1).shape[:2]  # (K blocks, panels)
    (2, 8)
    >>> matmul_packs(nbyoc.var("x", (8, 512)) @ w, 1) is None  # (read in place)
    True
    >>> a = nbyoc.var("a", (16, 1024))
    >>> b = np.arange(1024 * 1000, dtype=np.float32).reshape(1024, 1000)
    >>> packed = matmul_packs(a @ nbyoc.const(b), 1)
    >>> cols = tile_shape("float32")[1]
    >>> packed.shape == (-(-1000 // cols), 1024, cols)
    True
    >>> bool((packed[1, 2] == b[2, cols : 2 * cols]).all()), bool(packed[-1, 0, 1000 % cols])
    (True, False)
    """
    if index != 1:
        return None
    if packs_constant_b(call):
        return packed_panels(np.asarray(call.args[1].data), call.type.dtype)
    if not packs_panels(call):
        return None
    b = np.asarray(call.args[1].data)
    cols = tile_shape(call.type.dtype)[1]
    k, n = b.shape
    panels = -(-n // cols)
    padded = np.zeros((k, panels * cols), b.dtype)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, panels, cols).transpose(1, 0, 2))


def _tiled_matmul(node, sources, dest, epilogue) -> StageBody:
    a_name, b_name = sources
    a, b = node.args
    dtype = node.type.dtype
    sizes = Sizes()
    mv, kv, nv = a.type.shape[-2], a.type.shape[-1], b.type.shape[-1]
    m, k, n = sizes.dims((mv, kv, nv))
    batch, names, a_batch, b_batch = _batch(node, sizes)
    if epilogue is not None:
        epilogue = epilogue.sized((*batch, m, n))
    cols = tile_shape(dtype)[1]
    depth = min(kv, K_BLOCK) if kv > DEEP_K else kv  # the K a tile's call sums over
    group, blocked, blocks = _task_shape(node)
    if blocks > 1:  # (every block takes all rows, and ``per`` panels; none is empty)
        panel_count = -(-nv // cols)
        per = -(-panel_count // blocks)
        blocks = -(-panel_count // per)
    packed = packs_panels(node)  # (B's stage operand: its panels, ``matmul_packs``)
    groups_value = -(-mv // group)
    groups, group = sizes.dims((groups_value, group))
    deep = depth != kv  # (structure: summed in parts of K_BLOCK, a constant)
    depth = K_BLOCK if deep else k
    if blocks > 1:  # (structure: the tasks' columns cut; their counts read at run time)
        block_count, per = sizes.dims((blocks, per))
        body = _unravel("task", [*batch, groups, block_count], [*names, "g", "cb"])
        body += [f"p0 = cb * {per}", f"p1 = p0 + {per}"]
        panels = ("p0", "p1")
    else:
        body = _unravel("task", [*batch, groups], [*names, "g"])
        panels = None
    body += [f"r0 = g * {group}", f"r1 = min({m}, r0 + {group})"]
    a2 = f"{a_name}[{subscript(a_batch)}]" if a_batch else a_name
    b2 = f"{b_name}[{subscript(b_batch)}]" if b_batch else b_name
    c2 = f"{dest}[{subscript(names)}]" if names else dest
    # (a column count that is a symbol: its panels counted at run time)
    columns = str(n) if b.type.ndim >= 2 and symbolic_size(b, -1) else n
    setup = []
    if blocked:  # (each matrix's views once: the copies index them per value)
        body += [f"a_m = {a2}", f"b_m = {b2}", f"c_m = {c2}"]
        setup, lines, imports = blocked_product(
            dtype, ("a_m", "b_m", "c_m"), (m, k, n), "r0", "r1", group, packs_constant_b(node)
        )
    elif not deep:
        lines, imports = tile_product(
            dtype, (a2, b2, c2), (m, k, columns), "r0", "r1", panels=panels, packed=packed
        )
    else:
        lines, imports = _deep_product(dtype, (a2, b2, c2), (m, k, columns), depth, panels, packed)
    body += lines
    if epilogue is not None and panels:  # (the block's columns of its rows)
        span = (f"p0 * {cols}", f"min({n}, p1 * {cols})")
        body += ["for r in range(r0, r1):",
                 *("    " + line for line in epilogue([*names, "r"], span=span))]  # fmt: skip
    elif epilogue is not None and names:
        body += ["for r in range(r0, r1):", *("    " + line for line in epilogue([*names, "r"]))]
    elif epilogue is not None:
        body += epilogue.rows("r0", "r1")
        setup += epilogue.setup
    tasks = value(math.prod(batch) * groups) * blocks
    first = value(batch[0]) if batch else None
    lead = Lead(first, 1, tasks // first) if batch else Lead(mv, value(group), blocks)
    block_columns = min(nv, value(per) * cols) if panels else nv
    work = value(group * k) * block_columns
    return StageBody(body, tasks, work, setup, imports, lead, sizes)


def packs_constant_b(node: Call) -> bool:
    """Whether a matmul's B is packed once, at lowering (``matmul_packs``): a constant
    2-D B (a layer's weight) of a product that runs in blocks of packed operands,
    which would otherwise copy all of B into panels in every task of every call."""
    b = node.args[1]
    return (isinstance(b, Constant) and b.type.ndim == 2 and uses_tiles(node)
            and _task_shape(node)[1])  # fmt: skip


#: A product deeper than this (K) is summed in parts of K_BLOCK: a task's rows of A
#: over all of K no longer stay in L2 while B's panels pass, nor a panel of B (K x
#: tile columns) in L1 while the rows pass. Measured on this project's Intel VM, one
#: thread, 1024 x 16384 @ 16384 x 256 float32: 281 ms in one part (the panels of B
#: streamed from memory for every six rows), NumPy's OpenBLAS 33 ms.
DEEP_K = 2048
K_BLOCK = 512


def _deep_product(
    dtype, arrays, sizes, depth: int, panels=None, packed=False
) -> tuple[list[str], set[str]]:
    """Lines computing rows ``[r0, r1)`` of ``c = a @ b`` (of its ``panels``, when
    given, ``b`` packed or not: ``tile_product``) over K in parts of ``depth``, and the
    tiles they import: the first part stores its product, the others add theirs
    (accumulating tiles)."""
    a, b, c = arrays
    m, k, n = sizes
    parts = ceil_div(k, depth)
    imports: set[str] = set()

    def part(first: bool) -> list[str]:
        lines, tiles = tile_product(
            dtype, ("a_k", "b_k", c), (m, "kl", n), "r0", "r1", not first, panels, packed
        )
        imports.update(tiles)
        return lines

    rows = "[:, " if packed else "["  # (K: a packed B's second axis)
    head = [f"a_k = {a}[:, 0:{depth}]", f"b_k = {b}{rows}0:{depth}]", f"kl = {depth}"]
    rest = [
        f"k0 = kp * {depth}",
        f"kl = min({k}, k0 + {depth}) - k0",
        f"a_k = {a}[:, k0:k0 + kl]",
        f"b_k = {b}{rows}k0:k0 + kl]",
    ]
    lines = [
        *head,
        *part(True),
        f"for kp in range(1, {parts}):",
        *("    " + line for line in [*rest, *part(False)]),
    ]
    return lines, imports


def _loops_matmul(node: Call, sources, dest: str) -> StageBody:
    """Any matmul as plain loops (integer and bool dtypes, 1-D operands)."""
    a_name, b_name = sources
    a, b = node.args
    out = node.type
    dtype = out.dtype
    acc_dtype = "float64" if dtype_info(dtype).is_float else dtype
    a_shape = (1, *a.type.shape) if a.type.ndim == 1 else a.type.shape
    b_shape = (*b.type.shape, 1) if b.type.ndim == 1 else b.type.shape
    k = a_shape[-1]
    batch = out.shape[: len(out.shape) - (a.type.ndim > 1) - (b.type.ndim > 1)]
    names = [f"i{d}" for d in range(len(batch))]
    a_index = _batch_subscript(batch, names, a_shape) + (["m"] if a.type.ndim > 1 else []) + ["kk"]
    b_index = _batch_subscript(batch, names, b_shape) + ["kk"] + (["n"] if b.type.ndim > 1 else [])
    out_index = names + (["m"] if a.type.ndim > 1 else []) + (["n"] if b.type.ndim > 1 else [])
    a_value = rules.load(f"{a_name}[{subscript(a_index)}]", a.type.dtype)
    b_value = rules.load(f"{b_name}[{subscript(b_index)}]", b.type.dtype)
    update = f"acc += {rules.cast(a_value, acc_dtype)} * {rules.cast(b_value, acc_dtype)}"
    inner = [
        f"acc = {rules.cast('0', acc_dtype)}",
        f"for kk in range({k}):",
        f"    {update}",
        f"{dest}[{subscript(out_index)}] = {rules.store(rules.cast('acc', dtype), dtype)}",
    ]
    shape = [
        *batch,
        *([a_shape[-2]] if a.type.ndim > 1 else []),
        *([b_shape[-1]] if b.type.ndim > 1 else []),
    ]
    loop_names = [*names, *(["m"] if a.type.ndim > 1 else []), *(["n"] if b.type.ndim > 1 else [])]
    if not shape:
        return StageBody(inner)
    body = [f"{loop_names[0]} = task", *loop_nest(shape[1:], inner, loop_names[1:])]
    return StageBody(body, shape[0], math.prod(shape[1:]) * k)
