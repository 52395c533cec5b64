"""Loops for the llvm kernel's reductions and concatenate (the table of every stage
op is ``ops.STAGE_RULES``). Each writes its whole result into a destination array.

A reduction over one contiguous block of axes (any reduction of a 2-D array, a
softmax's row, a batch norm's statistics) sees its operand as ``(outer, reduced,
inner)``. With no inner axes, each outer index reduces one contiguous run of
values: parallel over the outer indices, vectorised along the run (reassociable
steps, ``reductions``). With inner axes, values next to each other in
memory belong to different results: each task takes a block of ``COLUMN_BLOCK``
inner indices and adds the reduced rows into a block of accumulators, one lane
per result, which vectorises without reordering anything. Other axis sets keep
plain loops. (Reductions over trailing axes with elementwise work around them are
fused into row groups, ``rows``, before they get here.)

What each reduction accumulates in, starts from and steps by is one table,
``reductions.REDUCTIONS``, shared with the row groups.
"""

from __future__ import annotations

import math

from ...ir.dtypes import dtype_info
from ...ir.nodes import Call
from . import rules
from .loops import loop_nest, parallel_first
from .loops import outer as _opaque_bound
from .loops import subscript as _subscript
from .reductions import accumulator_dtype, reduction_code
from .sizes import Sizes
from .stages import Lead, StageBody

#: Inner indices per task of a reduction over middle axes: the accumulators of one
#: block (2 KiB of float64) stay in L1 while the reduced rows stream past.
COLUMN_BLOCK = 256


def axis_blocks(shape: tuple[int, ...], axes) -> tuple[int, int, int] | None:
    """(outer, reduced, inner) sizes when ``axes`` are one contiguous run of ``shape``'s
    axes, else None.

    >>> axis_blocks((2, 3, 4, 5), (1, 2)), axis_blocks((2, 3, 4), (0, 2))
    ((2, 12, 5), None)
    >>> axis_blocks((1, 6, 256, 1), (0, 2, 3))
    (6, 256, 1)
    """

    def contiguous(run) -> bool:
        return bool(run) and run == list(range(run[0], run[-1] + 1))

    # (an axis of one element, reduced or not, is the same layout: left out when that
    # makes a run, so that a reduction over (0, 2, 3) of (1, n, 256, 1) is one over rows)
    axes = sorted(axes)
    if not contiguous(axes):
        axes = [a for a in axes if shape[a] != 1]
        if not contiguous(axes):
            return None
    return (
        math.prod(shape[: axes[0]]),
        math.prod(shape[axes[0] : axes[-1] + 1]),
        math.prod(shape[axes[-1] + 1 :]),
    )


#: Why a column reduction reads each reduced row of its block through a 1-D slice: with
#: the 3-D index ``source[o, k, first_column + c]`` in the loop over ``c``, LLVM kept
#: the loop scalar. Measured (loaded, AMD EPYC, one task of 256 columns, float32 into
#: float64): magika's mean over 384 rows of 512 columns 105 us indexed, 19 us sliced.
ROW_NOTE = "(a slice: the indexed loop stayed scalar)"


def _block_views(source: str, dest: str, blocks) -> list[str]:
    """The operand as (outer, reduced, inner), ``<source>_blocks``, and the result as
    (outer, inner), ``<dest>_reduced``: names derived from the arrays' (``scope``), a
    role per rank, so that a scratch view that is one reduction's result and another's
    operand gives two names, not one name to arrays of two ranks."""
    outer, reduced, inner = blocks
    return [
        f"{source}_blocks = {source}.reshape(({outer}, {reduced}, {inner}))",
        f"{dest}_reduced = {dest}.reshape(({outer}, {inner}))",
    ]


def _column_tasks(outer: int, inner: int, loop: str) -> list[str]:
    """The loop over tasks of COLUMN_BLOCK inner indices: binds ``o``, the first inner
    index ``first_column`` and the task's ``width``. (It was ``c0``, the name of the
    kernel's first constant, which it then shadowed; ``scope.Scope.check`` now refuses a
    body binding a name of the kernel's families that its scope did not make.)"""
    per_outer = -(-inner // COLUMN_BLOCK)
    tasks = outer * per_outer
    loop = "range" if tasks == 1 else loop  # (a prange over one task: a function for nothing)
    return [
        f"for task in {loop}({tasks}):",
        f"    o = task // {per_outer}",
        f"    first_column = (task % {per_outer}) * {COLUMN_BLOCK}",
        f"    width = min({COLUMN_BLOCK}, {inner} - first_column)",
    ]


def _blocked_reduction(node, source, dest, parallel, blocks) -> list[str]:
    """A reduction over one block of axes (see the module docstring)."""
    outer, reduced, inner = blocks
    in_dtype = node.args[0].type.dtype
    lines = _block_views(source, dest, blocks)
    loop = "prange" if parallel else "range"
    if inner == 1:
        value = rules.load(f"{source}_blocks[o, k, 0]", in_dtype)
        start, update, result = reduction_code(node, value, reduced, "acc")
        store = rules.store(result, node.type.dtype)
        return [
            *lines,
            f"for o in {loop}({outer}):",
            f"    {start}",
            f"    for k in range({reduced}):",
            f"        {update}",
            f"    {dest}_reduced[o, 0] = {store}",
        ]
    value = rules.load(f"{source}_row[c]", in_dtype)
    start, update, result = reduction_code(node, value, reduced, "acc[c]")
    acc_type = rules.NP_TYPES[accumulator_dtype(node)]
    return [
        *lines,
        *_column_tasks(outer, inner, loop),
        f"    acc = np.empty({COLUMN_BLOCK}, {acc_type})",
        "    for c in range(width):",
        f"        {start}",
        f"    for k in range({_opaque_bound(reduced)}):",
        f"        {source}_row = {source}_blocks[o, k, first_column:first_column + width]",
        "        for c in range(width):",
        f"            {update}",
        "    for c in range(width):",
        f"        {dest}_reduced[o, first_column + c] = {rules.store(result, node.type.dtype)}",
    ]


def column_reduction(node: Call) -> StageBody | None:
    """A reduction over middle axes (``(outer, reduced, inner)`` blocks with inner axes)
    as a stage function over parameters ``a0`` (the operand, C-contiguous) and ``a1``
    (the result), one task per block of COLUMN_BLOCK inner indices of one outer index,
    every size read at run time: one function serves every such reduction of that op,
    rank and dtype, and a driver runs it, so the kernel keeps no parallel loop for it
    (a detector's two, each compiled with the whole kernel's parallel passes, took 40%
    of its kernel's compile). None for another reduction.

    >>> import nbyoc
    >>> body = column_reduction(nbyoc.sum(nbyoc.var("x", (2, 3, 600)), axis=1))
    >>> body.tasks, body.sizes.argument()
    (6, '(2, 3, 600, 3)')
    """
    (x,) = node.args
    blocks = axis_blocks(x.type.shape, node.attrs["axis"])
    if blocks is None or x.type.size == 0:
        return None
    if blocks[2] == 1:
        return _row_reduction(node, blocks[0], blocks[1])
    outer, reduced, inner = blocks
    per_outer = -(-inner // COLUMN_BLOCK)
    sizes = Sizes()
    outer_size, reduced_size, inner_size, per = sizes.dims((outer, reduced, inner, per_outer))
    value = rules.load("row[c]", x.type.dtype)
    start, update, result = reduction_code(node, value, str(reduced_size), "acc[c]")
    acc_type = rules.NP_TYPES[accumulator_dtype(node)]
    return StageBody(
        [
            f"o = task // {per}",
            f"first_column = (task % {per}) * {COLUMN_BLOCK}",
            f"width = min({COLUMN_BLOCK}, {inner_size} - first_column)",
            f"acc = np.empty({COLUMN_BLOCK}, {acc_type})",
            "for c in range(width):",
            f"    {start}",
            f"for k in range({reduced_size}):",
            f"    row = source[o, k, first_column:first_column + width]  # {ROW_NOTE}",
            "    for c in range(width):",
            f"        {update}",
            "for c in range(width):",
            f"    result[o, first_column + c] = {rules.store(result, node.type.dtype)}",
        ],
        outer * per_outer,
        reduced * COLUMN_BLOCK,
        setup=[
            f"source = a0.reshape(({outer_size}, {reduced_size}, {inner_size}))",
            f"result = a1.reshape(({outer_size}, {inner_size}))",
        ],
        sizes=sizes,
    )


def _row_reduction(node: Call, outer, reduced) -> StageBody:
    """A reduction over the last axes (``(outer, reduced)`` rows) as a stage function of
    one task per row, its sizes read at run time (as ``column_reduction``'s): one
    function serves every size, so a symbolic batch keeps one template (``templates``).

    >>> import nbyoc
    >>> body = column_reduction(nbyoc.mean(nbyoc.var("x", (4, 1, 400)), axis=(1, 2)))
    >>> body.tasks, body.sizes.argument()
    (4, '(4, 400)')
    """
    sizes = Sizes()
    outer_size, reduced_size = sizes.dims((outer, reduced))
    (x,) = node.args
    value = rules.load("source[o, k]", x.type.dtype)
    start, update, result = reduction_code(node, value, str(reduced_size), "acc")
    return StageBody(
        [
            "o = task",
            start,
            f"for k in range({reduced_size}):",
            f"    {update}",
            f"result[o] = {rules.store(result, node.type.dtype)}",
        ],
        outer,
        reduced,
        setup=[
            f"source = a0.reshape(({outer_size}, {reduced_size}))",
            f"result = a1.reshape(({outer_size},))",
        ],
        sizes=sizes,
    )


def _reduction_loops(node, shape, reduced, start, update, store, dest, parallel) -> list[str]:
    """Loops over the kept axes (the outermost may be a prange) around: ``start``, loops
    over the ``reduced`` axes doing ``update``, then ``dest[...] = store``."""
    kept = [d for d in range(len(shape)) if d not in reduced]
    if node.attrs["keepdims"]:
        out_index = ["0" if d in reduced else f"i{d}" for d in range(len(shape))]
    else:
        out_index = [f"i{d}" for d in kept]
    inner = [
        *start,
        *loop_nest([shape[d] for d in reduced], update, [f"i{d}" for d in reduced]),
        f"{dest}[{_subscript(out_index)}] = {rules.store(store, node.type.dtype)}",
    ]
    names, lead = [f"i{d}" for d in kept], parallel_first(parallel and bool(kept))
    return loop_nest([shape[d] for d in kept], inner, names, lead)


def _blocked_arg(node, source, dest, parallel, blocks) -> list[str]:
    """argmax / argmin over one block of axes. Along a contiguous run: the extreme by a
    vectorised ``maximum``/``minimum`` pass (NaN wins), then the first index holding it
    (or the first NaN) by a scan that stops there. Across inner indices: one lane per
    result keeps its best value and index."""
    outer, reduced, inner = blocks
    dtype = node.args[0].type.dtype
    value_dtype = rules.value_dtype(dtype)
    is_max = node.op.name == "argmax"
    lines = _block_views(source, dest, blocks)
    loop = "prange" if parallel else "range"
    if inner == 1:
        value = rules.load(f"{source}_blocks[o, k, 0]", dtype)
        if dtype_info(value_dtype).is_float:
            step = f"{'maximum' if is_max else 'minimum'}(best, {value})"
            found = "v == best or (best != best and v != v)"
        else:
            step = f"{'max' if is_max else 'min'}(best, {value})"
            found = "v == best"
        first = rules.load(f"{source}_blocks[o, 0, 0]", dtype)
        return [
            *lines,
            f"for o in {loop}({outer}):",
            f"    best = {first}",
            f"    for k in range(1, {reduced}):",
            f"        best = {step}",
            "    index = 0",
            f"    for k in range({reduced}):",
            f"        v = {value}",
            f"        if {found}:",
            "            index = k",
            "            break",
            f"    {dest}_reduced[o, 0] = np.int64(index)",
        ]
    value = rules.load(f"{source}_row[c]", dtype)
    first = rules.load(f"{source}_blocks[o, 0, first_column + c]", dtype)
    better = ">" if is_max else "<"
    return [
        *lines,
        *_column_tasks(outer, inner, loop),
        f"    best = np.empty({COLUMN_BLOCK}, {rules.NP_TYPES[value_dtype]})",
        f"    index = np.zeros({COLUMN_BLOCK}, np.int64)",
        "    for c in range(width):",
        f"        best[c] = {first}",
        f"    for k in range(1, {_opaque_bound(reduced)}):",
        f"        {source}_row = {source}_blocks[o, k, first_column:first_column + width]",
        "        for c in range(width):",
        f"            v = {value}",
        "            b = best[c]",
        f"            take = (v {better} b or v != v) and b == b",
        "            best[c] = v if take else b",
        "            index[c] = k if take else index[c]",
        "    for c in range(width):",
        f"        {dest}_reduced[o, first_column + c] = index[c]",
    ]


def reduce_stage(node: Call, sources: list[str], dest: str, parallel: bool) -> list[str]:
    """sum / mean / max / min / prod of the operand over the node's axes into ``dest``
    (the operand contiguous: ``emit`` copies a strided one first)."""
    (source,) = sources
    (x,) = node.args
    shape = x.type.shape
    blocks = axis_blocks(shape, node.attrs["axis"])
    if blocks is not None and x.type.size > 0:
        return _blocked_reduction(node, source, dest, parallel, blocks)
    axes = set(node.attrs["axis"])
    reduced = [d for d in range(len(shape)) if d in axes]
    value = rules.load(
        f"{source}[{_subscript([f'i{d}' for d in range(len(shape))])}]", x.type.dtype
    )
    count = math.prod(shape[d] for d in reduced)
    start, update, result = reduction_code(node, value, count, "acc")
    return _reduction_loops(node, shape, reduced, [start], [update], result, dest, parallel)


def arg_stage(node: Call, sources: list[str], dest: str, parallel: bool) -> list[str]:
    """argmax / argmin: the first extreme's index along the axis (or of the flattened
    operand); the first NaN wins, as in NumPy."""
    (source,) = sources
    shape = node.args[0].type.shape
    axis = node.attrs["axis"]
    reduced = list(range(len(shape))) if axis is None else [axis]
    blocks = axis_blocks(shape, reduced)
    if blocks is not None and node.args[0].type.size > 0:
        return _blocked_arg(node, source, dest, parallel, blocks)
    better = ">" if node.op.name == "argmax" else "<"
    dtype = node.args[0].type.dtype
    value = rules.load(f"{source}[{_subscript([f'i{d}' for d in range(len(shape))])}]", dtype)
    # The flat position of the element within the reduced axes, in C order (0 when there
    # are none: a 0-d operand's only element).
    strides = [math.prod(shape[e] for e in reduced if e > d) for d in reduced]
    terms = [f"i{d} * {s}" if s != 1 else f"i{d}" for d, s in zip(reduced, strides)]
    position = " + ".join(terms) or "0"
    first_index = _subscript(["0" if d in reduced else f"i{d}" for d in range(len(shape))])
    first = rules.load(f"{source}[{first_index}]", dtype)
    update = [
        "v = " + value,
        f"if best == best and (v {better} best or v != v):",
        "    best = v",
        f"    index = {position}",
    ]
    start = [f"best = {first}", "index = 0"]
    return _reduction_loops(node, shape, reduced, start, update, "np.int64(index)", dest, parallel)


def concatenate_stage(
    node: Call, sources: list[str], dest: str, parallel: bool, contiguous: list[bool], table: str
) -> tuple[list[str], dict[str, list[tuple[int, int]]]]:
    """Copy each operand into its slice of ``dest`` along the node's axis, and the tables
    the copy reads (name -> rows, module constants: ``table_source``).

    The code does not grow with the number of operands: the distinct operands of one
    dtype and layout (``contiguous``) are one tuple, and one loop walks a table of
    (operand, offset) rows, one per position, copying that operand there (a loop nest
    per operand made a concatenate of 600 take 108 s to compile). Strided operands are
    all viewed with Numba's layout "A" (``[::1]``): a tuple is indexed at run time only
    when its arrays share one type.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (2, 3))
    >>> lines, tables = concatenate_stage(
    ...     nbyoc.concatenate([x, x, x], axis=1), ["in0"] * 3, "out0", False, [True] * 3, "cat"
    ... )
    >>> tables
    {'cat_0': [(0, 0), (0, 3), (0, 6)]}
    >>> print("\\n".join(lines))
    cat_0_parts = (in0,)
    for cat_0_position in range(3):
        cat_0_part = cat_0_parts[cat_0[cat_0_position, 0]]
        cat_0_offset = cat_0[cat_0_position, 1]
        for i0 in range(opaque(2)):
            for i1 in range(cat_0_part.shape[1]):
                out0[i0, i1 + cat_0_offset] = cat_0_part[i0, i1]
    """
    axis = node.attrs["axis"]
    dtype = node.type.dtype
    ndim = node.type.ndim
    members: dict[tuple[str, bool], list[str]] = {}  # (dtype, contiguous) -> its arrays
    rows: dict[tuple[str, bool], list[tuple[int, int]]] = {}
    offset = 0
    for arg, source, dense in zip(node.args, sources, contiguous):
        key = (arg.type.dtype, dense)
        arrays = members.setdefault(key, [])
        if source not in arrays:
            arrays.append(source)
        rows.setdefault(key, []).append((arrays.index(source), offset))
        offset += arg.type.shape[axis]
    lines, tables = [], {}
    names = [f"i{d}" for d in range(ndim)]
    for c, ((part_dtype, dense), arrays) in enumerate(members.items()):
        name = f"{table}_{c}"  # (and its variables': unique in the kernel)
        part, at, position = f"{name}_part", f"{name}_offset", f"{name}_position"
        tables[name] = rows[(part_dtype, dense)]
        views = arrays if dense else [f"{a}[::1]" for a in arrays]
        out_index = [f"i{d} + {at}" if d == axis else f"i{d}" for d in range(ndim)]
        element = f"{part}[{_subscript(names)}]"
        if part_dtype != dtype:  # same dtype: the stored form is copied as it is
            element = rules.store(rules.cast(rules.load(element, part_dtype), dtype), dtype)
        shape = [f"{part}.shape[{axis}]" if d == axis else n for d, n in enumerate(node.type.shape)]
        line = f"{dest}[{_subscript(out_index)}] = {element}"
        copy = loop_nest(shape, [line], names, parallel_first(parallel))
        lines += [
            f"{name}_parts = ({', '.join(views)},)",
            f"for {position} in range({len(tables[name])}):",
            f"    {part} = {name}_parts[{name}[{position}, 0]]",
            f"    {at} = {name}[{position}, 1]",
            *("    " + line for line in copy),
        ]
    return lines, tables


#: A concatenate of at most this many operands copies each one with a stage
#: function of its own (``concatenate_part``, shared by every concatenate of that rank
#: and dtype), all of them in one parallel run; more operands, or mixed dtypes, take
#: ``concatenate_stage``'s table, whose code does not grow with their number. In a
#: program every count copies by parts: there a copy is a row of the program's table,
#: not code to compile, and the table loop is a statement no program holds (a stack of
#: 60 rows kept its kernel compiled for it: 26 s).
PART_COPIES_MAX = 8


def copies_parts(node: Call, in_program: bool = False) -> bool:
    """Whether ``node`` (a concatenate) copies its operands by ``concatenate_part``
    (``in_program``: it is lowered in a program, whatever its operand count).

    >>> import nbyoc
    >>> x = nbyoc.var("x", (1, 4))
    >>> rows = nbyoc.concatenate([x] * 9, axis=0)
    >>> copies_parts(rows), copies_parts(rows, in_program=True)
    (False, True)
    """
    same = all(a.type.dtype == node.type.dtype for a in node.args)
    few = len(node.args) <= PART_COPIES_MAX or in_program
    return same and few and node.type.size > 0


def concatenate_part(node: Call, part: int, offset: int) -> StageBody:
    """Operand ``part`` of concatenate ``node`` copied into its slice of the result,
    which starts at ``offset`` along the axis: a stage function over parameters ``a0``
    (the operand, C-contiguous) and ``a1`` (the result), both seen as rows of
    ``outer`` = the product of the sizes before the axis. Every size is read at run
    time, so one function serves every concatenate of that rank and dtype; task ``t``
    copies row ``t`` (a run of the operand's contiguous elements).

    >>> import nbyoc
    >>> x, y = nbyoc.var("x", (2, 3, 4)), nbyoc.var("y", (2, 5, 4))
    >>> body = concatenate_part(nbyoc.concatenate([x, y], axis=1), 1, 3)
    >>> body.setup
    ['part = a0.reshape((z0, z1))', 'whole = a1.reshape((z0, z2))']
    >>> body.lines, body.tasks, body.sizes.argument()
    (['for j in range(z1):', '    whole[task, z3 + j] = part[task, j]'], 2, '(2, 20, 32, 12)')
    """
    axis = node.attrs["axis"]
    shape, operand = node.type.shape, node.args[part].type.shape
    inner = math.prod(shape[axis + 1 :])
    sizes = Sizes()
    outer, run, row, start = sizes.dims(
        (
            math.prod(shape[:axis]),
            math.prod(operand[axis:]),
            math.prod(shape[axis:]),
            offset * inner,
        )
    )
    return StageBody(
        [f"for j in range({run}):", f"    whole[task, {start} + j] = part[task, j]"],
        outer.value,
        run.value,
        setup=[f"part = a0.reshape(({outer}, {run}))", f"whole = a1.reshape(({outer}, {row}))"],
        lead=Lead.spread(shape[0], outer.value) if axis > 0 else None,
        sizes=sizes,
    )


def table_source(name: str, rows: list[tuple[int, int]]) -> str:
    """The kernel module's definition of a table of (operand, offset) rows: a global
    array, which Numba compiles in as a constant.

    >>> table_source("cat_0", [(0, 0), (1, 3)])
    'cat_0 = np.array((0, 0, 1, 3), np.int64).reshape((2, 2))'
    """
    flat = ", ".join(str(v) for row in rows for v in row)
    return f"{name} = np.array(({flat}), np.int64).reshape(({len(rows)}, 2))"
