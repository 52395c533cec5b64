"""Building a driver's table of stage calls, from an llvm kernel; and the views a
kernel rebuilds from one or takes of an array (``strided_view``, ``transposed``).

A parallel run of stages is one call of the table driver (``codegen.llvm.drivers``):
the kernel packs each stage's address and arguments into an int64 array, and the
driver's compiled code depends on nothing but that array's layout. ``table_of``
packs a whole run in one call: an integer takes one slot, a C-contiguous array its
data address and then its extents, a strided view those and then its strides in
bytes, a tuple of integers its values; a stage's entry (``entry_code``) rebuilds each
array by ``view_from_cells`` (``strided_view`` does it in a kernel).

It is an intrinsic, and one call per run: Numba's time for a kernel grows with its
statements, and a detector's 650 stores into its tables (one statement each) took
15 s of its kernel's 49. The layout string states what each item must be, and the
kernel does not compile when an item is not that (an array of another rank, a
strided view): a wrong table would make the entry read past its row.

>>> import numpy as np
>>> from numba import njit
>>> @njit
... def pack(array):
...     return table_of("v a2 t2", (7, array, (3, 5)))
>>> table = pack(np.zeros((2, 4), np.float32))
>>> int(table[0]), table[2:].tolist()
(7, [2, 4, 3, 5])
>>> @njit
... def column(array):
...     table = table_of("s1", (array[:, 1],))
...     return strided_view(table[0], (table[1],), (table[2],), np.float32).sum()
>>> float(column(np.arange(12, dtype=np.float32).reshape(4, 3)))
22.0
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

#: The Numba type of a table.
TABLE = types.Array(types.int64, 1, "C")


def slot_count(kind: str) -> int:
    """The slots an item of layout ``kind`` takes: "v" an integer, "a<n>" a C-contiguous
    array of n axes, "s<n>" any array of n axes, "t<n>" a tuple of n integers, "p" the
    address of a number (which a program's table holds, and no kernel packs).

    >>> slot_count("v"), slot_count("a3"), slot_count("s3"), slot_count("t2"), slot_count("p")
    (1, 4, 7, 2, 1)
    """
    if kind in ("v", "p"):
        return 1
    n = int(kind[1:])
    return {"a": 1 + n, "s": 1 + 2 * n, "t": n}[kind[0]]


def _fits(kind: str, item: types.Type) -> bool:
    if kind == "p":  # (a kernel holds the number, not where it lies)
        return False
    if kind == "v":
        return isinstance(item, types.Integer)
    if kind[0] == "a":
        return isinstance(item, types.Array) and (item.ndim, item.layout) == (int(kind[1:]), "C")
    if kind[0] == "s":
        return isinstance(item, types.Array) and item.ndim == int(kind[1:])
    return (
        kind[0] == "t"
        and isinstance(item, types.BaseTuple)
        and len(item) == int(kind[1:])
        and all(isinstance(t, types.Integer) for t in item)
    )


def _values(context, builder, kind, item_type, value) -> list:
    """The i64 slots of one item."""
    if isinstance(item_type, types.Integer):
        return [context.cast(builder, value, item_type, types.int64)]
    if isinstance(item_type, types.Array):
        view = context.make_array(item_type)(context, builder, value)
        address = builder.ptrtoint(view.data, ir.IntType(64))
        slots = [address, *cgutils.unpack_tuple(builder, view.shape, item_type.ndim)]
        if kind[0] == "s":
            slots += cgutils.unpack_tuple(builder, view.strides, item_type.ndim)
        return slots
    items = cgutils.unpack_tuple(builder, value, len(item_type))
    return [context.cast(builder, v, t, types.int64) for v, t in zip(items, item_type)]


@intrinsic
def table_of(typingctx, layout, items):
    """A new int64 array holding the tuple ``items`` one after another, each as the
    space-separated ``layout`` (a string literal) says (``slot_count``)."""
    if not isinstance(layout, types.StringLiteral) or not isinstance(items, types.BaseTuple):
        return None
    kinds = layout.literal_value.split()
    if len(kinds) != len(items) or not all(map(_fits, kinds, items)):
        return None
    count = sum(map(slot_count, kinds))

    def codegen(context, builder, signature, args):
        size = context.get_constant(types.intp, count)
        table = context.compile_internal(
            builder, lambda n: np.empty(n, np.int64), TABLE(types.intp), [size]
        )
        data = context.make_array(TABLE)(context, builder, table).data
        values = cgutils.unpack_tuple(builder, args[1], len(items))
        slots = [
            s for k, t, v in zip(kinds, items, values) for s in _values(context, builder, k, t, v)
        ]
        for index, value in enumerate(slots):
            builder.store(value, builder.gep(data, [ir.Constant(ir.IntType(64), index)]))
        return table

    return TABLE(layout, items), codegen


def view_from_cells(context, builder, array_type: types.Array, cell):
    """The array of ``array_type`` (layout "C" or "A") whose data address, extents and,
    for layout "A", byte strides are ``cell(0)``, ``cell(1)``, ... (LLVM i64 values), as
    ``table_of`` packed it (also how ``entry_code`` rebuilds a stage's arguments)."""
    n, itemsize = array_type.ndim, np.dtype(str(array_type.dtype)).itemsize
    extents = [cell(1 + d) for d in range(n)]
    if array_type.layout == "A":
        strides = [cell(1 + n + d) for d in range(n)]
    else:
        strides, step = [None] * n, context.get_constant(types.intp, itemsize)
        for d in reversed(range(n)):  # (C order)
            strides[d] = step
            step = builder.mul(step, extents[d])
    return _view(context, builder, array_type, cell(0), extents, strides, itemsize)


def _view(context, builder, array_type, address, extents, strides, itemsize: int):
    """The array of ``array_type`` at integer ``address`` with these extents and byte
    strides (no owner: a view of memory the caller keeps)."""
    view = context.make_array(array_type)(context, builder)
    pointer = context.get_value_type(types.CPointer(array_type.dtype))
    populate_array(
        view,
        data=builder.inttoptr(address, pointer),
        shape=extents,
        strides=strides,
        itemsize=context.get_constant(types.intp, itemsize),
        meminfo=None,
    )
    return view._getvalue()


@intrinsic
def strided_view(typingctx, address, shape, strides, dtype):
    """The array of NumPy scalar type ``dtype`` at ``address`` with extents ``shape`` and
    byte ``strides`` (tuples of one length), as ``table_of`` packed it from a view."""
    if not (isinstance(shape, types.BaseTuple) and isinstance(strides, types.BaseTuple)):
        return None
    if len(shape) != len(strides) or not isinstance(dtype, types.NumberClass):
        return None
    if not all(isinstance(t, types.Integer) for t in (*shape, *strides)):
        return None
    array_type = types.Array(dtype.dtype, len(shape), "A")
    itemsize = np.dtype(str(dtype.dtype)).itemsize

    def codegen(context, builder, signature, args):
        view = context.make_array(array_type)(context, builder)
        pointer = context.get_value_type(types.CPointer(dtype.dtype))
        extents = cgutils.unpack_tuple(builder, args[1], len(shape))
        steps = cgutils.unpack_tuple(builder, args[2], len(strides))
        populate_array(
            view,
            data=builder.inttoptr(args[0], pointer),
            shape=[context.cast(builder, v, t, types.intp) for v, t in zip(extents, shape)],
            strides=[context.cast(builder, v, t, types.intp) for v, t in zip(steps, strides)],
            itemsize=context.get_constant(types.intp, itemsize),
            meminfo=None,
        )
        return view._getvalue()

    return array_type(address, shape, strides, dtype), codegen


@intrinsic
def transposed(typingctx, array, axes):
    """``array`` with its axes in the order ``axes`` (a string literal of axis numbers,
    ``"0 2 1"``): a view, its shape and strides permuted. Numba's own ``transpose(axes)``
    compiles a checking helper the first time a process uses it, 2.2 s, for the view
    of a kernel that is compiled (loaded from the cache, it costs nothing either way).

    >>> from numba import njit
    >>> @njit
    ... def last_first(array):
    ...     return transposed(array, "2 0 1")
    >>> view = last_first(np.arange(24.0).reshape(2, 3, 4))
    >>> view.shape, float(view[3, 1, 2])
    ((4, 2, 3), 23.0)
    """
    if not isinstance(array, types.Array) or not isinstance(axes, types.StringLiteral):
        return None
    order = [int(a) for a in axes.literal_value.split()]
    if sorted(order) != list(range(array.ndim)):
        return None
    result = array.copy(layout="A")

    def codegen(context, builder, signature, args):
        source = context.make_array(array)(context, builder, args[0])
        extents = cgutils.unpack_tuple(builder, source.shape, array.ndim)
        steps = cgutils.unpack_tuple(builder, source.strides, array.ndim)
        view = context.make_array(result)(context, builder)
        populate_array(
            view,
            data=source.data,
            shape=[extents[a] for a in order],
            strides=[steps[a] for a in order],
            itemsize=source.itemsize,
            meminfo=source.meminfo,
            parent=source.parent,
        )
        return impl_ret_borrowed(context, builder, result, view._getvalue())

    return result(array, axes), codegen
