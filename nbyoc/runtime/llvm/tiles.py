"""Register-blocked tiles of a matrix product, for the llvm kernels' matmul and conv.

A tile computes ``C[r:r+MR, j:j+cols] = A[r:r+MR, :K] @ B[:K, j:j+cols]`` (``cols``
at most NR) with its MR x NR sums held in vector registers for the whole of K:
per step of K it loads NR values of a row of B as vectors, broadcasts one value
of each of the MR rows of A, and does MR x NR / lanes fused multiply-adds. Only
the finished sums are stored. This is the inner kernel of BLAS libraries (BLIS's
"microkernel"), written here as a Numba intrinsic that emits the LLVM vector code
itself: LLVM does not turn the same computation written as scalar Python into
vector code (measured: a 4x8 tile as 32 scalar sums compiled to scalar FMAs).

Why not call BLAS: Numba's ``np.dot`` calls SciPy's OpenBLAS, whose threads and
Numba's OpenMP threads then take turns at the cores; on this project's 2-core VM a
BLAS call right after a parallel loop took 0.2 to 8 ms longer than alone. Tiles run
in the kernel's own ``prange``, and the ops after a product (bias, activation,
residual) run on its rows while they are in cache. One core runs a 6x32 float32
tile at 109 GFLOP/s (4092x16 @ 16x32, AVX-512).

The tile reads A with any strides and B and C along unit-stride rows (the kernel
makes B contiguous when it is not). Edge tiles (``cols < NR``) load and store
through masks, so nothing outside the columns given is read or written. K steps
accumulate in the tile's dtype, as BLAS does, with ``llvm.fmuladd``: fused where
the CPU has FMA.

An *indirect* tile (``tile_float32_6x32_rows``) reads row ``k`` of B at element
``offsets[k]`` of a flat array instead of ``k`` rows in: a conv's column matrix,
whose row for an input channel and tap is a contiguous run of the zero-padded input
at that tap's offset, is then read where it lies and never copied (the indirect
convolution of Dukhan, "The Indirect Convolution Algorithm", 2019, with one offset
per column-matrix row rather than a pointer per output position). The caller keeps
every ``offsets[k] + b_col + valid`` within B (``conv._wide_tiled_conv``: the offsets
come from the planes' own layout).

Kernels import tiles by name: ``tile_float32_6x32`` is a 6-row, 32-column float32
tile, ``tile_float32_6x32_acc`` the same adding its product to C (for a product
summed over K in parts), ``_rows`` the indirect one (``tile_name``); ``tile_shape``
gives this machine's choice (both in ``runtime.llvm.target``, which the lowering reads
without importing Numba).
"""

from __future__ import annotations

import functools
import re

from .target import BITS, tile_name, vector_lanes

#: How many rows of B ahead a *streaming* tile prefetches (``tile_*_stream``): a thin
#: product (16 x 1024 @ 1024 x 8210, 33.6 MB of weights read once) is bound by
#: memory, and the hardware's prefetch alone kept it at 2.2-2.4 ms; 16 rows (2 KiB of
#: a packed panel) ahead, 1.56-1.95 ms. Tiles that read B from cache (any product
#: whose rows make several tiles) do not prefetch: with it a 64-row one ran slower.
PREFETCH_ROWS = 16
_NAME = re.compile(r"tile_(float32|float64)_(\d+)x(\d+)(_acc)?(_rows)?(_stream)?$")


def __getattr__(name: str):
    # Tiles are built on first use, so importing this module builds nothing.
    match = _NAME.match(name)
    if match is None:
        raise AttributeError(name)
    dtype, rows, cols = match.group(1), int(match.group(2)), int(match.group(3))
    flags = (bool(match.group(k)) for k in (4, 5, 6))
    return _tile(dtype, rows, cols, *flags)


@functools.cache
def _tile(dtype: str, rows: int, cols: int, accumulate=False, indirect=False, stream=False):
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    bits = BITS[dtype]
    lanes = vector_lanes(dtype)
    lanes = lanes if cols % lanes == 0 else cols  # one vector of any width: LLVM splits it
    vectors = cols // lanes
    i1, i32, i64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
    element = ir.FloatType() if bits == 32 else ir.DoubleType()
    vector = ir.VectorType(element, lanes)
    align = ir.Constant(i32, bits // 8)
    suffix = f"v{lanes}f{bits}"

    byte = ir.IntType(8).as_pointer()
    # The tile's body is a function of its own in each LLVM module that calls it,
    # called from every call site: a conv stage calls up to 20 tiles (row counts 12,
    # 8, 4, 2, 1, each plain and accumulating, whole and edge columns), and inlined at
    # each the copies took most of a model's compile (6 of ppocr-cls's 15 s went to
    # three such stages). Its parameters: A's data, row and K strides (bytes) and first
    # row; B's data and K stride (the offsets' data for an indirect tile) and first
    # column; K; C's data, row stride and first row; the valid columns.
    parameters = [byte, i64, i64, i64, byte, i64.as_pointer() if indirect else i64, i64,
                  i64, byte, i64, i64, i64]  # fmt: skip
    function_name = "nbyoc_" + tile_name(dtype, rows, cols, accumulate, indirect, stream)

    def codegen(context, builder, sig, args):
        if indirect:  # (B's rows at offsets: the flat array and the offsets, in B's place)
            a_value, a_row, b_value, offsets_value, b_col, k_len, c_value, c_row, valid = args
            offsets_data = context.make_array(sig.args[3])(context, builder, offsets_value).data
            c_type = sig.args[6]
        else:
            a_value, a_row, b_value, b_col, k_len, c_value, c_row, valid = args
            c_type = sig.args[5]
        a_arr = context.make_array(sig.args[0])(context, builder, a_value)
        b_arr = context.make_array(sig.args[2])(context, builder, b_value)
        c_arr = context.make_array(c_type)(context, builder, c_value)
        a_row, b_col, k_len, c_row, valid = (
            builder.sext(v, i64) if v.type.width < 64 else v
            for v in (a_row, b_col, k_len, c_row, valid)
        )
        a_step_row, a_step_k = cgutils.unpack_tuple(builder, a_arr.strides, 2)
        b_rows = offsets_data if indirect else cgutils.unpack_tuple(builder, b_arr.strides, 2)[0]
        c_step_row = cgutils.unpack_tuple(builder, c_arr.strides, 2)[0]
        module = builder.module
        function = module.globals.get(function_name)
        if function is None:
            function = ir.Function(module, ir.FunctionType(ir.VoidType(), parameters),
                                   function_name)  # fmt: skip
            function.linkage = "internal"
            body = ir.IRBuilder(function.append_basic_block("entry"))
            emit(body, *function.args)
            body.ret_void()
        builder.call(function, [
            builder.bitcast(a_arr.data, byte), a_step_row, a_step_k, a_row,
            builder.bitcast(b_arr.data, byte), b_rows, b_col, k_len,
            builder.bitcast(c_arr.data, byte), c_step_row, c_row, valid,
        ])  # fmt: skip
        return context.get_dummy_value()

    def emit(builder, a_base, a_step_row, a_step_k, a_row, b_data, b_rows, b_col, k_len,
             c_data, c_step_row, c_row, valid):  # fmt: skip
        """The tile's body, built by ``builder`` from the raw operands (``parameters``)."""
        offsets_data, b_step_k = (b_rows, None) if indirect else (None, b_rows)
        size = ir.Constant(i64, bits // 8)

        def address(base, offset, kind):
            return builder.bitcast(builder.gep(base, [offset]), kind.as_pointer())

        def splat(value, lane_type):
            undefined = ir.Constant(ir.VectorType(lane_type, lanes), ir.Undefined)
            one = builder.insert_element(undefined, value, ir.Constant(i32, 0))
            zeros = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)
            return builder.shuffle_vector(one, undefined, zeros)

        a_rows = [
            builder.gep(a_base, [builder.mul(builder.add(a_row, ir.Constant(i64, i)), a_step_row)])
            for i in range(rows)
        ]
        b_base = builder.gep(b_data, [builder.mul(b_col, size)])
        c_base = builder.gep(c_data, [builder.mul(b_col, size)])
        limit = splat(valid, i64)
        masks = [
            builder.icmp_signed(
                "<",
                ir.Constant(ir.VectorType(i64, lanes), list(range(v * lanes, (v + 1) * lanes))),
                limit,
            )
            for v in range(vectors)
        ]
        module = builder.module
        fmuladd = cgutils.get_or_insert_function(
            module, ir.FunctionType(vector, [vector] * 3), f"llvm.fmuladd.{suffix}"
        )
        mask_type = ir.VectorType(i1, lanes)
        masked_load = cgutils.get_or_insert_function(
            module,
            ir.FunctionType(vector, [vector.as_pointer(), i32, mask_type, vector]),
            f"llvm.masked.load.{suffix}.p0",
        )
        masked_store = cgutils.get_or_insert_function(
            module,
            ir.FunctionType(ir.VoidType(), [vector, vector.as_pointer(), i32, mask_type]),
            f"llvm.masked.store.{suffix}.p0",
        )
        prefetch = cgutils.get_or_insert_function(
            module, ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]), "llvm.prefetch.p0"
        )
        prefetch_rows = ir.Constant(i64, PREFETCH_ROWS)
        i32_zero, i32_one, i32_three = (ir.Constant(i32, v) for v in (0, 1, 3))
        zero = ir.Constant(vector, [0.0] * lanes)
        sums = [
            [cgutils.alloca_once_value(builder, zero) for _ in range(vectors)] for _ in range(rows)
        ]
        vector_bytes = lanes * bits // 8

        def c_pointer(i, v):
            row = builder.mul(builder.add(c_row, ir.Constant(i64, i)), c_step_row)
            return address(builder.gep(c_base, [row]), ir.Constant(i64, v * vector_bytes), vector)

        def product(masked: bool):
            if accumulate:  # the sums start from C (a product over K in parts)
                for i in range(rows):
                    for v in range(vectors):
                        pointer = c_pointer(i, v)
                        if masked:
                            start = builder.call(masked_load, [pointer, align, masks[v], zero])
                        else:
                            start = builder.load(pointer, align=bits // 8)
                        builder.store(start, sums[i][v])
            with cgutils.for_range(builder, k_len) as loop:
                if indirect:
                    at = builder.load(builder.gep(offsets_data, [loop.index]))
                    b_row = builder.gep(b_base, [builder.mul(at, size)])
                else:
                    b_row = builder.gep(b_base, [builder.mul(loop.index, b_step_k)])
                    if stream:
                        ahead = builder.gep(b_row, [builder.mul(prefetch_rows, b_step_k)])
                        for v in range(vectors):
                            line = builder.gep(ahead, [ir.Constant(i64, v * vector_bytes)])
                            builder.call(prefetch, [line, i32_zero, i32_three, i32_one])
                b_vectors = []
                for v in range(vectors):
                    pointer = address(b_row, ir.Constant(i64, v * vector_bytes), vector)
                    if masked:
                        b_vectors.append(
                            builder.call(masked_load, [pointer, align, masks[v], zero])
                        )
                    else:
                        b_vectors.append(builder.load(pointer, align=bits // 8))
                for i in range(rows):
                    pointer = address(a_rows[i], builder.mul(loop.index, a_step_k), element)
                    a_value = splat(builder.load(pointer), element)
                    for v in range(vectors):
                        total = builder.call(
                            fmuladd, [a_value, b_vectors[v], builder.load(sums[i][v])]
                        )
                        builder.store(total, sums[i][v])
            for i in range(rows):
                for v in range(vectors):
                    pointer = c_pointer(i, v)
                    value = builder.load(sums[i][v])
                    if masked:
                        builder.call(masked_store, [value, pointer, align, masks[v]])
                    else:
                        builder.store(value, pointer, align=bits // 8)

        # Whole tiles (most of them) load and store plainly; edge tiles through masks.
        whole = builder.icmp_signed("==", valid, ir.Constant(i64, cols))
        with builder.if_else(whole) as (plain, edge):
            with plain:
                product(False)
            with edge:
                product(True)

    def check(a, b, c, offsets=None):
        # The codegen reads A, B and C as arrays of this tile's dtype and the offsets as
        # int64: any other caller is refused when Numba types it, not run on wrong bytes.
        want = types.float32 if bits == 32 else types.float64
        problems = [
            f"{name} must be an array of {want}, got {operand}"
            for name, operand in (("A", a), ("B", b), ("C", c))
            if not (isinstance(operand, types.Array) and operand.dtype == want)
        ]
        if offsets is not None and not (
            isinstance(offsets, types.Array) and offsets.dtype == types.int64 and offsets.ndim == 1
        ):
            problems.append(f"offsets must be a 1-D int64 array, got {offsets}")
        if problems:
            from numba.core.errors import TypingError

            raise TypingError(f"tile {dtype} {rows}x{cols}: " + "; ".join(problems))

    if indirect:

        @intrinsic
        def indirect_tile(typingctx, a, a_row, b, offsets, b_col, k_len, c, c_row, valid):
            """C[c_row:+rows, b_col:+valid] = A[a_row:+rows, :k_len] @ B[:k_len,
            b_col:+valid], row k of B at b[offsets[k]:] (``+=`` for an accumulating tile)."""
            check(a, b, c, offsets)
            return types.void(a, a_row, b, offsets, b_col, k_len, c, c_row, valid), codegen

        return indirect_tile

    @intrinsic
    def tile(typingctx, a, a_row, b, b_col, k_len, c, c_row, valid):
        """C[c_row:+rows, b_col:+valid] = A[a_row:+rows, :k_len] @ B[:k_len, b_col:+valid]
        (``+=`` for an accumulating tile)."""
        check(a, b, c)
        return types.void(a, a_row, b, b_col, k_len, c, c_row, valid), codegen

    return tile
