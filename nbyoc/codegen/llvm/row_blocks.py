"""Row groups over short rows, run a block of rows at a time.

A softmax over 10 classes has rows shorter than one AVX-512 vector: a loop along
such a row never vectorises, so each ``exp`` runs one lane at a time (the MLP's
softmax over 4096 rows of 10 took 288 us, 7 ns an element, where a vectorised
``exp`` costs under 0.3 ns). Rows of fewer than ``SHORT_ROW`` elements therefore
run as *blocks* of rows: each pass of ``rows.RowGroup.passes`` is one flat loop
over the block's elements, which lie next to each other in every full array, so
it vectorises at any row length. What that loop reads per row (a reduction's
result, a row value) or per column (a bias) comes from a buffer laid out like
the block, filled by short loops; the reductions run row by row over the pass's
buffered values (scalar, but a compare or an add each, cheap next to the math).
A block is ``BLOCK_ELEMENTS`` elements, so its buffers stay in L1.

>>> import nbyoc
>>> x = nbyoc.var("x", (4096, 10))
>>> fn = nbyoc.compile(nbyoc.function([x], nbyoc.softmax(x, axis=1)))
>>> "while b0 < end:" in fn.get_source()
True
"""

from __future__ import annotations

from ...ir.nodes import Call, Expr
from ...ir.ops.elementwise import loop_dtypes
from . import rules
from .generic import symbolic_size
from .reductions import reduction_code
from .rows import Bindings, RowFunction, RowGroup, last_reads, row_parameter_types
from .sizes import Sizes

#: Rows shorter than this run as blocks of rows (a row loop at 32 float32 elements
#: vectorises in two AVX-512 steps and is as fast as the blocks).
SHORT_ROW = 32
#: Elements in one block of rows.
BLOCK_ELEMENTS = 1024


def row_block_function(
    group: RowGroup, bound: Bindings, stored: set, literals, addressed: bool
) -> RowFunction:
    """The row function running ``group`` (rows shorter than ``SHORT_ROW``) as blocks
    of rows; the arguments as ``rows.row_group_function``'s, ``bound`` flat views.
    ``addressed``: it is to be called through its address, as a program's stages are
    (with a sizes parameter, if none read)."""
    domain = group.domain
    columns = domain.columns
    block = max(1, BLOCK_ELEMENTS // columns)
    size = block * columns
    sizes = Sizes() if addressed else None
    if addressed and _symbolic_rows(group):
        # (rows whose length is a symbol: read at run time, the buffers the most a block
        # of any length holds, so that the function is the same for every length)
        columns = sizes.dim(columns)
        block, size = BLOCK_ELEMENTS, BLOCK_ELEMENTS
    reductions = set(group.reductions)
    computed, ready = group.passes()
    params, roles, scalars = bound.params, bound.roles, bound.scalars
    helpers: set[str] = set()
    last_read = last_reads(group, computed, ready)
    reduced = {r.args[0] for r in group.reductions}
    position = {n: k for k, n in enumerate(group.nodes)}

    def np_type(node: Expr) -> str:
        return rules.NP_TYPES[rules.value_dtype(node.type.dtype)]

    # Full values another pass reads, or a reduction reads: one block buffer each.
    buffers = {
        n: f"buf{k}"
        for k, n in enumerate(group.nodes)
        if n in group.full and (last_read.get(n, 0) > computed[n] or n in reduced)
    }
    row_arrays = {
        n: f"rv{k}"
        for k, n in enumerate(group.nodes)
        if n not in group.full  # row values and reductions' results
    }
    columns_tiled = {a: f"col{k}" for k, (a, role) in enumerate(roles.items()) if role == "column"}
    spread: dict[Expr, str] = {}  # row-valued operands of full values, laid out like the block
    for node in group.nodes:
        if node in group.full:
            for a in node.args:
                row_valued = a in row_arrays or roles.get(a) == "row"
                if row_valued and a not in spread:
                    spread[a] = f"spread{len(spread)}"

    if isinstance(columns, int):
        body = [f"C = np.uint64({columns})", f"B = np.uint64({block})"]
    else:
        body = [
            f"C = np.uint64({columns})",
            f"B = np.uint64(max(1, {BLOCK_ELEMENTS} // {columns}))",
        ]
    for n, name in buffers.items():
        body.append(f"{name} = np.empty({size}, {np_type(n)})")
    for n, name in row_arrays.items():
        body.append(f"{name} = np.empty({block}, {np_type(n)})")
    for a, name in spread.items():
        body.append(f"{name} = np.empty({size}, {np_type(a)})")
    for a, name in columns_tiled.items():
        body += [
            f"{name} = np.empty({size}, {np_type(a)})",
            "for k in range(B):",
            "    for j in range(C):",
            f"        {name}[k * C + j] = {rules.load(f'{params[a]}[j]', a.type.dtype)}",
        ]
    body += [
        "b0 = np.uint64(lo)",
        "end = np.uint64(hi)",
        "while b0 < end:",
        "    nb = min(B, end - b0)",
        "    base = b0 * C",
    ]
    local: dict[Expr, str] = {}  # this flat loop's full values

    def read(a: Expr, dtype: str, flat: bool) -> str:
        """``a`` in the flat loop over the block's elements (index ``p``) or, not
        ``flat``, in a loop over the block's rows (index ``k``)."""
        block_buffer = (buffers.get(a) or spread.get(a) or columns_tiled.get(a)) if flat else None
        if flat and a in local:
            text = local[a]
        elif block_buffer:
            text = f"{block_buffer}[p]"
        elif not flat and a in row_arrays:
            text = f"{row_arrays[a]}[k]"
        elif a in literals:
            text = literals[a]
        elif a in scalars:
            text = scalars[a]
        else:
            text = rules.load(f"{params[a]}[{'base + p' if flat else 'b0 + k'}]", a.type.dtype)
        return text if a.type.dtype == dtype else rules.cast(text, dtype)

    def expression(node: Call, flat: bool) -> str:
        loop = loop_dtypes(node)
        args = [read(a, d, flat) for a, d in zip(node.args, loop)]
        expression, needed = rules.call_expression(node, args, loop)
        helpers.update(needed)
        return expression

    last = max([*computed.values(), *ready.values(), 0])
    for step in range(last + 1):
        inner: list[str] = []
        row_lines = []  # row values ready in this pass
        for node in group.nodes:
            if node in row_arrays and node not in reductions and ready[node] == step:
                row_lines.append(f"{row_arrays[node]}[k] = {expression(node, False)}")
                if node in stored:
                    value = rules.store(f"{row_arrays[node]}[k]", node.type.dtype)
                    row_lines.append(f"{params[node]}[b0 + k] = {value}")
        if row_lines:
            inner += ["for k in range(nb):", *("    " + line for line in row_lines)]
        full_nodes = [n for n in group.nodes if n in group.full and computed[n] == step]
        read_here = {a for n in full_nodes for a in n.args}  # (a set: compared by identity)
        needed = [a for a in spread if a in read_here]
        for a in needed:
            inner += [
                "for k in range(nb):",
                f"    value = {read(a, a.type.dtype, False)}",
                "    for j in range(C):",
                f"        {spread[a]}[k * C + j] = value",
            ]
        loop_body = []
        for node in full_nodes:
            local[node] = f"v{position[node]}"
            loop_body.append(f"{local[node]} = {expression(node, True)}")
            if node in buffers:
                loop_body.append(f"{buffers[node]}[p] = {local[node]}")
            if node in stored:
                value = rules.store(local[node], node.type.dtype)
                loop_body.append(f"{params[node]}[base + p] = {value}")
        if loop_body:
            inner += ["for p in range(nb * C):", *("    " + line for line in loop_body)]
        local.clear()
        reducing = [r for r in group.reductions if computed[r] == step]
        if reducing:
            inner.append("for k in range(nb):")
        for r in reducing:
            (x,) = r.args
            if x in buffers:
                value = f"{buffers[x]}[k * C + j]"
            else:
                value = rules.load(f"{params[x]}[base + k * C + j]", x.type.dtype)
            acc = f"acc{position[r]}"
            start, update, result = reduction_code(r, value, columns, acc)
            inner += [f"    {start}", "    for j in range(C):", f"        {update}"]
            inner.append(f"    {row_arrays[r]}[k] = {result}")
            if r in stored:
                inner.append(f"    {params[r]}[b0 + k] = {rules.store(result, r.type.dtype)}")
        body += ["    " + line for line in inner]
    body.append("    b0 += B")
    parameters = [*params.values(), *scalars.values()]
    types = row_parameter_types(bound, flat=True)
    return RowFunction(parameters, types, body, sizes, helpers)


def _symbolic_rows(group: RowGroup) -> bool:
    """Whether the group's row length is a symbolic size of the region being lowered."""
    return any(symbolic_size(n, -1) for n in group.nodes if n in group.full and n.type.ndim)
