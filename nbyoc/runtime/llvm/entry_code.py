"""A stage's entry, built as LLVM IR in a few milliseconds instead of compiled by Numba.

A table driver and a program's executor call each stage through its *entry*
(``codegen.llvm.drivers``): a function ``entry(table, at, lo, hi)`` that rebuilds the
stage's arguments from the row at ``table[at]`` (an array from its data address and
extents, and byte strides for a strided view; an int64; a tuple of int64 sizes; a
number from its address) and calls the stage, whose native address is the row's first
slot, over ``[lo, hi)``. An entry depends only on its stage's parameter types, and it
holds no loop and no arithmetic beyond the strides of a C-contiguous array.

As a Numba function, each entry took 0.07-0.18 s to compile, nearly all of it Numba's
own passes (bytecode analysis, type inference, lowering), and a real model needs one
per stage signature: 23 of them, 3.7 s, were a third of a text recogniser's cold
compile. Here the same function is written directly in LLVM IR with Numba's own
data model and calling convention (so its parameters are exactly what
``jit_address.call_at`` passes, and a stage receives exactly the arrays a Numba caller
would build: ``stage_table.view_from_cells``) and compiled by Numba's code generator
(the same optimisation passes and target), in about a hundredth of the time. Its
object code is kept in the cache as any stage module's (``machine_code``), so a later
process loads it without building anything.

An entry is described by its *text* (``entry_text``), which ``kernels`` treats as the
source of a stage module: the text is the entry's cache key (with this module's own),
so one entry serves every kernel, model and process whose stages share a signature.

>>> print(entry_text([("array", "float32", 2), ("value",), ("values", 3)]))
# nbyoc stage entry (nbyoc.runtime.llvm.entry_code)
array float32 2
value
values 3
>>> parse(entry_text([("strided", "uint8", 1), ("scalar", "boolean")]))
[('strided', 'uint8', 1), ('scalar', 'boolean')]
"""

from __future__ import annotations

import functools

#: The first line of an entry's text, which no Python source nbyoc generates starts with.
ENTRY_HEAD = "# nbyoc stage entry (nbyoc.runtime.llvm.entry_code)"
#: The element types an entry passes, by their Numba names.
DTYPES = frozenset(
    ["boolean", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float32", "float64"]
)  # fmt: skip
#: What each kind of item takes after its kind: (dtype, axes), (), (count,), (dtype,).
_FIELDS = {
    "array": ("dtype", "count"),
    "strided": ("dtype", "count"),
    "value": (),
    "values": ("count",),
    "scalar": ("dtype",),
}
#: The name the built function is defined under (``MachineCodeModule.address``).
ENTRY_FUNCTION = "stage"


def entry_text(items: list[tuple]) -> str:
    """The text of the entry of a stage whose parameters before its bounds are ``items``:
    ("array", dtype, axes) a C-contiguous array, ("strided", dtype, axes) any array,
    ("value",) an int64, ("values", n) a tuple of n int64 sizes, ("scalar", dtype) a
    number read from its address (Numba dtype names: ``DTYPES``)."""
    lines = [ENTRY_HEAD]
    for item in items:
        lines.append(" ".join(map(str, item)))
    text = "\n".join(lines)
    parse(text)  # (an item this module cannot build is the caller's bug: say so now)
    return text


def is_entry(source: str) -> bool:
    """Whether a stage module's ``source`` is an entry's text."""
    return source.startswith(ENTRY_HEAD + "\n") or source == ENTRY_HEAD


def parse(text: str) -> list[tuple]:
    """The items of an entry's text (``entry_text``); ValueError for anything else."""
    head, *lines = text.split("\n")
    if head != ENTRY_HEAD:
        raise ValueError(f"internal: not an entry's text: {head!r}")
    items = []
    for line in lines:
        kind, *rest = line.split(" ")
        fields = _FIELDS.get(kind)
        if fields is None or len(rest) != len(fields):
            raise ValueError(f"internal: an entry's item {line!r} is not one it passes")
        item: list = [kind]
        for field, value in zip(fields, rest):
            if field == "dtype" and value in DTYPES:
                item.append(value)
            elif field == "count" and value.isdigit() and int(value) <= 64:
                item.append(int(value))
            else:
                raise ValueError(f"internal: an entry's item {line!r} is not one it passes")
        items.append(tuple(item))
    return items


def build(text: str, symbol: str):
    """The entry of ``text`` compiled by Numba's code generator as the function
    ``symbol`` (a name no other library of this process defines): its code library,
    finalised, with object caching on (``machine_code.save_library`` keeps it)."""
    from numba.core import types
    from numba.core.compiler_lock import global_compiler_lock

    items = parse(text)
    context = _context()
    table_type = types.Array(types.int64, 1, "C")
    outer = [table_type, types.int64, types.int64, types.int64]
    inner = [_numba_type(item) for item in items] + [types.int64, types.int64]
    with global_compiler_lock:
        library = context.codegen().create_library(f"nbyoc_entry:{symbol}")
        module = library.create_ir_module(symbol)
        _define(context, module, symbol, items, outer, inner)
        library.add_ir_module(module)
        library.enable_object_caching()
        library.finalize()
        library.get_pointer_to_function(symbol)  # (makes the object code)
    return library


def _define(context, module, symbol: str, items, outer, inner) -> None:
    """Define ``symbol`` in the LLVM ``module``: the entry of ``items``, of Numba
    signature void(``outer``), calling a function of signature void(``inner``)."""
    from llvmlite import ir
    from numba.core import cgutils, types

    from .stage_table import view_from_cells

    call_conv = context.call_conv
    function = ir.Function(module, call_conv.get_function_type(types.void, outer), symbol)
    call_conv.decorate_function(function, ["table", "at", "lo", "hi"], outer)
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    table, at, lo, hi = call_conv.decode_arguments(builder, outer, function)
    data = context.make_array(outer[0])(context, builder, table).data

    def cells(offset: int):
        base = builder.add(at, ir.Constant(ir.IntType(64), offset))
        return lambda j: builder.load(builder.gep(data, [builder.add(base, _i64(j))]))

    values, offset = [], 1  # (the row's first slot is the stage's address)
    for item, numba_type in zip(items, inner):
        cell = cells(offset)
        kind = item[0]
        if kind in ("array", "strided"):
            values.append(view_from_cells(context, builder, numba_type, cell))
            offset += 1 + item[2] * (1 if kind == "array" else 2)
        elif kind == "value":
            values.append(cell(0))
            offset += 1
        elif kind == "values":
            sizes = [cell(j) for j in range(item[1])]
            values.append(context.make_tuple(builder, numba_type, sizes))
            offset += item[1]
        else:  # ("scalar": the address of one number, in its data form)
            pointer = builder.inttoptr(cell(0), context.get_data_type(numba_type).as_pointer())
            values.append(context.unpack_value(builder, numba_type, pointer))
            offset += 1
    callee_type = call_conv.get_function_type(types.void, inner).as_pointer()
    callee = builder.inttoptr(cells(0)(0), callee_type)
    status, _ = call_conv.call_function(builder, callee, types.void, inner, [*values, lo, hi])
    with cgutils.if_unlikely(builder, status.is_error):
        call_conv.return_status_propagate(builder, status)
    call_conv.return_value(builder, context.get_dummy_value())


def _i64(value: int):
    from llvmlite import ir

    return ir.Constant(ir.IntType(64), value)


def _numba_type(item: tuple):
    """The Numba type of the stage's parameter an item rebuilds."""
    from numba.core import types

    kind = item[0]
    if kind in ("array", "strided"):
        return types.Array(getattr(types, item[1]), item[2], "C" if kind == "array" else "A")
    if kind == "value":
        return types.int64
    if kind == "values":
        return types.UniTuple(types.int64, item[1])
    return getattr(types, item[1])


@functools.cache
def _context():
    """Numba's CPU target context (its data model, calling convention, code generator)."""
    from numba.core.registry import cpu_target

    return cpu_target.target_context
