"""A row of a window's taps, summed into an accumulator in vector registers: the inner
loop of the llvm kernels' direct convs (``codegen.llvm.phases``).

``tap_row(y, y_at, x, x_at, w, w_at, n)`` adds, for ``t`` in ``[0, n)``,

    sum over q < taps of  w[w_at + q] * x[x_at + t * stride + q * dilation]

to ``y[y_at + t]``, for 1-D C-contiguous arrays. Each vector of ``y`` is loaded once,
takes the fused multiply-adds of every tap, and is stored once; the last ``n % lanes``
positions go through masked loads and stores, so a short row at a size read at run
time costs no scalar remainder (LLVM's own vectorisation of the same loop, its trip
count unknown, ran a 2x96 depthwise 5x5 conv 1.4x slower than code with the count
written in). A stride of 2 loads two vectors and keeps every other lane; larger
strides, and the masked tail of any stride but 1, gather.

The caller keeps every read in bounds: positions up to ``x_at + (n - 1) * stride +
(taps - 1) * dilation``, and for a stride of 2 one element more (its whole vectors
read the lane after the last one kept).

Kernels import rows by name: ``tap_row_float32_k3_s2_d1`` sums 3 taps of stride 2
and dilation 1 (``target.tap_row_name``).
"""

from __future__ import annotations

import functools
import re

from .vector_ir import element_pointer, intrinsics, vectors
from .vector_ir import splat as splat_vector

_NAME = re.compile(r"tap_row_(float32|float64)_k(\d+)_s(\d+)_d(\d+)$")


def __getattr__(name: str):
    # Rows are built on first use, so importing this module builds nothing.
    match = _NAME.match(name)
    if match is None:
        raise AttributeError(name)
    dtype, taps, stride, dilation = match.group(1), *map(int, match.groups()[1:])
    return _tap_row(dtype, taps, stride, dilation)


@functools.cache
def _tap_row(dtype: str, taps: int, stride: int, dilation: int):
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    v = vectors(dtype)
    lanes, element, vector, mask_type = v.lanes, v.element, v.vector, v.mask
    align, suffix, lane_numbers = v.align, v.suffix, v.lane_numbers
    i32, i64 = ir.IntType(32), ir.IntType(64)
    pointers = ir.VectorType(element.as_pointer(), lanes)

    @intrinsic
    def tap_row(typingctx, y, y_at, x, x_at, w, w_at, n):
        for array in (y, x, w):
            if not (isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C"):
                return None
        signature = types.void(y, y_at, x, x_at, w, w_at, n)

        def codegen(context, builder, sig, args):
            y_value, y_at, x_value, x_at, w_value, w_at, n = args
            y_at, x_at, w_at, n = (
                builder.sext(v, i64) if v.type.width < 64 else v for v in (y_at, x_at, w_at, n)
            )
            module = builder.module
            fmuladd, masked_load, masked_store = intrinsics(module, v)
            gather = cgutils.get_or_insert_function(
                module,
                ir.FunctionType(vector, [pointers, i32, mask_type, vector]),
                f"llvm.masked.gather.{suffix}.v{lanes}p0",
            )

            y_base = element_pointer(context, builder, sig.args[0], y_value, y_at)
            x_base = element_pointer(context, builder, sig.args[2], x_value, x_at)
            w_base = element_pointer(context, builder, sig.args[4], w_value, w_at)

            def splat(value):
                return splat_vector(builder, v, value)

            weights = [
                splat(builder.load(builder.gep(w_base, [ir.Constant(i64, q)]))) for q in range(taps)
            ]
            zero = ir.Constant(vector, [0.0] * lanes)
            everywhere = ir.Constant(mask_type, [1] * lanes)

            def as_vector(pointer):
                return builder.bitcast(pointer, vector.as_pointer())

            def read(t, q, mask):
                """x at t * stride + q * dilation for the lanes t, t + 1, ... (``mask``:
                only those lanes, None: all)."""
                start = builder.add(builder.mul(t, ir.Constant(i64, stride)),
                                    ir.Constant(i64, q * dilation))  # fmt: skip
                pointer = builder.gep(x_base, [start])
                if stride == 1:
                    if mask is None:
                        return builder.load(as_vector(pointer), align=align)
                    return builder.call(masked_load, [as_vector(pointer), ir.Constant(i32, align),
                                                      mask, zero])  # fmt: skip
                if stride == 2 and mask is None:
                    low = builder.load(as_vector(pointer), align=align)
                    high = builder.load(
                        as_vector(builder.gep(pointer, [ir.Constant(i64, lanes)])), align=align
                    )
                    even = ir.Constant(ir.VectorType(i32, lanes), list(range(0, 2 * lanes, 2)))
                    return builder.shuffle_vector(low, high, even)
                # (a vector of addresses: the pointer's integer plus each lane's bytes)
                step = ir.Constant(ir.VectorType(i64, lanes), [stride * align] * lanes)
                at = builder.insert_element(
                    ir.Constant(ir.VectorType(i64, lanes), ir.Undefined),
                    builder.ptrtoint(pointer, i64),
                    ir.Constant(i32, 0),
                )
                at = builder.shuffle_vector(
                    at, at, ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
                )
                addresses = builder.inttoptr(
                    builder.add(at, builder.mul(lane_numbers, step)), pointers
                )
                lanes_read = everywhere if mask is None else mask
                return builder.call(gather, [addresses, ir.Constant(i32, align), lanes_read, zero])

            def block(t, mask):
                pointer = as_vector(builder.gep(y_base, [t]))
                if mask is None:
                    total = builder.load(pointer, align=align)
                else:
                    total = builder.call(
                        masked_load, [pointer, ir.Constant(i32, align), mask, zero]
                    )
                for q in range(taps):
                    total = builder.call(fmuladd, [weights[q], read(t, q, mask), total])
                if mask is None:
                    builder.store(total, pointer, align=align)
                else:
                    builder.call(masked_store, [total, pointer, ir.Constant(i32, align), mask])

            whole = builder.sdiv(n, ir.Constant(i64, lanes))
            with cgutils.for_range(builder, whole) as loop:
                block(builder.mul(loop.index, ir.Constant(i64, lanes)), None)
            done = builder.mul(whole, ir.Constant(i64, lanes))
            rest = builder.sub(n, done)
            with builder.if_then(builder.icmp_signed(">", rest, ir.Constant(i64, 0))):
                limit = builder.insert_element(
                    ir.Constant(ir.VectorType(i64, lanes), ir.Undefined), rest, ir.Constant(i32, 0)
                )
                limit = builder.shuffle_vector(
                    limit, limit, ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
                )
                block(done, builder.icmp_signed("<", lane_numbers, limit))
            return context.get_dummy_value()

        return signature, codegen

    return tap_row
