"""Writing finished rows to memory with non-temporal (streaming) stores.

An ordinary store to a line not in cache first reads the line from memory (read for
ownership), then writes it back when it is evicted: a kernel writing a large result
moves its bytes twice, and the result pushes its inputs out of the cache. A
non-temporal store writes whole lines straight to memory: no read, no cache space.
glibc's ``memcpy`` does the same for copies larger than its ``non_temporal_threshold``.
Measured on this project's 2-core Xeon: a 64 MiB float32 copy 4.6 ms with ordinary
stores, 2.2 ms streaming; softmax over 4096 x 4096 float32 5.3 -> 4.7 ms (ONNX
Runtime: 5.7). When the data fits in the cache it is the other way round (softmax at
2048 x 2048: 1.09 -> 1.29 ms), so the llvm lowering streams only a row group whose
arrays outgrow its share of the last-level cache (``runtime.llvm.target.stream_min_bytes``).

A row is computed into a row buffer (in L1), then ``stream_row`` copies it: ordinary
stores up to the first 64-byte boundary of the destination, 64-byte vector stores
marked ``!nontemporal`` (``vmovntdq``; two or four of them on narrower vector units,
``stnp`` on AArch64) for the aligned middle, ordinary stores for the rest. Every store
is inside ``array[row, :]``. Streaming stores are weakly ordered: a thread calls
``store_fence`` (a sequentially consistent fence: ``mfence``) after its last one,
before another thread may read the rows.

Flat elementwise stages do the same a block of elements at a time (``stream_run``;
the block's length is ``codegen.llvm.stages.STREAM_BLOCK``), under the rule of
``runtime.llvm.target.writes_streaming``. Whole kernels, on the Xeon at 4096 x 4096
float32, ordinary stores then streaming: layer norm 7.0 -> 5.5 ms, RMS norm 6.2 -> 3.9,
softmax 5.5 -> 5.2, the reference graph ``((a + b) - c) * d`` 11.3 -> 9.9; and at
2048 x 2048, where the arrays fit in the cache, the reference graph and the diamond
``t = a * b; (t + c) * (t - d)`` 2.0 -> 1.74 ms (a light stage reading twice what it
writes streams from half the threshold).
Generated kernels import these by name (``from nbyoc.runtime.llvm.stream import
stream_row, stream_run, store_fence``).

>>> import numpy as np
>>> out, row = np.zeros((2, 40), np.float32), np.arange(40, dtype=np.float32)
>>> stream_row(out, 1, row)
>>> store_fence()
>>> bool((out[1] == row).all()), bool((out[0] == 0).all())
(True, True)
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: Bytes per streaming store: a cache line, and an AVX-512 vector.
LINE_BYTES = 64


@intrinsic
def _address(typingctx, array, index):
    """The address of ``array[index]`` (a C-contiguous 1-D array) as an integer."""
    if not (isinstance(array, types.Array) and array.ndim == 1):
        return None

    def codegen(context, builder, signature, args):
        view = context.make_array(signature.args[0])(context, builder, args[0])
        index = context.cast(builder, args[1], signature.args[1], types.intp)
        pointer = cgutils.get_item_pointer(
            context, builder, signature.args[0], view, [index], wraparound=False
        )
        return builder.ptrtoint(pointer, ir.IntType(64))

    return types.uint64(array, index), codegen


@intrinsic
def _stream_lines(typingctx, array, index, source, start, lines):
    """Copy ``lines`` cache lines from ``source[start:]`` to ``array[index:]`` (64-byte
    aligned there; both 1-D) with non-temporal stores."""
    if not (isinstance(array, types.Array) and isinstance(source, types.Array)):
        return None

    def codegen(context, builder, signature, args):
        array_type, _, source_type, _, _ = signature.args
        i64, byte = ir.IntType(64), ir.IntType(8).as_pointer()
        destination = context.make_array(array_type)(context, builder, args[0])
        origin = context.make_array(source_type)(context, builder, args[2])
        index, start, lines = (
            context.cast(builder, args[k], signature.args[k], types.intp) for k in (1, 3, 4)
        )
        target = cgutils.get_item_pointer(
            context, builder, array_type, destination, [index], wraparound=False
        )
        first = cgutils.get_item_pointer(
            context, builder, source_type, origin, [start], wraparound=False
        )
        target, first = builder.bitcast(target, byte), builder.bitcast(first, byte)
        line = ir.VectorType(ir.IntType(8), LINE_BYTES)
        nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        total = builder.mul(lines, ir.Constant(i64, LINE_BYTES))
        step = ir.Constant(i64, LINE_BYTES)
        with cgutils.for_range_slice(builder, ir.Constant(i64, 0), total, step) as (offset, _):
            value = builder.load(
                builder.bitcast(builder.gep(first, [offset]), line.as_pointer()), align=1
            )
            store = builder.store(
                value,
                builder.bitcast(builder.gep(target, [offset]), line.as_pointer()),
                align=LINE_BYTES,
            )
            store.set_metadata("nontemporal", nontemporal)
        return context.get_dummy_value()

    return types.void(array, index, source, start, lines), codegen


@intrinsic
def _fence(typingctx):
    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@njit(nogil=True, forceinline=True)
def stream_run(array, start, values, count):
    """``array[start:start + count] = values[:count]`` (``array`` C-contiguous 1-D,
    ``values`` of its dtype), the aligned middle with non-temporal stores."""
    size = array.itemsize
    misaligned = _address(array, start) % LINE_BYTES
    if misaligned % size:  # an unaligned array: no element starts on a line boundary
        for j in range(count):
            array[start + j] = values[j]
        return
    # The elements before the first line boundary.
    head = min(((LINE_BYTES - misaligned) % LINE_BYTES) // size, count)
    for j in range(head):
        array[start + j] = values[j]
    per_line = LINE_BYTES // size
    lines = (count - head) // per_line
    if lines > 0:
        _stream_lines(array, start + head, values, head, lines)
    for j in range(head + lines * per_line, count):
        array[start + j] = values[j]


@njit(nogil=True, forceinline=True)
def stream_row(array, row, values):
    """``array[row, :] = values`` (``array`` C-contiguous 2-D, ``values`` 1-D of the
    row's length and dtype), the aligned middle with non-temporal stores."""
    stream_run(array[row], 0, values, array.shape[1])


@njit(nogil=True, forceinline=True)
def store_fence():
    """Order this thread's streaming stores before anything it does next."""
    _fence()
