"""Rows of a 2-D window's output, every tap summed in vector registers and each output
stored once: the inner loop of the llvm kernels' depthwise convs
(``codegen.llvm.depthwise``).

``window_rows(y, y_at, y_pitch, x, x_at, x_pitch, x_phase, w, w_at, start, n)``
sets, for ``j`` in ``[0, rows)`` and ``t`` in ``[0, n)``,

    y[y_at + j * y_pitch + t] = start + sum over (q0, q1) of
        w[w_at + q0 * k1 + q1] * x[x_at + offset(j, q0, q1) + t]

for 1-D C-contiguous arrays, where ``x`` holds the input in *phases*: with strides
``s0, s1`` and dilations ``d0, d1``, tap ``(q0, q1)`` of output row ``j`` reads phase
``((q0 * d0) % s0) * s1 + (q1 * d1) % s1`` (``x_phase`` elements apart), row ``j +
(q0 * d0) // s0`` of it (``x_pitch`` apart) and column ``(q1 * d1) // s1``. Every
tap is then a contiguous read: a stride costs nothing here (the caller deinterleaves
once, when it copies the input in).

Each block of ``VECTORS`` vectors of each of the ``rows`` rows is an accumulator
that takes the fused multiply-adds of all ``k0 * k1`` taps (independent chains: the
FMA's latency hides behind the others) and is stored once. An input vector that
several rows read (row ``j``'s tap ``q0 + s0 / d0`` is row ``j + 1``'s tap ``q0``)
is loaded once for all of them. Single vectors follow the blocks, and the last ``n
% lanes`` positions go through masked loads and stores, so ``n`` read at run time
costs no scalar remainder.

The caller keeps every read in bounds: nothing is read past the last position a
tap of the last output reaches.

Kernels import them by name: ``window_rows_float32_k3x3_s2x2_d1x1_r2`` sums a 3x3
window of strides 2 and dilations 1 over 2 rows (``target.window_rows_name``).

``deal_row_float32_s2(dst, at0, at1, src, src_at, count)`` fills those phases from
a row: source element ``src_at + k`` (``k < count``) goes to ``dst[at(k % s) + k //
s]``, ``s`` whole vectors loaded at a time, shuffled into their phases, a masked
tail (``s`` of 1 is a copy). A row is tens of elements, much of which LLVM's own
loop runs in its scalar remainder: dealing 58 elements into two phases took 8.0 ns
that way, 5.0 ns here (one core, in L1). Dealing straight from the input, rather than
copying the padded row first and dealing that, took the strided 144-channel layer's
stage from 192 to 139 us on one core.
"""

from __future__ import annotations

import functools
import re

from .vector_ir import element_pointer, intrinsics, vectors
from .vector_ir import splat as splat_vector

_NAME = re.compile(r"window_rows_(float32|float64)_k(\d+)x(\d+)_s(\d+)x(\d+)_d(\d+)x(\d+)_r(\d+)$")
_DEAL = re.compile(r"deal_row_(float32|float64)_s([12])$")
#: The strides ``deal_row`` serves (a larger one's shuffle takes more than two vectors).
DEAL_STRIDES = (1, 2)
#: Independent accumulators a block keeps (``rows`` x vectors): enough chains to cover
#: the FMA's latency. With 4 rows, one 112x112 plane on one Zen 4 core took 2.05, 1.99,
#: 2.02 and 2.12 us with 4, 8, 12 and 16 (level within the noise of a loaded machine;
#: 2 rows: 2.6 to 4.3 us, noisier still).
ACCUMULATORS = 8


def __getattr__(name: str):
    # Rows are built on first use, so importing this module builds nothing.
    match = _NAME.match(name)
    if match is not None:
        return _window_rows(match.group(1), *map(int, match.groups()[1:]))
    match = _DEAL.match(name)
    if match is not None:
        return _deal_row(match.group(1), int(match.group(2)))
    raise AttributeError(name)


def tap_offsets(kernel, strides, dilations, rows: int) -> dict:
    """The input vectors a block reads, each read once: ``(phase, row, column)`` ->
    the ``(output row, tap)`` pairs it feeds (a tap numbered ``q0 * k1 + q1``).

    >>> reads = tap_offsets((3, 3), (1, 1), (1, 1), 2)
    >>> len(reads), reads[(0, 1, 0)]
    (12, [(0, 3), (1, 0)])
    """
    (k0, k1), (s0, s1), (d0, d1) = kernel, strides, dilations
    reads: dict = {}
    for j in range(rows):
        for q0 in range(k0):
            for q1 in range(k1):
                phase = (q0 * d0) % s0 * s1 + (q1 * d1) % s1
                key = (phase, j + q0 * d0 // s0, q1 * d1 // s1)
                reads.setdefault(key, []).append((j, q0 * k1 + q1))
    return reads


@functools.cache
def _window_rows(dtype: str, k0: int, k1: int, s0: int, s1: int, d0: int, d1: int, rows: int):
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    v = vectors(dtype)
    lanes, element, vector = v.lanes, v.element, v.vector
    align, lane_numbers = v.align, v.lane_numbers
    per_row = max(1, ACCUMULATORS // rows)
    i32, i64 = ir.IntType(32), ir.IntType(64)
    reads = sorted(tap_offsets((k0, k1), (s0, s1), (d0, d1), rows).items())

    @intrinsic
    def window_rows(typingctx, y, y_at, y_pitch, x, x_at, x_pitch, x_phase, w, w_at, start, n):
        for array in (y, x, w):
            if not (isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C"):
                return None
        if not isinstance(start, types.Float):
            return None
        signature = types.void(y, y_at, y_pitch, x, x_at, x_pitch, x_phase, w, w_at, start, n)

        def codegen(context, builder, sig, args):
            y_value, y_at, y_pitch, x_value, x_at, x_pitch, x_phase = args[:7]
            w_value, w_at, start, n = args[7:]
            y_at, y_pitch, x_at, x_pitch, x_phase, w_at, n = (
                builder.sext(v, i64) if v.type.width < 64 else v
                for v in (y_at, y_pitch, x_at, x_pitch, x_phase, w_at, n)
            )
            if start.type != element:
                wider = isinstance(start.type, ir.DoubleType)
                start = (builder.fptrunc if wider else builder.fpext)(start, element)
            fmuladd, masked_load, masked_store = intrinsics(builder.module, v)

            y_base = element_pointer(context, builder, sig.args[0], y_value, y_at)
            x_base = element_pointer(context, builder, sig.args[3], x_value, x_at)
            w_base = element_pointer(context, builder, sig.args[7], w_value, w_at)

            def splat(value):
                return splat_vector(builder, v, value)

            def constant(value):
                return ir.Constant(i64, value)

            weights = [
                splat(builder.load(builder.gep(w_base, [constant(q)]))) for q in range(k0 * k1)
            ]
            first = splat(start)
            zero = ir.Constant(vector, [0.0] * lanes)
            # each read's offset from the block's first position, and each row's store's
            offsets = [
                builder.add(
                    builder.add(
                        builder.mul(constant(phase), x_phase), builder.mul(constant(row), x_pitch)
                    ),
                    constant(column),
                )
                for (phase, row, column), _ in reads
            ]
            row_starts = [builder.mul(constant(j), y_pitch) for j in range(rows)]

            def as_vector(pointer):
                return builder.bitcast(pointer, vector.as_pointer())

            def block(t, count, mask):
                """``count`` vectors of every row from position ``t`` (``mask``: one vector,
                only those lanes)."""
                totals = [[first] * count for _ in range(rows)]
                for offset, (_, users) in zip(offsets, reads):
                    at = builder.add(t, offset)
                    for v in range(count):
                        pointer = as_vector(
                            builder.gep(x_base, [builder.add(at, constant(v * lanes))])
                        )
                        if mask is None:
                            value = builder.load(pointer, align=align)
                        else:
                            value = builder.call(
                                masked_load, [pointer, ir.Constant(i32, align), mask, zero]
                            )
                        for j, q in users:
                            totals[j][v] = builder.call(fmuladd, [weights[q], value, totals[j][v]])
                for j in range(rows):
                    at = builder.add(t, row_starts[j])
                    for v in range(count):
                        pointer = as_vector(
                            builder.gep(y_base, [builder.add(at, constant(v * lanes))])
                        )
                        if mask is None:
                            builder.store(totals[j][v], pointer, align=align)
                        else:
                            builder.call(
                                masked_store,
                                [totals[j][v], pointer, ir.Constant(i32, align), mask],
                            )

            width = per_row * lanes
            whole = builder.sdiv(n, constant(width))
            with cgutils.for_range(builder, whole) as loop:
                block(builder.mul(loop.index, constant(width)), per_row, None)
            done = builder.mul(whole, constant(width))
            singles = builder.sdiv(builder.sub(n, done), constant(lanes))
            with cgutils.for_range(builder, singles) as loop:
                block(builder.add(done, builder.mul(loop.index, constant(lanes))), 1, None)
            done = builder.add(done, builder.mul(singles, constant(lanes)))
            rest = builder.sub(n, done)
            with builder.if_then(builder.icmp_signed(">", rest, constant(0))):
                limit = builder.insert_element(
                    ir.Constant(ir.VectorType(i64, lanes), ir.Undefined), rest, ir.Constant(i32, 0)
                )
                limit = builder.shuffle_vector(
                    limit, limit, ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
                )
                block(done, 1, builder.icmp_signed("<", lane_numbers, limit))
            return context.get_dummy_value()

        return signature, codegen

    return window_rows


@functools.cache
def _deal_row(dtype: str, stride: int):
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    v = vectors(dtype)
    lanes, vector = v.lanes, v.vector
    align, lane_numbers = v.align, v.lane_numbers
    i32, i64 = ir.IntType(32), ir.IntType(64)

    def typed(dst, rest):
        src = rest[stride]
        for array in (dst, src):
            if not (isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C"):
                return None
        return types.void(dst, *rest), codegen

    # (one destination offset per phase: Numba's intrinsics take no *args)
    if stride == 1:

        def deal_row(typingctx, dst, at0, src, src_at, count):
            return typed(dst, (at0, src, src_at, count))

    else:

        def deal_row(typingctx, dst, at0, at1, src, src_at, count):
            return typed(dst, (at0, at1, src, src_at, count))

    def codegen(context, builder, sig, args):
        dst_value, src_value = args[0], args[stride + 1]
        ats = [args[1 + a] for a in range(stride)] + [args[stride + 2], args[stride + 3]]
        *ats, src_at, count = (builder.sext(v, i64) if v.type.width < 64 else v for v in ats)
        _, masked_load, masked_store = intrinsics(builder.module, v)
        dst_data = context.make_array(sig.args[0])(context, builder, dst_value).data
        src_data = context.make_array(sig.args[stride + 1])(context, builder, src_value).data
        dst_bases = [builder.gep(dst_data, [at]) for at in ats]
        src_base = builder.gep(src_data, [src_at])
        zero = ir.Constant(vector, [0.0] * lanes)

        def constant(value):
            return ir.Constant(i64, value)

        def pointer(base, at):
            return builder.bitcast(builder.gep(base, [at]), vector.as_pointer())

        def below(limit):
            """The lanes whose number is under ``limit`` (an i64)."""
            splat = builder.insert_element(
                ir.Constant(ir.VectorType(i64, lanes), ir.Undefined), limit,
                ir.Constant(i32, 0),
            )  # fmt: skip
            splat = builder.shuffle_vector(
                splat, splat, ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
            )
            return builder.icmp_signed("<", lane_numbers, splat)

        def block(j, rest):
            """Phase positions ``j`` on: ``lanes`` of each phase, or (``rest``, the
            source elements left, under ``stride * lanes``) as many as there are."""
            read = []
            for k in range(stride):
                at = pointer(src_base, builder.add(builder.mul(j, constant(stride)),
                                                   constant(k * lanes)))  # fmt: skip
                if rest is None:
                    read.append(builder.load(at, align=align))
                else:
                    mask = below(builder.sub(rest, constant(k * lanes)))
                    read.append(
                        builder.call(masked_load, [at, ir.Constant(i32, align), mask, zero])
                    )
            for a in range(stride):
                if stride == 1:
                    value = read[0]
                else:
                    picks = list(range(a, stride * lanes, stride))
                    value = builder.shuffle_vector(
                        read[0], read[1], ir.Constant(ir.VectorType(i32, lanes), picks)
                    )
                at = pointer(dst_bases[a], j)
                if rest is None:
                    builder.store(value, at, align=align)
                else:  # (phase a's elements: those of k = a, a + s, ... under rest)
                    held = builder.sdiv(
                        builder.add(rest, constant(stride - 1 - a)), constant(stride)
                    )
                    builder.call(masked_store, [value, at, ir.Constant(i32, align), below(held)])

        whole = builder.sdiv(count, constant(stride * lanes))
        with cgutils.for_range(builder, whole) as loop:
            block(builder.mul(loop.index, constant(lanes)), None)
        done = builder.mul(whole, constant(lanes))
        rest = builder.sub(count, builder.mul(done, constant(stride)))
        with builder.if_then(builder.icmp_signed(">", rest, constant(0))):
            block(done, rest)
        return context.get_dummy_value()

    return intrinsic(deal_row)
