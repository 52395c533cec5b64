"""The csource backend: the guide's C text, numbers equal to NumPy's for every op,
dtype, rank and broadcast, buffer reuse, fusion, building and caching, and
arguments refused without crashing. Every module is saved and loaded before
its numbers are checked."""

import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import nbyoc
from nbyoc.codegen.csource import emit_c
from nbyoc.codegen.csource.module import CSourceModule
from nbyoc.codegen.csource.rules import C_DTYPES
from nbyoc.errors import ArgumentError, CompileError, ExecutionError, LoadError

from ..helpers import assert_matches_host, external, reload, run_in_threads
from ..strategies import random_inputs
from . import conformance
from .conformance import EXACT

DTYPES = C_DTYPES  # (bfloat16 has no C type: csource refuses it, the host runs it)


def reference_external():
    ins = [nbyoc.var(f"in{k}", (10, 10)) for k in range(4)]
    return external(ins, [((ins[0] + ins[1]) - ins[2]) * ins[3]], "csource_0", "csource")


def subgraph_body(source: str, symbol: str = "csource_0") -> str:
    """The text of the subgraph function ``<symbol>_`` in ``source``."""
    return source.split(f"int {symbol}_(")[1].split("\n}")[0]


def reloaded(func, fused=False) -> CSourceModule:
    module = CSourceModule(func, fused=fused)
    return CSourceModule.load_from_bytes(module.save_to_bytes())


def run_module(func, inputs, fused=False):
    """Outputs of ``func`` compiled to C (after save -> load), as a list."""
    module = reloaded(func, fused)
    outs = [np.empty(t.shape, t.dtype) for t in nbyoc.ir.types.tensor_types(func.ret_type)]
    module.get_function(func.attrs["global_symbol"])(*inputs, *outs)
    return outs


def check_against_numpy(func, inputs, fused=False, exact_ops=EXACT):
    """Bitwise equal where only exactly rounded ops are involved, else within 2 ulp-ish."""
    outputs = run_module(func, inputs, fused)
    tolerance = {"float16": 1e-3, "float32": 2e-6, "float64": 1e-14}
    assert_matches_host(func, outputs, inputs, exact_ops, tolerance)


# -- the reference design's text ------------------------------------------------


def test_the_guides_subgraph_gives_the_guides_c():
    source = emit_c(reference_external())
    macro_lines = [line for line in source.splitlines() if line.startswith("CSOURCE_BINARY_OP_2D(")]
    assert macro_lines == [
        "CSOURCE_BINARY_OP_2D(csource_0_0, *, 10, 10);",
        "CSOURCE_BINARY_OP_2D(csource_0_1, -, 10, 10);",
        "CSOURCE_BINARY_OP_2D(csource_0_2, +, 10, 10);",
    ]
    body = subgraph_body(source)
    assert "float* buf_0 = (float*)malloc(4 * 100);" in body
    assert "float* buf_1 = (float*)malloc(4 * 100);" in body
    assert "buf_2" not in body
    calls = [line.strip() for line in body.splitlines() if line.strip().startswith("csource_0_")]
    assert calls == [
        "csource_0_2(in0, in1, buf_0);",
        "csource_0_1(buf_0, in2, buf_1);",
        "csource_0_0(buf_1, in3, out);",
    ]
    assert body.rindex("free(buf_0);") > body.index("csource_0_0(buf_1, in3, out);")
    assert (
        "int csource_0_wrapper(DLTensor* arg0, DLTensor* arg1, DLTensor* arg2, DLTensor* arg3, "
        "DLTensor* out)" in source
    )
    assert "NBYOC_EXPORT int csource_0(DLTensor** args, int32_t num_args)" in source
    assert "typedef struct {\n  void* data;" in source and "tvm" not in source.lower()
    assert "#define CSOURCE_BINARY_OP_2D(p_ID_, p_OP_, p_DIM1_, p_DIM2_)" in source


def test_a_chain_needs_at_most_two_buffers():
    x = nbyoc.var("in0", (8,))
    y = x
    for op in ["exp", "negative", "tanh", "abs", "sqrt", "sigmoid", "relu"]:
        y = nbyoc.call_op(op, y)
    source = emit_c(external([x], [y], "csource_0", "csource"))
    assert "buf_1" in source and "buf_2" not in source
    check_against_numpy(
        external([x], [y], "csource_0", "csource"), random_inputs(nbyoc.function([x], y))
    )


def test_large_buffers_come_from_a_pool_no_two_concurrent_calls_share():
    """Buffers of 128 KiB and more are kept between calls instead of malloc'd per
    call; eight threads calling one kernel at once each get their own numbers."""
    ins = [nbyoc.var(f"in{k}", (256, 256)) for k in range(4)]
    f = external(ins, [((ins[0] + ins[1]) - ins[2]) * ins[3]], "csource_0", "csource")
    body = subgraph_body(emit_c(f))
    assert body.count("= (float*)nbyoc_take_large(4 * 65536);") == 2 and "malloc" not in body
    assert body.count("nbyoc_give_back(buf_") == 4  # on the out-of-memory path and at the end
    kernel = reloaded(f).get_function("csource_0")
    failures = []

    def worker(seed):
        a, b, c, d = (
            np.random.default_rng([seed, k]).random((256, 256), np.float32) for k in range(4)
        )
        want, out = ((a + b) - c) * d, np.empty((256, 256), np.float32)
        for _ in range(30):
            kernel(a, b, c, d, out)
            if not np.array_equal(out, want):
                failures.append(seed)

    run_in_threads(worker)
    assert failures == []


def test_fused_option_emits_one_loop_nest_and_no_buffers():
    source = emit_c(reference_external(), fused=True)
    assert "buf_0" not in source and "CSOURCE_BINARY_OP" not in source
    assert source.count("for (int64_t i1") == 1 and source.count("for (int64_t i2") == 1
    f = reference_external()
    check_against_numpy(f, random_inputs(f), fused=True)


# -- numbers ----------------------------------------------------------------------


@pytest.mark.parametrize("da, db, fused", conformance.dtype_pairs(DTYPES, (False, True)))
def test_binary_ops_every_dtype_pair_with_broadcasting(da, db, fused):
    check_against_numpy(*conformance.binary_ops("csource", da, db), fused)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_ops_every_dtype(dtype, fused):
    with np.errstate(all="ignore"):  # log and sqrt of negatives give NaN on both sides
        check_against_numpy(*conformance.unary_ops("csource", dtype), fused)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_special_values_follow_numpy(dtype):
    with np.errstate(all="ignore"):
        check_against_numpy(
            *conformance.special_values("csource", dtype), exact_ops=EXACT | {"sigmoid"}
        )


def test_integer_overflow_wraps_like_numpy():
    with np.errstate(all="ignore"):  # NumPy warns of the divisions by zero it computes
        check_against_numpy(*conformance.integer_overflow("csource"))


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize(
    "dtypes",
    [("bool", "float32", "int32"), ("uint8", "int8", "uint16"), ("int64", "uint64", "bool")],
)
def test_where_and_cast_like_numpy(dtypes, fused):
    with np.errstate(all="ignore"):  # casts of large values to small dtypes wrap, as in NumPy
        check_against_numpy(*conformance.where_and_cast("csource", dtypes), fused=fused)


@settings(max_examples=12, deadline=None)
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
    dtypes=st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)),
    fused=st.booleans(),
)
def test_ranks_zero_to_four_with_broadcasting(shapes, dtypes, fused):
    check_against_numpy(*conformance.broadcast_ranks("csource", shapes.input_shapes, dtypes), fused)


@pytest.mark.parametrize("fused", [False, True])
def test_constants_several_outputs_and_outputs_that_are_inputs(fused):
    x, s = nbyoc.var("in0", (2, 3), "float64"), nbyoc.var("in1", (), "float32")
    k = nbyoc.const(np.array([1.5, np.nan, -np.inf], np.float64))
    i = nbyoc.const(np.array([-(2**63), 2**63 - 1, 0], np.int64))
    t = x * k
    outputs = [t, x, k, t + i, nbyoc.const(np.float32(0.1)) * s, t]
    f = external([x, s], outputs, "csource_0", "csource")
    assert "static const double csource_0_const_0[3]" in emit_c(f, fused)
    check_against_numpy(f, [np.arange(6.0).reshape(2, 3), np.asarray(3, np.float32)], fused)


def test_negative_integer_power_raises_like_numpy():
    x, y = nbyoc.var("in0", (2,), "int64"), nbyoc.var("in1", (2,), "int64")
    module = reloaded(external([x, y], [x**y], "csource_0", "csource"))
    out = np.empty(2, np.int64)
    with pytest.raises(ExecutionError, match="Integers to negative integer powers are not allowed"):
        module.get_function("csource_0")(np.array([2, 3]), np.array([1, -1]), out)


def test_zero_size_arrays():
    check_against_numpy(*conformance.zero_size("csource"))


# -- through nbyoc.compile -----------------------------------------------------


def test_reference_graph_through_compile_matches_numpy():
    from nbyoc.demo import numpy_reference, reference_graph

    fn = reload(nbyoc.compile(reference_graph((10, 10)), backend="csource"))
    args = random_inputs(reference_graph((10, 10)))
    np.testing.assert_array_equal(fn(*args), numpy_reference(*args))
    assert list(fn.sources) == ["csource_0"]


def test_a_graph_mixing_csource_and_host_ops():
    a, b = nbyoc.var("a", (3, 4)), nbyoc.var("b", (4, 2))
    h = nbyoc.sum(nbyoc.exp(a) * 2.0, axis=0, keepdims=True)  # sum stays on the host
    f = nbyoc.function([a, b], [nbyoc.relu((a - h) @ b) + 1.0, h])  # so does matmul
    fn = reload(nbyoc.compile(f, backend="csource"))
    assert sorted(fn.runtime_modules) == ["csource_0", "csource_1", "csource_2"]
    args = random_inputs(f)
    expected = nbyoc.compile(f, backend="host")(*args)
    for got, want in zip(fn(*args), expected):
        np.testing.assert_allclose(got, want, rtol=1e-6)


# -- refusing bad arguments -----------------------------------------------------


@pytest.fixture(scope="module")
def reference_function():
    return reloaded(reference_external()).get_function("csource_0")


def good_args():
    return [np.ones((10, 10), np.float32) for _ in range(4)] + [np.empty((10, 10), np.float32)]


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda a: a[:4], "csource_0 outputs takes 1 argument"),
        (lambda a: [*a, a[0]], "csource_0 outputs takes 1 argument"),
        (lambda a: [a[0].astype(np.float64), *a[1:]], "got dtype float64"),
        (lambda a: [a[0][:, :5], *a[1:]], "got shape (10, 5)"),
        (lambda a: [a[0].tolist(), *a[1:]], "should be a numpy.ndarray"),
        (lambda a: [*a[:4], np.empty((10, 20), np.float32)[:, ::2]], "must be C-contiguous and writeable"),
        (lambda a: [*a[:4], np.broadcast_to(np.float32(0), (10, 10))], "must be C-contiguous and writeable"),
        (lambda a: [*a[:4], a[0]], "output argument 4 overlaps argument 0"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_before_native_code_runs(reference_function, mutate, needle):
    with pytest.raises(ArgumentError) as info:
        reference_function(*mutate(good_args()))
    assert needle in str(info.value)


def test_strided_inputs_are_copied_to_contiguous_ones(reference_function):
    args = good_args()
    args[1] = np.arange(200, dtype=np.float32).reshape(10, 20)[:, ::2]
    reference_function(*args)
    np.testing.assert_array_equal(args[4], ((args[0] + args[1]) - args[2]) * args[3])


def test_the_native_entry_point_checks_dltensors_itself():
    import cffi

    module = reloaded(reference_external())
    ffi = cffi.FFI()
    ffi.include(module._ffi)
    tensors = ffi.new("DLTensor[5]")
    shape = ffi.new("int64_t[2]", [10, 10])
    keep = [np.ones((10, 10), np.float32) for _ in range(5)]
    pointers = ffi.new("DLTensor*[5]")
    for k in range(5):
        tensors[k].device.device_type = 1
        tensors[k].ndim = 2
        tensors[k].dtype.code, tensors[k].dtype.bits, tensors[k].dtype.lanes = 2, 32, 1
        tensors[k].shape = shape
        tensors[k].data = ffi.from_buffer(keep[k])
        pointers[k] = tensors + k

    def call(n=5):
        rc = module._entry(pointers, n)
        return rc, ffi.string(module._last_error()).decode()

    assert call() == (0, "")
    assert call(4)[0] == 1 and "takes 5 arguments" in call(4)[1]
    tensors[2].dtype.bits = 64
    assert call() == (
        2,
        "argument 2 (input in2) should have dtype code 2 with 32 bits, got code 2, 64 bits, 1 lanes",
    )
    tensors[2].dtype.bits = 32
    tensors[3].ndim = 3
    assert call()[0] == 2 and "should have 2 dimensions" in call()[1]
    tensors[3].ndim = 2
    strides = ffi.new("int64_t[2]", [1, 10])
    tensors[4].strides = strides
    assert call()[0] == 2 and "not C-contiguous" in call()[1]
    tensors[4].strides = ffi.NULL
    pointers[1] = ffi.NULL
    assert call() == (2, "argument 1 (input in1) is NULL")


# -- building, caching, loading ---------------------------------------------------


def compiler_runs(monkeypatch):
    runs = []
    real = subprocess.run

    def counting(cmd, *args, **kwargs):
        if "-shared" in cmd:
            runs.append(cmd)
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    return runs


def test_the_second_build_of_the_same_source_runs_no_compiler(monkeypatch):
    x = nbyoc.var("in0", (7,))
    f = external([x], [x * 3.0 - 1.0], "csource_cache_test", "csource")
    runs = compiler_runs(monkeypatch)
    first = CSourceModule(f)
    second = CSourceModule(f)
    assert len(runs) == 1 and first.library_path == second.library_path
    assert first.library_path.with_suffix(".c").read_text() == first.get_source()


def test_cflags_are_part_of_the_cache_key(monkeypatch):
    x = nbyoc.var("in0", (5,))
    f = external([x], [x + 1.0], "csource_flags_test", "csource")
    monkeypatch.setenv("CFLAGS", "-O1")
    runs = compiler_runs(monkeypatch)
    a = CSourceModule(f)
    monkeypatch.setenv("CFLAGS", "-O2")
    b = CSourceModule(f)
    assert len(runs) == 2 and a.library_path != b.library_path
    assert "-O2" in runs[1] and "-fwrapv" in runs[1]


def test_a_missing_compiler_is_a_compile_error(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc-nbyoc")
    x = nbyoc.var("in0", (3,))
    with pytest.raises(CompileError, match="C compiler '/nonexistent/cc-nbyoc' not found"):
        CSourceModule(external([x], [x + 2.0], "csource_nocc", "csource"))


def test_a_failing_compile_reports_the_compiler_message_and_source(monkeypatch):
    monkeypatch.setenv("CFLAGS", "-O2 -Werror=this-warning-does-not-exist")
    x = nbyoc.var("in0", (3,))
    with pytest.raises(CompileError) as info:
        CSourceModule(external([x], [x + 3.0], "csource_badflags", "csource"))
    message = str(info.value)
    assert "the C compiler failed on" in message and ".c" in message
    assert "this-warning-does-not-exist" in message


def test_unsupported_nodes_are_refused_by_the_codegen():
    x = nbyoc.var("in0", (3, 3))
    with pytest.raises(CompileError, match="csource cannot compile Call\\(matmul"):
        emit_c(external([x], [x @ x], "csource_0", "csource"))


@pytest.mark.parametrize("data,needle", conformance.malformed_saved_modules("csource"))
def test_loading_malformed_bytes_raises_load_error(data, needle):
    with pytest.raises(LoadError, match=needle):
        CSourceModule.load_from_bytes(data)


def test_loading_bad_options_raises_load_error():
    x = nbyoc.var("in0", (2,))
    saved = CSourceModule(external([x], [x + 1.0], "csource_opt", "csource")).save_to_bytes()
    assert b'"fused": false' in saved
    with pytest.raises(LoadError, match="option 'fused' must be"):
        CSourceModule.load_from_bytes(saved.replace(b'"fused": false', b'"fused": "yes"'))


def test_codegen_options_reach_the_codegen():
    from nbyoc.demo import reference_graph

    fn = nbyoc.compile(
        reference_graph((4, 4)), backend="csource", options={"csource": {"fused": True}}
    )
    assert "(fused)" in fn.get_source("csource_0")
    with pytest.raises(CompileError, match="unknown option"):
        nbyoc.compile(reference_graph((4, 4)), backend="csource", options={"csource": {"fast": 1}})


def test_dtypes_without_a_c_type_are_refused_at_compile_and_left_to_others_by_partitioning():
    x = nbyoc.var("in0", (4,), "bfloat16")
    with pytest.raises(CompileError, match="csource has no C type for bfloat16"):
        emit_c(external([x], [nbyoc.exp(x)], "csource_0", "csource"))
    f = nbyoc.function([x], nbyoc.cast(nbyoc.exp(x), "float32") + 1)
    fn = nbyoc.compile(f, backend="csource")
    assert [g.attrs["Compiler"] for g in fn.module.functions.values() if "Compiler" in g.attrs] == [
        "csource"
    ]  # (only the float32 add)
    data = np.array([0.5, 1, 2, 3], "bfloat16")
    np.testing.assert_array_equal(fn(data), nbyoc.compile(f, backend="host")(data))
