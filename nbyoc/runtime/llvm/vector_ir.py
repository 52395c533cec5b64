"""The LLVM IR the vector routines (``tap_rows``, ``window_rows``) share: one dtype's
vector types at this machine's width, and the intrinsics every routine calls on them
(fused multiply-add, masked load and store), so that each routine writes only its loop.

>>> v = vectors("float32")
>>> v.suffix == f"v{v.lanes}f32", v.align
(True, 4)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .target import BITS, vector_lanes


@dataclass(frozen=True)
class Vectors:
    """One dtype's vectors as LLVM IR types."""

    lanes: int
    element: Any
    vector: Any
    mask: Any  # (a vector of i1, one per lane)
    align: int  # (bytes of one element: the masked accesses' alignment)
    suffix: str  # (the intrinsics' type suffix: v16f32)
    lane_numbers: Any  # (the i64 vector constant 0, 1, ..., lanes - 1)


def vectors(dtype: str) -> Vectors:
    """``dtype``'s (float32 or float64) vectors at this machine's vector width."""
    from llvmlite import ir

    bits, lanes = BITS[dtype], vector_lanes(dtype)
    element = ir.FloatType() if bits == 32 else ir.DoubleType()
    return Vectors(
        lanes,
        element,
        ir.VectorType(element, lanes),
        ir.VectorType(ir.IntType(1), lanes),
        bits // 8,
        f"v{lanes}f{bits}",
        ir.Constant(ir.VectorType(ir.IntType(64), lanes), list(range(lanes))),
    )


def intrinsics(module, v: Vectors) -> tuple:
    """``(fmuladd, masked_load, masked_store)`` for ``v``'s vectors, declared in
    ``module`` (once: a second call returns the same declarations)."""
    from llvmlite import ir
    from numba.core import cgutils

    i32 = ir.IntType(32)

    def declare(name, result, arguments):
        return cgutils.get_or_insert_function(module, ir.FunctionType(result, arguments), name)

    vector, pointer, suffix = v.vector, v.vector.as_pointer(), v.suffix
    return (
        declare(f"llvm.fmuladd.{suffix}", vector, [vector] * 3),
        declare(f"llvm.masked.load.{suffix}.p0", vector, [pointer, i32, v.mask, vector]),
        declare(f"llvm.masked.store.{suffix}.p0", ir.VoidType(), [vector, pointer, i32, v.mask]),
    )


def element_pointer(context, builder, array_type, array, at):
    """The pointer to element ``at`` of ``array``, a 1-D Numba array of ``array_type``."""
    return builder.gep(context.make_array(array_type)(context, builder, array).data, [at])


def splat(builder, v: Vectors, value):
    """A vector of ``v``'s with ``value`` in every lane."""
    from llvmlite import ir

    i32 = ir.IntType(32)
    undefined = ir.Constant(v.vector, ir.Undefined)
    one = builder.insert_element(undefined, value, ir.Constant(i32, 0))
    every = ir.Constant(ir.VectorType(i32, v.lanes), [0] * v.lanes)
    return builder.shuffle_vector(one, undefined, every)
