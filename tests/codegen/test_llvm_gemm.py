"""matmul and conv inside llvm kernels (codegen/llvm/gemm.py, conv.py), the vector
tiles they run on (runtime/llvm/tiles.py), and batch norm folded into convs
(transform/fold.py), all against NumPy on the host."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.llvm import conv as llvm_conv
from nbyoc.codegen.llvm import gemm
from nbyoc.codegen.llvm.emit_ops import FLAT_EPILOGUE_MAX
from nbyoc.codegen.llvm.phase_planes import PhasePlanes
from nbyoc.runtime import HostFunction
from nbyoc.runtime.llvm.target import tile_name, tile_shape

from ..helpers import FLOAT_DTYPES, assert_close_to_host, examples, reload


def host_ops(func) -> list[str]:
    """The ops partitioning for llvm leaves on the host."""
    main = nbyoc.partition(func, "llvm")["main"]
    return sorted(
        n.op.name
        for n in nbyoc.ir.post_order([main.body])
        if isinstance(n, nbyoc.ir.Call) and isinstance(n.op, nbyoc.ir.Op)
    )


def normal(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


EPILOGUES = {
    "none": lambda y, extra: y,
    "bias+relu": lambda y, extra: nbyoc.relu(y + extra),
    "residual+tanh": lambda y, extra: nbyoc.tanh(y) + extra,
}


def _epilogue_input(kind, shape, dtype):
    """The second input of an epilogue: a bias row or a full residual."""
    if kind == "bias+relu":
        return nbyoc.var("e", shape[-1:], dtype)
    return nbyoc.var("e", shape, dtype)


# -- matmul --------------------------------------------------------------------------


def check_matmul(a_shape, b_shape, dtype, epilogue, seed=0, transposed_b=False):
    a = nbyoc.var("a", a_shape, dtype)
    b_var = nbyoc.var("b", b_shape[:-2] + b_shape[:-3:-1] if transposed_b else b_shape, dtype)
    b = nbyoc.transpose(b_var, (*range(len(b_shape) - 2), -1, -2)) if transposed_b else b_var
    y = a @ b
    params = [a, b_var]
    if epilogue != "none":
        e = _epilogue_input(epilogue, y.type.shape, dtype)
        params.append(e)
        y = EPILOGUES[epilogue](y, e)
    else:
        y = EPILOGUES[epilogue](y, None)
    f = nbyoc.function(params, y)
    assert host_ops(f) == [], "the matmul and its epilogue should run in the kernel"
    inputs = [normal(p.type.shape, dtype, seed + k) for k, p in enumerate(params)]
    fn = nbyoc.compile(f, backend="llvm")
    depth = a_shape[-1]
    if dtype == "float16":  # rounded inputs and output; sums in float32
        tolerance = {"rtol": 2e-2, "atol": 2e-3 * depth}
    elif dtype == "float32":
        tolerance = {"rtol": 1e-4, "atol": 1e-5 * depth}
    else:
        tolerance = {"rtol": 1e-10, "atol": 1e-12 * depth}
    assert_close_to_host(fn, f, inputs, **tolerance)


@settings(max_examples=examples(25), deadline=None)
@given(
    m=st.integers(1, 20),
    k=st.integers(1, 24),
    n=st.integers(1, 70),
    batch=st.sampled_from([((), ()), ((2,), (2,)), ((3, 1), (2,)), ((), (2,)), ((2,), ())]),
    dtype=st.sampled_from(["float32", "float64", "float16"]),
    epilogue=st.sampled_from(sorted(EPILOGUES)),
    transposed_b=st.booleans(),
)
def test_matmul_with_its_epilogue_matches_numpy(m, k, n, batch, dtype, epilogue, transposed_b):
    """Any shape against the tile (edges of rows and columns, K of 1), batched and
    broadcasting, B read through a transpose, float32/float64 tiles and float16 rows."""
    check_matmul((*batch[0], m, k), (*batch[1], k, n), dtype, epilogue, transposed_b=transposed_b)


@pytest.mark.parametrize("epilogue", ["bias+relu", "residual+tanh"])
@pytest.mark.parametrize("n", [1, 10, 24, 32, 33])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_narrow_products_run_their_epilogue_as_flat_blocks_of_rows(epilogue, n, dtype):
    """Up to FLAT_EPILOGUE_MAX columns the epilogue walks blocks of rows flat (a bias
    tiled like the block); over many blocks, a last part-block and task boundaries,
    it equals NumPy; wider results keep the loop per row."""
    check_matmul((1001, 7), (7, n), dtype, epilogue)
    a, b = nbyoc.var("a", (1001, 7), dtype), nbyoc.var("b", (7, n), dtype)
    e = _epilogue_input(epilogue, (1001, n), dtype)
    f = nbyoc.function([a, b, e], EPILOGUES[epilogue](a @ b, e))
    source = nbyoc.compile(f, backend="llvm").get_source()
    assert ("_block[i0]" in source) == (n <= FLAT_EPILOGUE_MAX), source
    assert ("_tiled[i0]" in source) == (n <= FLAT_EPILOGUE_MAX and epilogue == "bias+relu")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "a_shape,b_shape",
    [((200, 300), (300, 130)), ((2, 67, 129), (129, 257)), ((1000, 64), (64, 10))],
    ids=["panels", "batched", "tall"],
)
def test_large_matmuls_match_numpy(a_shape, b_shape, dtype):
    """Sizes where a product is cut into row groups and column panels over the threads."""
    check_matmul(a_shape, b_shape, dtype, "bias+relu", seed=5)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(
    "a_shape,b_shape,transposed_b",
    [
        ((600, 100), (100, 1000), False),  # 31 full panels and a part one
        ((597, 33), (33, 200), True),  # B a transposed view
        ((3, 200, 64), (64, 100), False),  # batched A, one B
        ((2, 200, 16), (2, 16, 70), False),  # batched B: B packed per matrix
    ],
    ids=["wide", "transposed", "batched-a", "batched-b"],
)
def test_products_that_pack_b_match_numpy(a_shape, b_shape, transposed_b, dtype):
    """Products wider than one panel, with tasks of rows enough, copy their operands
    into packed blocks before the tiles read them (``gemm.packs_b``, ``gemm_blocks``)."""
    from nbyoc.codegen.llvm import gemm_blocks

    a = nbyoc.var("a", a_shape, dtype)
    b = nbyoc.var("b", b_shape, dtype)
    tile_rows, cols = tile_shape(dtype)
    matrices = int(np.prod(np.broadcast_shapes(a_shape[:-2], b_shape[:-2])))
    rows = min(a_shape[-2], gemm_blocks.task_rows(a_shape[-2], matrices, tile_rows))
    if rows < gemm.PACK_MIN_ROWS:
        pytest.skip(f"more threads than these {a_shape[-2]} rows take in blocks")
    assert gemm.packs_b(rows, a_shape[-1], b_shape[-1], cols)
    source = nbyoc.compile(nbyoc.function([a, b], a @ b), backend="llvm").get_source()
    assert "b_pack[p, kk, j] = " in source and "a_pack[t, kk, i] = " in source
    check_matmul(a_shape, b_shape, dtype, "bias+relu", seed=7, transposed_b=transposed_b)


def _edges(tile: int) -> list[int]:
    return [tile - 1, tile, tile + 1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("part", ["rows", "columns", "depth"])
def test_blocked_products_match_numpy_at_every_edge(part, dtype, monkeypatch):
    """The blocked product (``gemm_blocks``, taken here from one tile's rows) at the
    edges of its tile, panel, column block and K block: one fewer, exactly, one more
    (row tails of 8, 4, 2, 1 rows; a part panel; a part column block; a part K block),
    each against NumPy."""
    from nbyoc.codegen.llvm import gemm_blocks

    tile_rows, cols = tile_shape(dtype)
    monkeypatch.setattr(gemm, "PACK_MIN_ROWS", tile_rows)
    block, depth = gemm_blocks.column_block(dtype), gemm_blocks.K_PART
    base = {"rows": 2 * tile_rows + 7, "columns": 3 * cols + 5, "depth": 37}
    values = {
        "rows": [*_edges(2 * tile_rows), 4 * tile_rows + 15],
        "columns": [*_edges(2 * cols), *_edges(block), block + 2 * cols + 3],
        "depth": [2, *_edges(depth), 2 * depth + 3],
    }[part]
    for seed, size in enumerate(values):
        m, n, k = (size if part == name else base[name] for name in ("rows", "columns", "depth"))
        check_matmul((m, k), (k, n), dtype, "none", seed=seed)
    a, b = nbyoc.var("a", (m, k), dtype), nbyoc.var("b", (k, n), dtype)
    source = nbyoc.compile(nbyoc.function([a, b], a @ b)).get_source()
    assert "a_pack[t, kk, i] = " in source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("part", ["rows", "columns", "depth"])
def test_a_constant_b_is_packed_once_at_lowering(part, dtype, monkeypatch):
    """A layer's weight (a constant B) of a blocked product is packed into panels at
    lowering (``gemm.matmul_packs``): no task copies B. At the edges of the tile, panel,
    column block and K block (zeros past B's last row and column), with a bias and
    ReLU after it, against the host, before and after a save -> load round trip."""
    from nbyoc.codegen.llvm import gemm_blocks

    tile_rows, cols = tile_shape(dtype)
    monkeypatch.setattr(gemm, "PACK_MIN_ROWS", tile_rows)
    block, depth = gemm_blocks.column_block(dtype), gemm_blocks.K_PART
    base = {"rows": 2 * tile_rows + 7, "columns": 3 * cols + 5, "depth": 37}
    values = {
        "rows": [2 * tile_rows - 1, 4 * tile_rows + 15],
        "columns": [*_edges(block), block + 2 * cols + 3],
        "depth": [2, depth, 2 * depth + 3],
    }[part]
    for seed, size in enumerate(values):
        m, n, k = (size if part == name else base[name] for name in ("rows", "columns", "depth"))
        rng = np.random.default_rng(seed)
        a = nbyoc.var("a", (m, k), dtype)
        w = nbyoc.const(rng.standard_normal((k, n)).astype(dtype))
        bias = nbyoc.const(rng.standard_normal(n).astype(dtype))
        f = nbyoc.function([a], nbyoc.relu(a @ w + bias))
        fn = nbyoc.compile(f, backend="llvm")
        source = fn.get_source()
        assert "a_pack[t, kk, i] = " in source and "b_pack" not in source, (m, k, n)
        x = [rng.standard_normal((m, k)).astype(dtype)]
        tolerance = {"rtol": 1e-4, "atol": 1e-5 * k} if dtype == "float32" else {
            "rtol": 1e-10, "atol": 1e-12 * k}  # fmt: skip
        assert_close_to_host(fn, f, x, **tolerance)
        assert_close_to_host(reload(fn), f, x, **tolerance)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 40, 70), (40, 1, 70), (40, 70, 1)])
def test_products_with_a_size_of_one_match_numpy(m, k, n, dtype):
    """A row, a column or a depth of one: the tiles read the operands in place."""
    check_matmul((m, k), (k, n), dtype, "none")
    check_matmul((3, m, k), (k, n), dtype, "bias+relu")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(
    "a_shape,b_shape",
    [((40, 2 * gemm.DEEP_K + 77), (2 * gemm.DEEP_K + 77, 70)),  # a part-length last part
     ((2, 7, gemm.DEEP_K + 1), (gemm.DEEP_K + 1, 33))],  # batched, edge tiles, 2 parts
    ids=["deep", "deep-batched"],
)  # fmt: skip
def test_deep_products_sum_k_in_parts(a_shape, b_shape, dtype):
    """Beyond DEEP_K, a product read in place (rows too few for blocks) sums K in parts
    of K_BLOCK: the first part's tiles store, the later ones add to what is stored
    (accumulating tiles)."""
    a = nbyoc.var("a", a_shape, dtype)
    b = nbyoc.var("b", b_shape, dtype)
    source = nbyoc.compile(nbyoc.function([a, b], a @ b), backend="llvm").get_source()
    assert "_acc(" in source and "a_k = " in source
    check_matmul(a_shape, b_shape, dtype, "bias+relu", seed=11)


def _whole(shape, dtype, seed):
    """Small whole numbers: every product and sum of a test's size is exact in float32,
    so any column, row or panel out of place shows as a difference from NumPy."""
    return np.random.default_rng(seed).integers(-8, 9, shape).astype(dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("constant_b", [True, False], ids=["constant-b", "b-an-input"])
@pytest.mark.parametrize(
    "a_shape,n",
    [((16, 300), 1000),  # rows 12 + 4, blocks of two panels, a part panel last
     ((5, 40), 33),  # one full panel and a part one: two blocks
     ((3, 2, 7, 50), 130),  # batched A, one B: fewer blocks a matrix
     ((7, gemm.DEEP_K + 1), 70),  # K summed in parts, each block's columns
     ((13, 20), 256)],  # whole panels only
    ids=["wide", "two-panels", "batched-a", "deep", "whole-panels"],
)  # fmt: skip
def test_products_of_few_rows_and_a_wide_b_share_out_its_columns(
    a_shape, n, constant_b, dtype, monkeypatch
):
    """Rows few enough for one task and a B wider than WIDE_B_BYTES (lowered here to
    take these sizes): tasks of all rows and a block of panels each
    (``gemm.column_blocks``), a constant B packed into its panels at lowering
    (``gemm.matmul_packs``), a bias and relu on each block's columns; bit for bit
    NumPy's on whole numbers."""
    monkeypatch.setattr(gemm, "WIDE_B_BYTES", 0)
    k = a_shape[-1]
    a = nbyoc.var("a", a_shape, dtype)
    b_value, bias_value = _whole((k, n), dtype, 1), _whole((n,), dtype, 2)
    b = nbyoc.const(b_value) if constant_b else nbyoc.var("b", (k, n), dtype)
    bias = nbyoc.var("bias", (n,), dtype)
    params = [a, bias] if constant_b else [a, b, bias]
    fn = nbyoc.compile(nbyoc.function(params, nbyoc.relu(a @ b + bias)), backend="llvm")
    source = fn.get_source()
    assert "p0 = cb * " in source
    assert ("bp = " in source) == constant_b
    a_value = _whole(a_shape, dtype, 0)
    got = fn(a_value, bias_value) if constant_b else fn(a_value, b_value, bias_value)
    expected = np.maximum(a_value.astype(np.float64) @ b_value + bias_value, 0)
    np.testing.assert_array_equal(got, expected.astype(dtype))


def test_sizes_read_at_run_time_share_out_columns_at_every_binding(monkeypatch):
    """Rows and B's columns symbolic: each binding decides its own cut (3 rows and
    16 rows by columns, 200 rows by rows: A past ROW_GROUP_BYTES), a symbolic column
    count's panels counted at run time; bit for bit NumPy's on whole numbers."""
    monkeypatch.setattr(gemm, "WIDE_B_BYTES", 0)
    a, b = nbyoc.var("a", ("rows", 300)), nbyoc.var("b", (300, "columns"))
    fn = nbyoc.compile(nbyoc.function([a, b], a @ b), backend="llvm")
    for seed, (m, n) in enumerate([(3, 70), (16, 1000), (200, 33), (16, 32)]):
        a_value, b_value = _whole((m, 300), "float32", seed), _whole((300, n), "float32", 9)
        expected = a_value.astype(np.float64) @ b_value
        np.testing.assert_array_equal(fn(a_value, b_value), expected.astype(np.float32))


def test_columns_are_shared_out_only_for_few_rows_and_a_wide_b():
    """16 x 1024 @ 1024 x 8210 float32 (34 MB of B): sixteen blocks of columns; the same
    rows against a B that fits a core's L2, or more rows than one task holds: rows."""
    assert gemm.column_blocks(1, 16, 1024, 1024, 8210, 4, 32) == 16
    assert gemm.column_blocks(1, 16, 1024, 1024, 256, 4, 32) == 1
    assert gemm.column_blocks(1, 128, 1024, 1024, 8210, 4, 32) == 1
    assert gemm.column_blocks(4, 16, 1024, 1024, 8210, 4, 32) == 4
    assert gemm.column_blocks(16, 16, 1024, 1024, 8210, 4, 32) == 1


def test_small_integer_matmuls_and_vector_products_run_as_loops():
    i, j = nbyoc.var("i", (5, 7), "int32"), nbyoc.var("j", (7, 3), "int32")
    v = nbyoc.var("v", (7,), "float32")
    f = nbyoc.function([i, j, v], [i @ j, nbyoc.cast(i, "float32") @ v])
    assert host_ops(f) == []
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-9, 9, (5, 7), np.int32), rng.integers(-9, 9, (7, 3), np.int32),
              normal(7)]  # fmt: skip
    got_int, got_vec = nbyoc.compile(f)(*inputs)
    np.testing.assert_array_equal(got_int, inputs[0] @ inputs[1])
    np.testing.assert_allclose(got_vec, inputs[0].astype(np.float32) @ inputs[2], rtol=1e-5)


def test_a_matmul_survives_save_and_load():
    a, w = nbyoc.var("a", (50, 40)), nbyoc.const(normal((40, 33), seed=2))
    f = nbyoc.function([a], nbyoc.relu(a @ w))
    fn = reload(nbyoc.compile(f))
    assert_close_to_host(fn, f, [normal((50, 40))], rtol=1e-4, atol=1e-4)


# -- the tile itself -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("valid", [None, 1, 5])
@pytest.mark.parametrize("rows", [None, 1])
@pytest.mark.parametrize("accumulate", [False, True])
def test_a_tile_writes_its_block_and_nothing_else(dtype, valid, rows, accumulate):
    """A tile (or an edge tile of fewer rows, or fewer valid columns) reads A through
    strides and writes exactly its block of C (an accumulating tile adds to it):
    sentinels around it stay."""
    from numba import njit

    from nbyoc.runtime.llvm import tiles

    tile_rows, cols = tile_shape(dtype)
    rows = rows or tile_rows
    valid = valid or cols
    tile = getattr(tiles, tile_name(dtype, rows, cols, accumulate))

    @njit
    def run(a, a_row, b, b_col, k, c, c_row, valid):
        tile(a, a_row, b, b_col, k, c, c_row, valid)

    k = 7
    a = normal((rows + 3, 2 * k), dtype)[:, ::2]  # strided along K
    b = normal((k, 3 * cols), dtype, seed=1)
    c = np.full((rows + 4, 3 * cols), -7.0, dtype)
    run(a, 2, b, cols, k, c, 1, valid)
    want = np.full_like(c, -7.0)
    want[1 : 1 + rows, cols : cols + valid] = a[2 : 2 + rows] @ b[:, cols : cols + valid]
    if accumulate:
        want[1 : 1 + rows, cols : cols + valid] += -7.0
    np.testing.assert_allclose(c, want, rtol=1e-5)
    assert (c[1 : 1 + rows, cols + valid :] == -7).all() and (c[0] == -7).all()


# -- conv ----------------------------------------------------------------------------


CONV_CASES = [
    # x shape, w shape, attrs, the way llvm runs it
    ((2, 3, 9, 8), (3, 3, 3, 3), {"pads": (1, 1, 1, 1)}, "direct"),
    (
        (1, 8, 10, 10),
        (8, 1, 3, 3),
        {"pads": (1, 1, 1, 1), "group": 8, "strides": (2, 2)},
        "direct",
    ),
    ((2, 3, 9, 8), (4, 3, 3, 3), {"pads": (1, 1, 1, 1)}, "wide"),
    ((1, 16, 9, 9), (32, 16, 3, 3), {"pads": (1, 0, 2, 1), "dilations": (1, 2)}, "wide"),
    ((1, 20, 30), (48, 20, 5), {"pads": (2, 2)}, "wide"),  # 1-D
    ((1, 4, 5, 6, 5), (8, 4, 2, 3, 2), {"pads": (1, 0, 1, 0, 1, 1)}, "wide"),  # 3-D
    ((3, 24, 7, 7), (32, 24, 1, 1), {}, "tiles"),  # a 1x1 conv reads its input as the columns
    (
        (1, 32, 12, 11),
        (32, 16, 3, 3),
        {"group": 2, "strides": (2, 1), "pads": (1, 1, 1, 1)},
        "wide",  # (in stride phases)
    ),
    ((1, 3, 17, 15), (32, 3, 7, 7), {"pads": (3, 3, 3, 3), "strides": (2, 2)}, "wide"),  # stem
    # strides above WRITTEN_STEP, and a strided 1x1 conv, gather their columns
    ((1, 16, 13, 14), (16, 16, 3, 3), {"pads": (1, 1, 1, 1), "strides": (3, 3)}, "tiles"),
    ((1, 16, 9, 8), (24, 16, 1, 1), {"strides": (2, 2)}, "tiles"),
]


def conv_way(y) -> str:
    if not llvm_conv.uses_tiles(y):
        return "direct"
    return "wide" if llvm_conv._runs_wide(llvm_conv._Geometry(y)) else "tiles"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[1])))
def test_conv_with_its_epilogue_matches_numpy(case, with_bias, dtype):
    x_shape, w_shape, attrs, way = case
    x = nbyoc.var("x", x_shape, dtype)
    w = nbyoc.const(normal(w_shape, dtype, seed=1) * 0.3)
    bias = nbyoc.const(normal(w_shape[:1], dtype, seed=2)) if with_bias else None
    y = nbyoc.conv(x, w, bias, **attrs)
    residual = nbyoc.var("r", y.type.shape, dtype)
    f = nbyoc.function([x, residual], nbyoc.relu(y) + residual)
    assert host_ops(f) == []
    assert conv_way(y) == way
    fn = nbyoc.compile(f)
    inputs = [normal(x_shape, dtype, seed=3), normal(y.type.shape, dtype, seed=4)]
    rtol = 1e-4 if dtype == "float32" else 1e-10
    assert_close_to_host(fn, f, inputs, rtol=rtol, atol=rtol)


@pytest.mark.parametrize(
    "x_shape,w_shape",
    [
        ((2, 3, 16, 16), (8, 3, 3, 3)),
        ((2, 24, 1, 1), (16, 24, 1, 1)),
        ((3, 24, 7, 7), (32, 24, 1, 1)),
    ],
    ids=["wide", "one-position", "tiles"],
)
def test_conv_epilogues_with_per_channel_operands_walk_planes_flat(x_shape, w_shape):
    """A per-channel shift (1, C, 1, 1) and a full residual after a tiled conv: the
    epilogue walks each plane flat (also when the plane is one position) and equals
    NumPy."""
    x = nbyoc.var("x", x_shape)
    y = nbyoc.conv(x, nbyoc.const(normal(w_shape, seed=1) * 0.3), pads=(0,) * 4)
    shift = nbyoc.const(normal((1, w_shape[0], 1, 1), seed=2))
    residual = nbyoc.var("r", y.type.shape)
    f = nbyoc.function([x, residual], nbyoc.relu(y + shift) + residual)
    fn = nbyoc.compile(f)
    assert "_planes[i0, i1, position]" in fn.get_source()
    inputs = [normal(x_shape, seed=3), normal(y.type.shape, seed=4)]
    assert_close_to_host(fn, f, inputs, rtol=1e-4, atol=1e-4)


@settings(max_examples=examples(15), deadline=None)
@given(
    images=st.integers(1, 3),
    channels=st.sampled_from([16, 17]),
    out_channels=st.sampled_from([16, 40]),
    side=st.integers(1, 13),
    kernel=st.integers(1, 3),
    stride=st.integers(1, 3),
)
def test_tiled_convs_of_any_size_match_numpy(images, channels, out_channels, side, kernel,
                                             stride):  # fmt: skip
    """Position blocks of every size (a single position up to several blocks per image),
    over wide rows (strides 1 and 2, in stride phases) and gathered columns (stride 3,
    and 1x1 convs of stride 2)."""
    x = nbyoc.var("x", (images, channels, side, side + 2))
    w = nbyoc.const(normal((out_channels, channels, kernel, kernel), seed=5) * 0.2)
    pad = kernel // 2
    y = nbyoc.conv(x, w, strides=(stride, stride), pads=(pad,) * 4)
    assert llvm_conv.uses_tiles(y)
    f = nbyoc.function([x], nbyoc.sigmoid(y))
    fn = nbyoc.compile(f)
    assert_close_to_host(fn, f, [normal(x.type.shape, seed=6)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "x_shape,w_shape,attrs,way",
    [
        ((1, 5, 7, 40), (6, 5, 3, 3), {"pads": (2, 1, 1, 2), "dilations": (2, 1)}, "wide"),
        ((2, 4, 45), (8, 4, 5), {"pads": (3, 1)}, "wide"),  # 1-D
        ((1, 3, 4, 5, 9), (8, 3, 3, 2, 2), {"pads": (1, 0, 1, 1, 1, 0)}, "wide"),  # 3-D
        ((1, 6, 11, 13), (16, 6, 3, 3), {"pads": (1, 1, 1, 1), "strides": (2, 2)}, "wide"),
        ((1, 16, 90), (8, 16, 2), {"pads": (0, 9)}, "wide"),  # end padding past the kernel
        ((1, 4, 31), (16, 4, 5), {"pads": (2, 4), "strides": (2,)}, "wide"),  # 1-D strided
        ((1, 6, 11, 13), (16, 6, 3, 3), {"pads": (1, 1, 1, 1), "strides": (3, 3)}, "tiles"),
    ],
    ids=["2-D", "1-D", "3-D", "strided", "end padding", "1-D strided", "gathered"],
)
def test_convs_in_the_smallest_blocks_read_their_neighbours_rows_and_padding(
    monkeypatch, x_shape, w_shape, attrs, way
):
    """Blocks as small as they go (a budget of one byte for a block's planes or columns): a wide
    conv's blocks of one output row each hold the rows their taps read (their
    neighbours' and, at the edges, padding rows zeroed per task, since a thread's plane
    is reused by its next task); a gathered conv's blocks are one tile wide."""
    monkeypatch.setattr(llvm_conv, "COLUMNS_BYTES", 1)
    monkeypatch.setattr(llvm_conv, "MIN_BLOCK_TILES", 1)
    x = nbyoc.var("x", x_shape)
    y = nbyoc.conv(x, nbyoc.const(normal(w_shape, seed=1) * 0.3), **attrs)
    assert conv_way(y) == way
    f = nbyoc.function([x], nbyoc.relu(y))
    fn = nbyoc.compile(f)
    g = llvm_conv._Geometry(y)
    if way == "wide":
        planes = PhasePlanes(g.kernel, g.strides, g.dilations, g.begins, g.spatial, g.out)
        assert llvm_conv._wide_block_rows(g, planes, 4, 1) == 1
        assert "plane" in fn.get_source()
    else:
        assert llvm_conv._position_block(g, 16, 4) == 16
    inputs = [normal(x_shape, seed=3)]
    for _ in range(2):  # (the second call reuses nothing from the first)
        assert_close_to_host(fn, f, inputs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize(
    "x_shape,groups,kernel,attrs,way",
    [
        ((1, 6, 5, 7), 1, (3, 3), {"pads": (1, 1, 1, 1)}, "wide"),
        ((2, 6, 7, 6), 1, (3, 3), {"pads": (1, 0, 1, 1), "strides": (3, 1)}, "tiles"),
        ((2, 6, 7, 6), 1, (3, 3), {"pads": (1, 0, 1, 1), "strides": (2, 1)}, "wide"),
        ((1, 16, 4, 5), 1, (1, 1), {}, "tiles"),  # (the input is the columns)
        ((1, 12, 6, 5), 2, (3, 3), {"pads": (1, 1, 1, 1)}, "wide"),
    ],
    ids=["wide", "gathered", "phases", "pointwise", "grouped"],
)
def test_convs_in_the_smallest_channel_and_position_blocks_match_numpy(
    monkeypatch, x_shape, groups, kernel, attrs, way, dtype
):
    """Output channels in blocks of one tile's rows (as many threads wanted as there
    are tiles) and positions in blocks as small as they go: each group's channels are
    two full tiles and a last block of 5 (tails of 4 and 1 rows), and every output,
    with its bias and the residual added after it, equals the host's. A block that
    skipped or overlapped channels or positions would leave values never written or
    add a bias twice."""
    monkeypatch.setattr(llvm_conv, "worker_threads", lambda: 1 << 10)
    monkeypatch.setattr(llvm_conv, "COLUMNS_BYTES", 1)
    monkeypatch.setattr(llvm_conv, "MIN_BLOCK_TILES", 1)
    tile_rows = tile_shape(dtype)[0]
    out_channels = groups * (2 * tile_rows + 5)
    w_shape = (out_channels, x_shape[1] // groups, *kernel)
    x = nbyoc.var("x", x_shape, dtype)
    w = nbyoc.const(normal(w_shape, dtype, seed=1) * 0.3)
    y = nbyoc.conv(x, w, nbyoc.const(normal((out_channels,), dtype, seed=2)), group=groups, **attrs)
    assert conv_way(y) == way
    g = llvm_conv._Geometry(y)
    channels = llvm_conv._channel_block(g, 1, dtype, parallel=True)
    assert (channels.rows, channels.blocks) == (tile_rows, 3)
    assert llvm_conv._channel_block(g, 1, dtype, parallel=False).blocks == 1
    residual = nbyoc.var("r", y.type.shape, dtype)
    f = nbyoc.function([x, residual], y + residual)
    fn = nbyoc.compile(f, options={"llvm": {"parallel_threshold": 1}})
    assert "m0 = " in fn.get_source()
    inputs = [normal(x_shape, dtype, seed=3), normal(y.type.shape, dtype, seed=4)]
    for _ in range(2):  # (the second call reuses nothing from the first)
        assert_close_to_host(fn, f, inputs, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "x_shape,w_shape,attrs",
    [
        ((1, 7, 5, 6), (45, 7, 3, 3), {"pads": (1, 1, 1, 1)}),
        ((2, 9, 8, 7), (36, 9, 3, 2), {"pads": (0, 1, 2, 0), "strides": (2, 1)}),
        ((1, 12, 30), (70, 6, 3), {"pads": (2, 1), "dilations": (2,), "group": 2}),  # 1-D
        ((1, 20, 3, 4), (33, 20, 1, 1), {}),  # (the input is the columns)
    ],
    ids=["3x3", "strided", "1-D grouped", "pointwise"],
)
def test_convs_with_their_channels_on_the_lanes_match_numpy(
    monkeypatch, x_shape, w_shape, attrs, dtype
):
    """Small maps with their output channels along the tiles' lanes (weights packed into
    panels at lowering, ``conv_packs``), taken here at any depth: channels that leave a
    part panel, positions in blocks of one tile's rows (as many threads wanted as
    there are tiles) whose last takes the rest, with the bias and an epilogue,
    against the host, after a save and load (the packed weights are made again from
    the stored graph)."""
    monkeypatch.setattr(llvm_conv, "LANES_MIN_DEPTH", 1)
    monkeypatch.setattr(llvm_conv, "worker_threads", lambda: 1 << 10)
    x = nbyoc.var("x", x_shape, dtype)
    w = nbyoc.const(normal(w_shape, dtype, seed=1) * 0.3)
    y = nbyoc.conv(x, w, nbyoc.const(normal(w_shape[:1], dtype, seed=2)), **attrs)
    assert llvm_conv.channels_on_lanes(y)
    tile_rows = tile_shape(dtype)[0]
    assert llvm_conv._lanes_block(math.prod(y.type.shape[2:]), tile_rows, 1 << 10) == tile_rows
    residual = nbyoc.var("r", y.type.shape, dtype)
    f = nbyoc.function([x, residual], nbyoc.tanh(y) + residual)
    fn = reload(nbyoc.compile(f, options={"llvm": {"parallel_threshold": 1}}))
    assert "products" in fn.get_source()
    inputs = [normal(x_shape, dtype, seed=3), normal(y.type.shape, dtype, seed=4)]
    for _ in range(2):  # (the second call reuses nothing from the first)
        assert_close_to_host(fn, f, inputs, rtol=0, atol=0)


def test_a_deep_conv_on_a_small_map_puts_its_channels_on_the_lanes():
    """ResNet-18's last 3x3 conv (7 x 7, 512 channels) runs with its channels on the
    lanes and equals the host's; with weights that are not constants it cannot (its
    weights would be packed at every call) and runs over wide rows."""
    x = nbyoc.var("x", (1, 512, 7, 7))
    w_data = normal((512, 512, 3, 3), seed=1) * 0.02
    y = nbyoc.conv(x, nbyoc.const(w_data), pads=(1,) * 4)
    assert llvm_conv.channels_on_lanes(y)
    f = nbyoc.function([x], nbyoc.relu(y))
    assert_close_to_host(nbyoc.compile(f), f, [normal((1, 512, 7, 7), seed=2)], rtol=0, atol=0)
    w = nbyoc.var("w", w_data.shape)
    assert not llvm_conv.channels_on_lanes(nbyoc.conv(x, w, pads=(1,) * 4))


def test_a_map_narrower_than_a_tile_puts_its_channels_on_the_lanes_at_any_depth():
    """A squeeze-excitation's 1x1 convs on a 1 x 1 map (depth 120) run with their
    channels on the lanes, where the columns way computed a whole tile for one
    position, and equal the host's; a shallow conv on a 7 x 7 map keeps the columns."""
    x = nbyoc.var("x", (1, 120, 1, 1))
    squeeze = nbyoc.conv(x, nbyoc.const(normal((480, 120, 1, 1), seed=1) * 0.1))
    assert llvm_conv.channels_on_lanes(squeeze)
    f = nbyoc.function([x], nbyoc.relu(squeeze))
    assert_close_to_host(nbyoc.compile(f), f, [normal((1, 120, 1, 1), seed=2)], rtol=0, atol=0)
    wide = nbyoc.conv(nbyoc.var("x", (1, 120, 7, 7)), nbyoc.const(normal((480, 120, 1, 1))))
    assert not llvm_conv.channels_on_lanes(wide)


def test_heavy_convs_on_small_maps_run_in_parallel():
    """A conv's parallel tasks are chosen by its multiply-adds too: a 7x7 map of 128
    channels has fewer outputs than the parallel threshold, but enough work
    (``PARALLEL_MIN_WORK``) to share; with half the channels, it runs in one thread."""

    def runs_parallel(channels: int) -> bool:
        x = nbyoc.var("x", (1, channels, 7, 7))
        y = nbyoc.conv(x, nbyoc.const(normal((channels, channels, 3, 3))), pads=(1,) * 4)
        assert y.type.size < 1 << 15
        fn = nbyoc.compile(nbyoc.function([x], y))
        return "drive_table" in fn.get_source()

    assert 128 * 49 * 128 * 9 >= llvm_conv.PARALLEL_MIN_WORK > 64 * 49 * 64 * 9
    assert runs_parallel(128) and not runs_parallel(64)


def test_float16_convs_stay_on_the_host():
    x = nbyoc.var("x", (1, 2, 5, 5), "float16")
    w = nbyoc.const(np.ones((2, 2, 3, 3), np.float16))
    assert host_ops(nbyoc.function([x], nbyoc.conv(x, w))) == ["conv"]


# -- batch norm folding ---------------------------------------------------------------


def conv_bn(w_const: bool = True, extra_reader: bool = False):
    x = nbyoc.var("x", (2, 3, 8, 8))
    w_data = normal((16, 3, 3, 3), seed=1)
    w = nbyoc.const(w_data) if w_const else nbyoc.var("w", w_data.shape)
    y = nbyoc.conv(x, w, nbyoc.const(normal(16, seed=2)), pads=(1, 1, 1, 1))
    stats = [nbyoc.const(normal(16, seed=3)), nbyoc.const(normal(16, seed=4)),
             nbyoc.const(normal(16, seed=5)), nbyoc.const(np.abs(normal(16, seed=6)) + 0.5)]  # fmt: skip
    out = nbyoc.relu(nbyoc.batch_norm(y, *stats, epsilon=1e-3))
    params = [x] if w_const else [x, w]
    f = nbyoc.function(params, [out, y] if extra_reader else out)
    return f, [normal((2, 3, 8, 8), seed=7), *([] if w_const else [w_data])]


def op_names(func) -> list[str]:
    return [n.op.name for n in nbyoc.ir.post_order([func.body]) if isinstance(n, nbyoc.ir.Call)]


@pytest.mark.parametrize("backend", ["host", "llvm", "csource", "examplejson"])
def test_batch_norm_folded_into_a_constant_conv_computes_the_same(backend):
    from nbyoc.transform import fold_batch_norm

    f, inputs = conv_bn()
    assert "batch_norm" not in op_names(fold_batch_norm(f))
    got = nbyoc.compile(f, backend=backend)(*inputs)
    want = HostFunction(f)(*inputs)  # the graph as written: conv, then batch norm
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("w_const,extra_reader", [(False, False), (True, True)])
def test_batch_norm_stays_when_it_cannot_fold(w_const, extra_reader):
    from nbyoc.transform import fold_batch_norm

    f, inputs = conv_bn(w_const, extra_reader)
    assert fold_batch_norm(f) is f
    got = nbyoc.compile(f)(*inputs)
    want = HostFunction(f)(*inputs)
    for g, e in zip(got if extra_reader else [got], want if extra_reader else [want]):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_loop_matmuls_are_taken_only_while_small():
    small = nbyoc.var("i", (16, 16), "int64")
    big = nbyoc.var("j", (64, 64), "int64")
    assert gemm.matmul_supported(small @ small)
    assert gemm.LOOP_MAX_WORK < 64**3 and not gemm.matmul_supported(big @ big)


@pytest.mark.parametrize("rows,streams", [(3, True), (16, True), (17, False)])
def test_thin_products_of_a_b_past_the_cache_take_the_streaming_tiles(monkeypatch, rows, streams):
    """A product of at most ``gemm.STREAM_ROWS`` rows whose B is larger than the
    last-level cache (here made 64 KiB) prefetches B's rows ahead; the numbers are the
    host's either way, and a B that fits the cache takes the plain tiles."""
    monkeypatch.setattr(gemm, "last_level_cache_bytes", lambda: 1 << 16)
    x = nbyoc.var("x", (rows, 96))
    w = normal((96, 200), seed=rows)  # (76.8 KB)
    func = nbyoc.function([x], nbyoc.tanh(x @ nbyoc.const(w) + 0.5))
    fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
    assert ("_stream" in fn.get_source()) == streams
    assert_close_to_host(fn, func, [normal((rows, 96), seed=1)], rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(gemm, "last_level_cache_bytes", lambda: 1 << 30)
    small = nbyoc.function([x], nbyoc.tanh(x @ nbyoc.const(w) + 0.25))
    assert "_stream" not in nbyoc.compile(small, backend="llvm").get_source()
