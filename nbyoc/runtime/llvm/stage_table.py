"""Writing a stage call's arguments into a driver's table, from an llvm kernel.

A parallel run of stages is one call of the table driver (``codegen.llvm.drivers``):
the kernel writes each stage's address and arguments into an int64 array, and the
driver's compiled code depends on nothing but that array's layout. An array
argument takes its data address and its extents (the stage's entry rebuilds it with
``carray``: only C-contiguous arrays are passed this way); a tuple of sizes its values.

Both are intrinsics, not jitted functions: a kernel calls them dozens of times with
literal offsets, and Numba compiles a jitted function again for every distinct
literal argument (a speech CNN's 33 calls took 12 s of its kernel's 19).

>>> import numpy as np
>>> from numba import njit
>>> @njit
... def fill(table, array):
...     put_array(table, 0, array)
...     put_values(table, 3, (7, 9))
>>> table = np.zeros(5, np.int64)
>>> fill(table, np.zeros((2, 3), np.float32))
>>> table[1:].tolist()
[2, 3, 7, 9]
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


def _store(context, builder, table_type, table, at, values):
    """Store the i64 ``values`` at ``table[at:]`` (``at`` an i64)."""
    data = context.make_array(table_type)(context, builder, table).data
    for k, value in enumerate(values):
        index = builder.add(at, ir.Constant(at.type, k))
        builder.store(value, builder.gep(data, [index]))


def _offset(context, builder, at_type, at):
    return context.cast(builder, at, at_type, types.int64)


@intrinsic
def put_array(typingctx, table, at, array):
    """Write ``array``'s data address at ``table[at]`` and its extents after it."""
    if not isinstance(array, types.Array) or not isinstance(at, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        view = context.make_array(array)(context, builder, args[2])
        address = builder.ptrtoint(view.data, ir.IntType(64))
        extents = cgutils.unpack_tuple(builder, view.shape, array.ndim)
        offset = _offset(context, builder, at, args[1])
        _store(context, builder, table, args[0], offset, [address, *extents])
        return context.get_dummy_value()

    return types.none(table, at, array), codegen


@intrinsic
def put_values(typingctx, table, at, values):
    """Write the tuple of integers ``values`` from ``table[at]`` on."""
    if not isinstance(values, types.BaseTuple) or not isinstance(at, types.Integer):
        return None
    if not all(isinstance(t, types.Integer) for t in values):
        return None

    def codegen(context, builder, signature, args):
        items = cgutils.unpack_tuple(builder, args[2], len(values))
        cast = [context.cast(builder, v, t, types.int64) for v, t in zip(items, values)]
        _store(context, builder, table, args[0], _offset(context, builder, at, args[1]), cast)
        return context.get_dummy_value()

    return types.none(table, at, values), codegen
