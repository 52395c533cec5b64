"""Stage functions per structure, not per shape (issue 36; ``codegen/llvm/sizes.py``).

A conv's stage function reads its images, channels, group count and spatial extents
at run time, and lives in a module of its own keyed by its text: two convs that
differ only in those sizes are one function, compiled once, in one kernel, across
kernels and across processes. Each pair below differs in every size the structure
leaves free, and both must still equal the host.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.llvm import conv as llvm_conv
from nbyoc.runtime.llvm import entry_code, jit_address

from ..helpers import assert_close_to_host, kernel_source, parallel_runs, run_fresh


def conv_graph(x_shape, out_channels, kernel, stride=1, group=1):
    """conv (pads keep the size at stride 1) + bias + relu, weights as inputs."""
    x = nbyoc.var("x", x_shape)
    w = nbyoc.var("w", (out_channels, x_shape[1] // group, kernel, kernel))
    b = nbyoc.var("b", (out_channels,))
    pad = kernel // 2
    y = nbyoc.conv(x, w, b, strides=(stride,) * 2, pads=(pad,) * 4, group=group)
    return nbyoc.function([x, w, b], nbyoc.relu(y)), y


def inputs(func, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.type.shape).astype(np.float32) for p in func.params]


def stage_modules(fn) -> set[str]:
    """The kernel's stage modules but the table driver's and the stages' entries (one
    driver for every parallel run, an entry per stage signature; whether a graph runs
    in parallel depends on its size)."""
    (module,) = fn.runtime_modules.values()
    addressed = module.lowered.addressed
    return {s.module for s in addressed if s.module and not _drives(s.module)}


def _drives(module: str) -> bool:
    return "\nENTRY_TYPE = " in module or entry_code.is_entry(module)


def way(y) -> str:
    if not llvm_conv.uses_tiles(y):
        return "direct"
    return "wide" if llvm_conv._runs_wide(llvm_conv._Geometry(y)) else "tiles"


#: (first, second): x shape, output channels, kernel, stride, group; and the way both
#: run. Output channels per group keep their remainder by the tile's rows (6 for
#: float32 on AVX-512, 4 or 6 elsewhere: 16 and 28 agree on both), which names the
#: tail tile the code calls.
PAIRS = {
    "wide 3x3": (((1, 8, 12, 12), 16, 3, 1, 1), ((2, 16, 20, 24), 28, 3, 1, 1), "wide"),
    # (over stride phases, their sizes read at run time)
    "wide 3x3 stride 2": (((1, 8, 12, 12), 16, 3, 2, 1), ((2, 16, 14, 16), 28, 3, 2, 1), "wide"),
    # (their blocks of positions, 36 and 56, share conv.row_stride's power of two)
    "tiles 1x1 stride 2": (((1, 16, 12, 12), 16, 1, 2, 1), ((2, 24, 14, 16), 28, 1, 2, 1), "tiles"),
    "pointwise": (((1, 16, 9, 9), 16, 1, 1, 1), ((3, 24, 14, 7), 28, 1, 1, 1), "tiles"),
    "depthwise 3x3": (((1, 8, 12, 12), 8, 3, 1, 8), ((2, 20, 17, 9), 20, 3, 1, 20), "direct"),
    "depthwise 5x5 stride 2": (((1, 8, 15, 19), 8, 5, 2, 8), ((2, 12, 24, 11), 12, 5, 2, 12), "direct"),
    "direct 3x3": (((1, 3, 12, 12), 2, 3, 1, 1), ((2, 5, 7, 30), 3, 3, 1, 1), "direct"),
    # (strides above conv.WRITTEN_STEP are read at run time; 30 and 27 positions a block)
    "tiles 3x3 strides 4 and 8": (((1, 16, 12, 40), 16, 3, 4, 1), ((2, 16, 24, 72), 28, 3, 8, 1), "tiles"),
}  # fmt: skip


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS.keys())
def test_convs_of_one_structure_share_their_stage_function(pair):
    first, second, expected = pair
    fns = []
    for seed, (x_shape, channels, kernel, stride, group) in enumerate((first, second)):
        func, y = conv_graph(x_shape, channels, kernel, stride, group)
        assert way(y) == expected
        fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1024}})
        assert_close_to_host(fn, func, inputs(func, seed), rtol=1e-4, atol=1e-4)
        fns.append(fn)
    assert stage_modules(fns[0]) and stage_modules(fns[0]) == stage_modules(fns[1])


def test_convs_of_two_structures_do_not_share():
    """A stride, a window or grouping is structure: written into the code."""
    graphs = [
        conv_graph((1, 8, 12, 12), 8, 3, 1, 8)[0],
        conv_graph((1, 8, 12, 12), 8, 3, 2, 8)[0],
        conv_graph((1, 8, 12, 12), 8, 5, 1, 8)[0],
        conv_graph((1, 8, 12, 12), 8, 3, 1, 1)[0],
    ]
    modules = [stage_modules(nbyoc.compile(g, backend="llvm")) for g in graphs]
    assert all(modules) and len({frozenset(m) for m in modules}) == len(modules)


#: Compiles the conv given as JSON in sys.argv[1] (as ``conv_graph``) and prints how many stage functions
#: (each in a module of its own, named ``stage``) Numba compiled, and the result's sum.
PROGRAM = """
import json, sys
import numpy as np
from numba.core import event
import nbyoc

x_shape, channels, kernel, stride, group = json.loads(sys.argv[1])
x = nbyoc.var("x", tuple(x_shape))
w = nbyoc.var("w", (channels, x_shape[1] // group, kernel, kernel))
b = nbyoc.var("b", (channels,))
y = nbyoc.conv(x, w, b, strides=(stride,) * 2, pads=(kernel // 2,) * 4, group=group)
func = nbyoc.function([x, w, b], nbyoc.relu(y))
with event.install_recorder("numba:compile") as compiles:
    fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1024}})
names = [e.data["dispatcher"].py_func.__name__ for _, e in compiles.buffer if e.is_start]
print(json.dumps({"stages": names.count("stage"), "compiled": len(names)}))
"""


def test_a_second_process_with_other_sizes_compiles_no_stage_function(tmp_path):
    """The stage module compiled for one size is loaded from the disk cache for another
    (the second model whose layers the cache has seen: only its kernel compiles)."""
    # (stage modules compiled here, not by compile workers, to be counted here)
    env = {"NBYOC_CACHE_DIR": str(tmp_path / "cache"), "NBYOC_COMPILE_WORKERS": "0"}
    first, second, _ = PAIRS["wide 3x3"]
    cold = run_fresh(PROGRAM, tmp_path, json.dumps(first), env=env)
    assert cold["stages"] >= 1
    warm = run_fresh(PROGRAM, tmp_path, json.dumps(second), env=env)
    assert warm["stages"] == 0 and warm["compiled"] >= 1  # (its kernel is new)


def pool_graph(x_shape, op, kernel, stride, pad):
    x = nbyoc.var("x", x_shape)
    pool = getattr(nbyoc, op)
    y = pool(x, kernel_shape=(kernel,) * 2, strides=(stride,) * 2, pads=(pad,) * 4)
    return nbyoc.function([x], y)


def matmul_graph(a_shape, b_shape, epilogue):
    a, b = nbyoc.var("a", a_shape), nbyoc.var("b", b_shape)
    c = nbyoc.var("c", (b_shape[-1],))
    y = nbyoc.matmul(a, b)
    y = {"none": y, "bias+tanh": nbyoc.tanh(y + c)}[epilogue]
    return nbyoc.function([a, b, c], y)


#: Pairs of graphs of one structure and different sizes. Matmuls keep the remainders
#: of their rows by the tile's rows (6 or 4: 16 and 28 agree) and of their columns by
#: its columns (n % 32 or % 16: 40 and 72 agree), which are structure; output rows
#: past FLAT_EPILOGUE_MAX wide keep the epilogue's loops over rows.
OTHER_PAIRS = {
    # (a pool's spatial extents are written in: see windows.pool_stage)
    "max_pool 3x3 stride 2 padded": (
        pool_graph((1, 8, 13, 13), "max_pool", 3, 2, 1),
        pool_graph((2, 5, 13, 13), "max_pool", 3, 2, 1),
    ),
    "avg_pool 2x2": (
        pool_graph((1, 8, 12, 12), "avg_pool", 2, 2, 0),
        pool_graph((3, 4, 12, 12), "avg_pool", 2, 2, 0),
    ),
    "matmul": (
        matmul_graph((16, 24), (24, 40), "none"),
        matmul_graph((28, 50), (50, 72), "none"),
    ),
    "batched matmul + bias + tanh": (
        matmul_graph((2, 16, 24), (2, 24, 296), "bias+tanh"),
        matmul_graph((3, 28, 10), (3, 10, 328), "bias+tanh"),
    ),
}


@pytest.mark.parametrize("pair", OTHER_PAIRS.values(), ids=OTHER_PAIRS.keys())
def test_pools_and_matmuls_of_one_structure_share_their_stage_function(pair):
    fns = []
    for seed, func in enumerate(pair):
        fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1024}})
        assert_close_to_host(fn, func, inputs(func, seed), rtol=1e-4, atol=1e-4)
        fns.append(fn)
    assert stage_modules(fns[0]) and stage_modules(fns[0]) == stage_modules(fns[1])


def resize_graph(x_shape, mode: str, coordinates: str):
    """A sigmoid resized to twice its spatial extents (an FPN's upsampling)."""
    x = nbyoc.var("x", x_shape)
    y = nbyoc.call_op(
        "resize", nbyoc.sigmoid(x), scales=(1.0, 1.0, 2.0, 2.0),
        sizes=(*x_shape[:2], 2 * x_shape[2], 2 * x_shape[3]), mode=mode,
        coordinate_transformation_mode=coordinates,
    )  # fmt: skip
    return nbyoc.function([x], y)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("coordinates", ["asymmetric", "half_pixel", "align_corners"])
def test_resizes_of_one_structure_share_their_stage_function(mode, coordinates):
    """A resize whose source positions depend only on its scales reads its extents at
    run time (``windows.resize_tasks``); align_corners', which divide by the extents,
    are written in."""
    fns = []
    for seed, x_shape in enumerate([(1, 8, 20, 30), (2, 3, 21, 13)]):
        func = resize_graph(x_shape, mode, coordinates)
        fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 64}})
        assert_close_to_host(fn, func, inputs(func, seed), rtol=1e-5, atol=1e-6)
        fns.append(fn)
    resized = [{m for m in stage_modules(fn) if "np.float64(o3)" in m} for fn in fns]
    if coordinates == "align_corners":  # (in the kernel, or a stage of its shape)
        assert not resized[0] & resized[1]
    else:
        assert len(resized[0]) == 1 and resized[0] == resized[1]


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gathers_of_one_structure_share_their_stage_function_and_check_their_indices(axis):
    """A gather's copy reads its extents at run time (``windows.gather_tasks``); its
    indices are checked in the kernel before it runs, whatever the sizes."""
    fns, rng = [], np.random.default_rng(axis)
    for x_shape, index_shape in [((4, 10, 30), (7,)), ((3, 12, 20), (5,))]:
        x, i = nbyoc.var("x", x_shape), nbyoc.var("i", index_shape, "int64")
        func = nbyoc.function([x, i], nbyoc.call_op("gather", nbyoc.tanh(x), i, axis=axis))
        fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 16}})
        data = rng.standard_normal(x_shape).astype(np.float32)
        n = x_shape[axis]
        indices = rng.integers(-n, n, index_shape)
        assert_close_to_host(fn, func, [data, indices], rtol=1e-6, atol=1e-6)
        for bad in (n, -n - 1):
            wrong = indices.copy()
            wrong[-1] = bad
            with pytest.raises(nbyoc.errors.ExecutionError, match="gather index is out of range"):
                fn(data, wrong)
        fns.append(fn)
    copies = [{m for m in stage_modules(fn) if "operand1[" in m} for fn in fns]
    assert len(copies[0]) == 1 and copies[0] == copies[1]


def drivers(fn) -> set[str]:
    (module,) = fn.runtime_modules.values()
    return {s.module for s in module.lowered.addressed if s.module and "\nENTRY_TYPE" in s.module}


@pytest.mark.skipif(not jit_address.supported(), reason="this Numba calls no stage by address")
def test_parallel_runs_of_one_structure_share_their_driver_and_leave_the_kernel_serial():
    """A parallel run of stages is one call of a driver, which holds the ``prange`` and
    takes its chunk counts and bounds as arguments: convs of other sizes (other chunk
    counts) run through the same driver, and the kernel compiles without a parallel
    loop of its own."""
    fns = []
    for seed, x_shape in enumerate([(2, 8, 24, 24), (3, 16, 40, 32)]):
        func, _ = conv_graph(x_shape, 16, 3)
        fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
        assert_close_to_host(fn, func, inputs(func, seed), rtol=1e-4, atol=1e-4)
        kernel = kernel_source(fn.get_source())
        assert parallel_runs(kernel) == 1 and "prange(" not in kernel
        assert "parallel=False" in kernel
        fns.append(fn)
    assert len(drivers(fns[0])) == 1 and drivers(fns[0]) == drivers(fns[1])


@pytest.mark.skipif(not jit_address.supported(), reason="this Numba calls no stage by address")
def test_a_concatenate_copies_its_operands_through_one_shared_stage_and_no_kernel_loop():
    """A concatenate of a few operands is one copy stage per operand, every size read at
    run time, all run by one driver call: concatenates of other sizes, channel counts
    and offsets share the copy's module, and the kernel keeps no parallel loop for them
    (a detector at batch 2 had 25, each compiled per shape)."""
    fns = []
    for seed, (n, a, b, side) in enumerate([(2, 3, 5, 24), (3, 6, 2, 16)]):
        x, y = nbyoc.var("x", (n, a, side, side)), nbyoc.var("y", (n, b, side, side))
        s = nbyoc.sigmoid(x)
        func = nbyoc.function([x, y], nbyoc.concatenate([s, y, x, s], axis=1) * 2.0)
        fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
        assert_close_to_host(fn, func, inputs(func, seed), rtol=1e-6, atol=1e-6)
        kernel = kernel_source(fn.get_source())
        assert "prange(" not in kernel and "parallel=False" in kernel
        fns.append(fn)
    copies = {m for m in stage_modules(fns[0]) if "whole[task, " in m}
    assert len(copies) == 1 and copies <= stage_modules(fns[1])


#: Direct convs of every geometry the phases handle: x shape, w shape, strides, pads
#: (begins then ends), dilations, group, bias, dtype.
DIRECT = {
    "1-d stride 3 dilated": ((2, 3, 40), (2, 3, 4), (3,), (2, 1), (2,), 1, True, "float32"),
    "2-d asymmetric pads": ((1, 4, 9, 13), (4, 1, 3, 3), (1, 2), (0, 2, 1, 0), (1, 1), 4, True, "float32"),
    "2-d pads wider than the window": ((1, 2, 5, 6), (3, 2, 2, 2), (2, 1), (3, 3, 3, 3), (1, 1), 1, False, "float32"),
    "2-d dilation 2 stride 2": ((2, 6, 17, 11), (6, 1, 3, 3), (2, 2), (2, 2, 2, 2), (2, 2), 6, False, "float64"),
    "2-d grouped": ((1, 6, 10, 10), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2, True, "float64"),
    "3-d": ((1, 2, 5, 6, 7), (3, 2, 3, 2, 3), (1, 2, 1), (1, 0, 1, 1, 1, 1), (1, 1, 1), 1, True, "float32"),
    "stride 2 rows of whole vectors": ((1, 2, 9, 70), (2, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 2, True, "float32"),
    "1x1 of 12 channels": ((2, 12, 5, 37), (3, 12, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True, "float32"),
    "1x1 stride 2": ((1, 4, 9, 40), (2, 4, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1, False, "float64"),
    "one output position": ((1, 3, 3, 3), (2, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, True, "float32"),
    # (rows of more than phases.ROW_TAPS taps: two rows of 16 and one of 8)
    "1-d 40 taps stride 2": ((2, 1, 300), (3, 1, 40), (2,), (3, 5), (1,), 1, True, "float32"),
    "2-d 2x19 taps": ((1, 2, 6, 90), (2, 1, 2, 19), (1, 1), (1, 0, 0, 2), (1, 1), 2, False, "float64"),
}  # fmt: skip


@pytest.mark.parametrize("case", DIRECT.values(), ids=DIRECT.keys())
def test_direct_convs_of_any_geometry_match_the_host(case):
    x_shape, w_shape, strides, pads, dilations, group, has_bias, dtype = case
    x, w = nbyoc.var("x", x_shape, dtype), nbyoc.var("w", w_shape, dtype)
    params = [x, w]
    if has_bias:
        params.append(nbyoc.var("b", (w_shape[0],), dtype))
    y = nbyoc.conv(
        x, w, params[2] if has_bias else None, strides=strides, pads=pads,
        dilations=dilations, group=group,
    )  # fmt: skip
    assert way(y) == "direct"
    func = nbyoc.function(params, nbyoc.relu(y))
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(p.type.shape).astype(dtype) for p in params]
    fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 64}})
    assert_close_to_host(fn, func, args, rtol=1e-5, atol=1e-5)


def test_batches_of_one_and_two_share_their_stages_when_constants_broadcast():
    """A constant of extent 1 on an axis is read at 0 there whatever the result's extent
    (``kernel_arrays.element_index``): a batch of 1 runs the code a batch of 2 does, a new batch size
    compiles no stage function. (A constant slope (1, C, 1) and scale (1, 1, 1).)"""
    rng = np.random.default_rng(5)
    slope = nbyoc.const(rng.standard_normal((1, 24, 1)).astype(np.float32))
    scale = nbyoc.const(np.full((1, 1, 1), 0.5, np.float32))
    fns = []
    for seed, batch in enumerate((1, 2)):
        x = nbyoc.var("x", (batch, 24, 70))
        y = nbyoc.maximum(x * slope, x) * scale + nbyoc.tanh(x)
        func = nbyoc.function([x], y)
        fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
        assert_close_to_host(fn, func, inputs(func, seed), rtol=1e-6, atol=1e-6)
        fns.append(fn)
    assert stage_modules(fns[0]) and stage_modules(fns[0]) == stage_modules(fns[1])


def test_a_compiled_kernel_copies_a_large_transposed_output_by_a_stage_not_a_prange():
    """A region below ``PROGRAM_MIN_WORK`` stays a compiled kernel, per shape; its
    parallel copies run through the shared driver, and its transposed views are
    ``stage_table.transposed`` (Numba's parallel pipeline and its ``transpose(axes)``
    cost seconds to compile in every process)."""
    x = nbyoc.var("x", (1, 12, 40, 36))
    part = nbyoc.slice(x, starts=[2], ends=[10], axes=[1])
    y = nbyoc.transpose(nbyoc.reshape(part, (1, 8, 1440)), (0, 2, 1))
    func = nbyoc.function([x], y)
    fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
    (module,) = fn.runtime_modules.values()
    assert module.lowered.program is None  # (too little work to be a program)
    kernel = kernel_source(fn.get_source())
    assert "prange(" not in kernel and "transposed(" in kernel and ".transpose(" not in kernel
    (arg,) = inputs(func, 0)
    np.testing.assert_array_equal(fn(arg), arg[:, 2:10].reshape(1, 8, 1440).transpose(0, 2, 1))


def test_an_se_blocks_bias_after_a_conv_reads_the_same_at_batches_one_and_two():
    """A conv over pooled (N, C, 1, 1) maps and a constant bias (1, C, 1, 1) added in
    its epilogue: at batch 1 the bias has the result's shape, and is still read as one
    value a plane (``emit_ops.OpEmission.plane_epilogue``), as at batch 2."""
    rng = np.random.default_rng(6)
    w = nbyoc.const(rng.standard_normal((32, 48, 1, 1)).astype(np.float32))
    bias = nbyoc.const(rng.standard_normal((1, 32, 1, 1)).astype(np.float32))
    fns = []
    for seed, batch in enumerate((1, 2)):
        x = nbyoc.var("x", (batch, 48, 1, 1))
        func = nbyoc.function([x], nbyoc.relu(nbyoc.conv(x, w) + bias))
        fn = nbyoc.compile(func, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
        assert_close_to_host(fn, func, inputs(func, seed), rtol=1e-5, atol=1e-5)
        fns.append(fn)
    assert stage_modules(fns[0]) and stage_modules(fns[0]) == stage_modules(fns[1])
