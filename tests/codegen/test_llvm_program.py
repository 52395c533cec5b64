"""A kernel as data (``nbyoc.codegen.llvm.program``): reading a kernel's statements into
a program, refusing what a program cannot hold, and running programs like kernels."""

from __future__ import annotations

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.llvm import assemble
from nbyoc.codegen.llvm import lower as llvm_lower
from nbyoc.codegen.llvm.program import CALL, DRIVE, NotAProgram, Place, read_program
from nbyoc.codegen.llvm.stages import Addressed
from nbyoc.errors import ArgumentError
from nbyoc.runtime.llvm import jit_address

F32_2 = 'nbt.Array(nbt.float32, 2, "C")'
F32_2A = 'nbt.Array(nbt.float32, 2, "A")'
CALL0 = "call_at(stage_addresses[0], STAGE_AT0_TYPE, "
CALL1 = "call_at(stage_addresses[1], STAGE_AT1_TYPE, "
CALL2 = "call_at(stage_addresses[2], STAGE_AT2_TYPE, "
CALL3 = "call_at(stage_addresses[3], STAGE_AT3_TYPE, "


def read(body, stage_types, places=None):
    places = places or {
        "in0": Place.array(0, (4, 6), "float32"),
        "out0": Place.array(1, (6, 4), "float32"),
        "s0": Place.array(2, (64,), "float32"),
    }
    stages = [Addressed(f"stage{k}", "S", None, tuple(t), True) for k, t in enumerate(stage_types)]
    return read_program(body, places, stages, 3)


def test_views_become_offsets_extents_and_strides_of_their_base():
    program = read(
        [
            "t0 = s0[8:32].reshape((6, 4))",
            "w1 = in0.transpose((1, 0))",
            "w2 = in0[::-1, 1:5:2]",
            "call_at(stage_addresses[0], STAGE_AT0_TYPE, (w1, t0, 0, 6,))",
            "call_at(stage_addresses[1], STAGE_AT1_TYPE, (w2, t0, 2, 4,))",
        ],
        [[F32_2A, F32_2], [F32_2A, F32_2]],
    )
    # Each row: the stage's address (relocated), then its arguments. The transpose: its
    # base's address, extents (6, 4), byte strides (4, 24); t0: 32 bytes into s0.
    assert program.table[:9].tolist() == [0, 0, 6, 4, 4, 24, 32, 6, 4]
    # The reversed, stepped slice starts at row 3, column 1: 3 * 24 + 4 bytes.
    assert program.table[9:].tolist() == [0, 76, 4, 2, -24, 8, 32, 6, 4]
    relocations = program.relocations.reshape(-1, 2).tolist()
    assert relocations == [[0, 3], [1, 0], [6, 2], [9, 4], [10, 0], [15, 2]]
    assert [(s.kind, s.at, s.values) for s in program.steps] == [
        (CALL, 0, (0, 6)),
        (CALL, 9, (2, 4)),
    ]


def test_a_drivers_run_is_one_step_at_its_table():
    program = read(
        [
            "t0 = s0[0:24].reshape((6, 4))",
            'drive_table = table_of("v v v v v v a2 a2", (1, stage_addresses[1], 5, 1, 1,'
            " stage_addresses[0], out0, t0,))",
            "call_at(stage_addresses[2], STAGE_AT2_TYPE, (drive_table, np.int64(0),"
            " np.int64(2), np.int64(6), np.int64(1), np.int64(6),))",
        ],
        [[F32_2, F32_2], [], []],
    )
    (step,) = program.steps
    assert (step.kind, step.function, step.at, step.values) == (
        DRIVE,
        ("stage", 2),
        0,
        (2, 6, 1, 6),
    )
    assert program.table.tolist() == [1, 0, 5, 1, 1, 0, 0, 6, 4, 0, 6, 4]


@pytest.mark.parametrize(
    "statement, reason",
    [
        ("for i0 in range(4):\n    out0[i0, 0] = 1.0", "the kernel statement"),
        ("x = in0[4, 0]", "element outside its array"),
        ("x = in0[0, 0:2]", "not a slice"),
        ("x = half_value(in0[0, 0])", "the view"),  # (a float16 number)
        ("x = in0[0, 0]\n" + CALL1 + "(in0, x, 0, 1,))", "does not know"),
        ("x = in0[0, 0]\n" + CALL2 + "(x, 0, 1,))", "does not know"),
        ("x = in0[0, 0]\n" + CALL3 + "(in0, x, 0, 1,))", "float32 number for a nbt.float64"),
        (CALL0 + "(in0.transpose((1, 0)), out0, 0, 1,))", "does not know"),
        ("call_at(stage_addresses[0], STAGE_AT0_TYPE, (w, out0, 0, 1,))", "does not know"),
        ("w = in0.T\n" + CALL1 + "(w, out0, 0, 1,))", "the view"),
        ("w = in0.transpose((1, 0))\n" + CALL1 + "(w, out0, 0, 1,))", "strided argument for"),
        ("call_at(stage_addresses[2], STAGE_AT2_TYPE, (out0, 0, 1,))", "unlike its"),
        ("w = in0.reshape((5, 5))", "reshape"),
        ("w = in0.transpose((1, 0)).reshape(24)", "reshape of a strided"),
        ("w = np.ascontiguousarray(in0.transpose((1, 0)))", "copy of a strided"),
        ('t = table_of("v a2", (1, in0.T,))', "does not know"),
        ('t = table_of("v a2", (1,))', "layout does not fit"),
        ('t = table_of("a1", (in0,))', "unlike its layout"),
        ("call_at(stage_addresses[9], STAGE_AT9_TYPE, (in0, out0, 0, 1,))", "not a stage"),
        ("call_at(stage_addresses[0], STAGE_AT0_TYPE, (in0, out0, lo, 1,))", "not a literal"),
        ("stage3(in0, out0, 0, 1)", "the kernel statement"),
    ],
)
def test_a_statement_a_program_cannot_hold_is_named(statement, reason):
    f64 = 'nbt.Array(nbt.float64, 2, "C")'
    stage_types = [
        [F32_2A, F32_2],
        [F32_2, F32_2],
        [f64],
        [F32_2, "nbt.float64"],
    ]
    with pytest.raises(NotAProgram, match=reason):
        read(statement.split("\n"), stage_types)


needs_pointers = pytest.mark.skipif(
    not jit_address.supported(), reason="this Numba calls no stage by address"
)


@pytest.fixture(autouse=True)
def small_programs(monkeypatch):
    """Kernels of any size are programs here (a real model's are: ``PROGRAM_MIN_WORK``)."""
    monkeypatch.setattr(llvm_lower, "PROGRAM_MIN_WORK", 0)


def _graphs():
    """Graphs whose kernels are programs: nests, a conv with its epilogue, a matmul of a
    transposed operand (a copy stage), a strided output (a copy stage), a concatenate."""
    rng = np.random.default_rng(0)
    x = nbyoc.var("x", (2, 4, 12, 12))
    w = nbyoc.const(rng.standard_normal((8, 4, 3, 3)).astype(np.float32))
    conv = nbyoc.relu(nbyoc.conv(x, w, pads=(1, 1, 1, 1)) + 0.5)
    yield "conv", nbyoc.function([x], conv), [rng.standard_normal((2, 4, 12, 12), np.float32)]
    a, b = nbyoc.var("a", (48, 32)), nbyoc.var("b", (48, 40))
    product = nbyoc.matmul(nbyoc.transpose(nbyoc.sigmoid(a), (1, 0)), b)
    data = [rng.standard_normal((48, 32), np.float32), rng.standard_normal((48, 40), np.float32)]
    yield "matmul of a transpose", nbyoc.function([a, b], product), data
    t = nbyoc.transpose(nbyoc.exp(a) * 2.0, (1, 0))
    yield "strided outputs", nbyoc.function([a], [t, nbyoc.tanh(a)]), data[:1]
    c = nbyoc.concatenate([nbyoc.sigmoid(x), x * 3.0, -x], axis=1)
    yield "concatenate", nbyoc.function([x], c), [rng.standard_normal((2, 4, 12, 12), np.float32)]


@needs_pointers
@pytest.mark.parametrize("threshold", [1, 1 << 30], ids=["parallel", "serial"])
@pytest.mark.parametrize(
    "name, f, data", list(_graphs()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_programs_compute_what_the_host_computes(name, f, data, threshold):
    options = {"llvm": {"parallel_threshold": threshold}}
    fn = nbyoc.compile(f, backend="llvm", options=options)
    assert assemble.PROGRAM_NOTE in fn.get_source(), name
    got, want = fn(*data), nbyoc.compile(f, backend="host")(*data)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, h in zip(got, want):
        # a few float32 roundings per element of sums of at most 48 products
        np.testing.assert_allclose(g, h, rtol=1e-5, atol=1e-5 * float(np.abs(h).max()))


@needs_pointers
def test_a_program_refuses_or_mends_arguments_as_a_kernel_does():
    a = nbyoc.var("a", (16, 8))
    f = nbyoc.function([a], nbyoc.exp(a) + 1.0)
    fn = nbyoc.compile(f, backend="llvm")
    assert assemble.PROGRAM_NOTE in fn.get_source()
    data = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    want = np.exp(data[:, ::2]) + 1.0
    np.testing.assert_allclose(fn(data[:, ::2]), want, rtol=1e-6)  # strided: copied
    frozen = np.ascontiguousarray(data[:, ::2])
    frozen.flags.writeable = False
    np.testing.assert_allclose(fn(frozen), want, rtol=1e-6)  # read-only inputs are read
    with pytest.raises(ArgumentError, match="shape"):
        fn(data)
    with pytest.raises(ArgumentError, match="dtype"):
        fn(data[:, ::2].astype(np.float64))
    ((symbol, module),) = fn.runtime_modules.items()
    out = np.zeros((16, 16), np.float32)
    with pytest.raises(ArgumentError, match="out0 must be C-contiguous"):
        module.get_function(symbol)(frozen, out[:, ::2])
    assert not out.any()
    out = np.zeros((16, 8), np.float32)
    module.get_function(symbol)(frozen, out)
    np.testing.assert_allclose(out, want, rtol=1e-6)


@needs_pointers
def test_only_kernels_of_enough_work_are_programs(monkeypatch):
    monkeypatch.setattr(llvm_lower, "PROGRAM_MIN_WORK", 3 * 64 * 64)
    x = nbyoc.var("x", (64, 64))
    small = llvm_lower.lower(nbyoc.function([x], nbyoc.exp(x) + 1.0), function_pointers=True)
    assert small.program is None and small.not_a_program is None  # (never asked)
    large = llvm_lower.lower(
        nbyoc.function([x], nbyoc.exp(nbyoc.exp(x) + 1.0)), function_pointers=True
    )
    assert large.program is not None and large.source.startswith(assemble.PROGRAM_NOTE)
    direct = llvm_lower.lower(nbyoc.function([x], nbyoc.exp(nbyoc.exp(x) + 1.0)))
    assert direct.program is None  # (export's lowering, without function pointers)


def test_a_small_region_of_a_large_model_is_a_program(monkeypatch):
    """A region under ``PROGRAM_MIN_WORK`` is a program when the module built with it
    does ``MODEL_PROGRAM_MIN_WORK`` (its dearer call is then nothing next to the
    model's, and a warm start builds no Numba dispatcher for it); alone, it is a
    compiled kernel. The choice is saved with it, and both compute the same."""
    from nbyoc.codegen.build import build
    from nbyoc.ir import IRModule

    monkeypatch.setattr(llvm_lower, "PROGRAM_MIN_WORK", 1 << 20)  # (its default)

    def external(f, name):
        return f.with_attrs(Compiler="llvm", global_symbol=name)

    x = nbyoc.var("x", (4, 8))
    small = external(nbyoc.function([x], nbyoc.exp(x) + 1.0), "small")
    a, b = nbyoc.var("a", (512, 512)), nbyoc.var("b", (512, 512))
    large = external(nbyoc.function([a, b], nbyoc.matmul(a, b)), "large")
    assert llvm_lower.region_work(large) >= llvm_lower.MODEL_PROGRAM_MIN_WORK
    main = nbyoc.function([x], x)  # (build builds the external functions only)
    alone = build(IRModule({"main": main, "small": small}))["small"]
    assert alone.lowered.program is None
    together = build(IRModule({"main": main, "small": small, "large": large}))["small"]
    assert together.lowered.program is not None
    reloaded = type(together).load_from_bytes(together.save_to_bytes())
    assert reloaded.lowered.program is not None
    data = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    results = []
    for module in (alone, together, reloaded):
        out = np.empty((4, 8), np.float32)
        module.get_function("small")(data, out)
        results.append(out)
    np.testing.assert_allclose(results[1], results[0], rtol=2e-7 * 4)  # (exp's ulps)
    assert (results[2] == results[1]).all()


def test_a_strided_array_two_stages_read_is_copied_once_before_either_runs():
    """Two convs read one transposed (strided) array, the first in a group of stages run
    together over the batch. A second contiguous copy bound the first one's name to a
    new arena, filled only after the group ran: the group read an unfilled arena
    (basic-pitch at a batch of 3 gave wrong numbers). One copy serves both."""
    rng = np.random.default_rng(0)

    def weights(*shape):
        return nbyoc.const((rng.standard_normal(shape) * 0.3).astype(np.float32))

    x = nbyoc.var("x", (3, 20, 24, 8))
    v = nbyoc.transpose(x, (0, 3, 1, 2))
    a = nbyoc.relu(nbyoc.conv(v, weights(8, 8, 3, 3), weights(8), pads=(1, 1, 1, 1)))
    b = nbyoc.sigmoid(nbyoc.conv(a, weights(1, 8, 3, 3), weights(1), pads=(1, 1, 1, 1)))
    c = nbyoc.relu(nbyoc.conv(v, weights(4, 8, 3, 3), weights(4), pads=(1, 1, 1, 1)))
    f = nbyoc.function([x], nbyoc.concatenate([b, c], axis=1))
    data = rng.standard_normal((3, 20, 24, 8)).astype(np.float32)
    expected = nbyoc.compile(f, "host")(data)
    for threshold in (1 << 15, 1 << 10, 64):  # (the smaller, the more stages grouped)
        fn = nbyoc.compile(f, options={"llvm": {"parallel_threshold": threshold}})
        assert fn.runtime_modules["llvm_0"].lowered.program is not None
        assert fn.get_source().count("_c = s") == 1  # one contiguous copy of the view
        np.testing.assert_allclose(fn(data), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32"])
def test_literals_of_every_dtype_keep_a_region_a_program(dtype):
    """A literal operand of add or multiply is a stage argument (lifted) or stays in
    the stage's code; either way the region is still a program and computes NumPy's
    result (an int64 one lifted made a kernel no table could pass it through: the region
    fell back to the host)."""
    x = nbyoc.var("x", (1024, 1024), dtype)
    f = nbyoc.function([x], (x + 7) * 3 - nbyoc.maximum(x, 2))
    fn = nbyoc.compile(f, backend="llvm", strict=True)
    (module,) = fn.runtime_modules.values()
    assert module.lowered.program is not None, module.lowered.not_a_program
    data = np.arange(1 << 20, dtype=dtype).reshape(1024, 1024) % 1000
    np.testing.assert_array_equal(fn(data), (data + 7) * 3 - np.maximum(data, 2))
