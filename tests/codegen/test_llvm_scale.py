"""The llvm backend on large graphs: long chains split into capped, deduplicated stage
functions (large ones called through their address), parallel stages sharing one
prange, and identical regions compiling to one kernel."""

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.llvm import lower as llvm_lower
from nbyoc.codegen.llvm import module as llvm_runtime
from nbyoc.codegen.llvm import schedule as llvm_schedule
from nbyoc.codegen.llvm import stages as llvm_stages
from nbyoc.codegen.llvm.module import LLVMModule
from nbyoc.runtime.llvm import jit_address, kernels

from ..helpers import assert_close_to_host, external, kernel_source, parallel_runs


def chain(n, shape=(256, 256)):
    x = nbyoc.var("in0", shape)
    y = x
    steps = [lambda v: v * 1.001, nbyoc.tanh, lambda v: v + 0.5, nbyoc.sigmoid]
    for k in range(n):
        y = steps[k % 4](y)
    return external([x], [y], "llvm_0", "llvm")


def inputs(shape=(256, 256)):
    return [np.random.default_rng(0).uniform(-2, 2, shape).astype(np.float32)]


def own_stages(source: str) -> str:
    """An llvm ``get_source()`` without the table driver's module and the stages' entries
    (``codegen.llvm.drivers``)."""
    drives = ("\nENTRY_TYPE = ", "\nINNER_TYPE = ")
    parts = source.split("\n# ---- ")
    return "\n# ---- ".join(p for p in parts if not any(d in p for d in drives))


def test_a_long_chain_is_capped_deduplicated_stages_in_one_prange():
    f = chain(300)
    source = LLVMModule(f).get_source()
    per_stage = llvm_schedule.MAX_NEST_OPS
    # 300 ops in nests of at most 64: four identical full ones and one of 44.
    assert kernel_source(source).count("# stage ") == -(-300 // per_stage)
    # (the table driver's module and the stages' entries: ``def stage`` too)
    assert own_stages(source).count("def stage") == 2
    assert parallel_runs(source) == 1
    if jit_address.supported():  # one driver's call; its table: each stage's entry and own
        kernel = kernel_source(source)
        assert "prange(" not in kernel and kernel.count("call_at(stage_addresses[") == 1
        assert kernel.count("stage_addresses[") == 1 + 2 * 5 and source.count("in prange(") == 1
    else:
        assert source.count("in prange(") == 1 and source.count("_flat, lo, hi") == 5
    assert_close_to_host(nbyoc.compile(f.with_attrs(Compiler="llvm")), f, inputs(), rtol=1e-5)


def test_stages_called_directly_give_the_same_numbers(monkeypatch):
    f = chain(90, (64, 80))
    direct = llvm_lower.lower(f)  # the lowering's default; the runtime asks for addresses
    assert "stage_addresses" not in direct.source and not direct.addressed
    assert llvm_lower.lower(f, function_pointers=True).addressed
    monkeypatch.setattr(llvm_runtime, "supported", lambda: False)  # as on an older Numba
    fn = nbyoc.compile(f.with_attrs(global_symbol="llvm_direct"), backend="llvm")
    assert "stage_addresses" not in fn.get_source()
    assert_close_to_host(fn, f, inputs((64, 80)), rtol=1e-5)


def test_nests_become_stage_functions_and_long_ones_store_through_a_block_buffer():
    # Serial (a parallel nest of any length is a stage called through its address, so
    # that a driver runs it: test_a_parallel_nest_of_few_ops_is_run_by_a_driver).
    serial = {"parallel_threshold": 1 << 30}
    long_stage = LLVMModule(chain(llvm_stages.BLOCKED_MIN_OPS), **serial).get_source()
    # (a long one is called through its address, from a module of its own: ``def stage(``)
    assert "def stage(" in long_stage and "buffer0 = np.empty(64, np.float32)" in long_stage
    medium = LLVMModule(chain(llvm_schedule.FUNCTION_MIN_OPS), **serial).get_source()
    assert "def stage0" in medium and "buffer0" not in medium
    short = LLVMModule(chain(3), **serial).get_source()  # a few ops: loops in the kernel
    assert "def stage" not in short
    assert 3 < llvm_schedule.FUNCTION_MIN_OPS < llvm_stages.BLOCKED_MIN_OPS


@pytest.mark.skipif(not jit_address.supported(), reason="this Numba calls no stage by address")
def test_a_parallel_nest_of_few_ops_is_run_by_a_driver():
    """A parallel loop in the kernel is a function Numba outlines and compiles per shape
    (about 1.5 s each in a detector's kernel): a parallel nest of any length is a stage
    function, per structure, called through its address by a driver."""
    f = chain(3)
    fn = nbyoc.compile(f, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
    kernel = kernel_source(fn.get_source())
    assert "prange(" not in kernel and parallel_runs(kernel) == 1
    assert_close_to_host(fn, f, [inputs((256, 256))[0]], rtol=1e-6)


def test_a_buffer_read_in_a_parallel_group_is_not_reused_inside_it():
    """Stages sharing a prange run chunk by chunk: the column sums (128 elements of a
    scratch buffer) are read by the first stage in every chunk, so the second stage may
    not write its result into their buffer before the last chunk has read them. (Column
    sums: a row sum would make a row group of the whole graph, ``rows``.)"""
    x, b = nbyoc.var("in0", (128, 128)), nbyoc.var("in1", (128, 1))
    y = x * nbyoc.sum(x, axis=0, keepdims=True)
    for k in range(llvm_schedule.MAX_NEST_OPS - 1):  # the first nest, full
        y = y * 1.001 if k % 2 else y + 0.5
    y = y * b  # the second nest reads a broadcast too, so both walk the same 2-d domain
    for k in range(llvm_schedule.FUNCTION_MIN_OPS - 1):
        y = y * 0.999 if k % 2 else y - 0.25
    f = external([x, b], [nbyoc.sum(y, axis=0)], "llvm_0", "llvm")
    fn = nbyoc.compile(f, options={"llvm": {"parallel_threshold": 1}})
    source = fn.get_source()
    # The two nests, and the two column sums (driven stages of column tasks of their own).
    assert own_stages(source).count("def stage") == 4 and source.count("_flat, lo, hi)") == 0
    assert parallel_runs(source) == 3 and "np.int64(4), np.int64(16384)" in source  # 4 chunks
    data = [inputs((128, 128))[0], np.linspace(0.5, 1.5, 128, dtype=np.float32).reshape(128, 1)]
    assert_close_to_host(fn, f, data, rtol=1e-5)


def residual_blocks(count, dtype="float32"):
    """``count`` blocks ``y + relu(y @ w1 + b1) @ w2 + b2``; in float64, the same float32
    weights widened (the truth the float32 graph approximates)."""
    rng = np.random.default_rng(1)
    x = nbyoc.var("x", (32, 64), dtype)
    y = x
    for _ in range(count):
        w1, w2 = ((rng.standard_normal((64, 64)) * 0.1).astype(np.float32) for _ in range(2))
        b1, b2 = ((rng.standard_normal(64) * 0.1).astype(np.float32) for _ in range(2))
        w1, w2, b1, b2 = (v.astype(dtype) for v in (w1, w2, b1, b2))
        y = y + (nbyoc.relu(y @ nbyoc.const(w1) + nbyoc.const(b1)) @ nbyoc.const(w2) + b2)
    return nbyoc.function([x], y)


def assert_as_accurate_as_the_host(fn, count):
    """``fn``'s result on the residual blocks is as close to the float64 truth as the
    host's float32 result is, within a factor 4 (another summation order, fused
    multiply-adds): across 100 blocks float32 rounding grows with the depth, and each
    machine's BLAS sums in its own order, so no fixed rtol holds everywhere."""
    x = np.ones((32, 64), np.float32)
    truth = nbyoc.compile(residual_blocks(count, "float64"), backend="host")(x.astype(np.float64))
    host = nbyoc.compile(residual_blocks(count), backend="host")(x)
    got = fn(x)
    assert got.dtype == np.float32 and got.shape == truth.shape
    floor = 4 * np.finfo(np.float32).eps * np.abs(truth).max()
    host_error = np.abs(host - truth).max()
    assert np.abs(got - truth).max() <= 4 * host_error + floor, (host_error, floor)


def new_kernel_modules(before: set[str]) -> set[str]:
    """The kernel modules loaded since ``before`` (not counting stage modules)."""
    return {k for k in set(kernels._KERNELS) - before if hasattr(kernels._KERNELS[k], "kernel")}


def test_repeated_blocks_compile_each_distinct_region_once():
    f = residual_blocks(100)
    before = set(kernels._KERNELS)
    fn = nbyoc.compile(f, max_size=None)
    # Uncapped, all of it is one region (the matmuls run as tiles in its stages), whose
    # kernel calls the stage function of each distinct block shape: as a program (100
    # blocks of 32x64 are 3.9 million elements: ``PROGRAM_MIN_WORK``), with no kernel
    # module of its own at all.
    ((module,),) = [fn.runtime_modules.values()]
    assert module.lowered.program is not None
    assert len(new_kernel_modules(before)) == 0  # (only the modules of its stages)
    assert_as_accurate_as_the_host(fn, 100)


def test_graphs_beyond_the_region_cap_split_and_equal_pieces_share_a_kernel():
    # 6 calls a block: at a cap of 48 every region is 8 whole blocks, of one structure.
    f = residual_blocks(40)
    before = set(kernels._KERNELS)
    fn = nbyoc.compile(f, max_size=48)
    assert len(fn.runtime_modules) == 5
    # Each is a program (16 products of 32 x 64 x 64: 2 million multiply-adds,
    # ``ops.call_work``), so none has a kernel module, and all five run the same stages.
    modules = list(fn.runtime_modules.values())
    assert all(m.lowered.program is not None for m in modules)
    assert len(new_kernel_modules(before)) == 0
    assert len({m.compiled.keys for m in modules}) == 1
    assert_as_accurate_as_the_host(fn, 40)
    default = nbyoc.compile(residual_blocks(50))  # 300 calls
    assert len(default.runtime_modules) == 2


@pytest.mark.parametrize("threshold", [1, 1 << 40])
def test_chains_across_the_nest_cap_match_the_host_serial_and_parallel(threshold):
    f = chain(2 * llvm_schedule.MAX_NEST_OPS + 5, (16, 24))
    fn = nbyoc.compile(f, options={"llvm": {"parallel_threshold": threshold}})
    assert_close_to_host(fn, f, inputs((16, 24)), rtol=1e-5)
