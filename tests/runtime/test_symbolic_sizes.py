"""Functions with symbolic sizes: compiled once, run at every size, on every backend.

The targets of size-generic compiling, counted: a new batch size of an ONNX model, a
new sequence length of a transformer and a new length of a ``nbyoc.jit`` function
compile no kernel (``nbyoc.runtime.compiles``); results match the host reference
(and ONNX Runtime); a size that breaks what the types assumed is an error naming the
symbols and their values; a saved executable keeps its symbols in another process."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import ShapeMismatchError
from nbyoc.ir.specialize import generalize, specialize, substitute_type
from nbyoc.runtime.compiles import compile_counts

from ..frontend import models
from ..helpers import examples, run_fresh
from ..strategies import graphs, random_inputs
from ..tolerance import assert_within, error_bounds

BACKENDS = ["host", "llvm", "csource", "examplejson"]


def _close_to_host(got, func, args, what: str) -> None:
    """``got`` within the error bounds of the host's result of ``func`` (concrete)."""
    expected = nbyoc.compile(func, "host")(*args)
    outputs = zip(*(v if isinstance(v, tuple) else (v,) for v in (got, expected)))
    for (g, e), bound in zip(outputs, error_bounds(func, args)):
        assert_within(g, e, bound, what)


def _close_to_onnx_runtime(got, expected, what: str) -> None:
    # (as the other model tests hold nbyoc against ONNX Runtime)
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-5, err_msg=what)


def _kernels() -> int:
    """Kernel modules and C libraries this process has made so far."""
    counts = compile_counts()
    return counts.get("llvm modules", 0) + counts.get("c libraries", 0)


def _mlp_function():
    x = nbyoc.var("x", ("n", 8))
    w = nbyoc.const(np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4))
    return nbyoc.function([x], nbyoc.tanh(x @ w + 0.5).sum(axis=1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_runs_a_function_with_symbolic_sizes_at_every_size(backend, tmp_path):
    f = _mlp_function()
    if backend in ("csource", "examplejson"):  # (they say, at compile, that they are not)
        with pytest.warns(nbyoc.errors.PerShapeWarning, match=f"{backend} builds code for "
                                                              f"fixed shapes.*size.s. n"):  # fmt: skip
            fn = nbyoc.compile(f, backend)
    else:
        fn = nbyoc.compile(f, backend)
    assert fn.size_generic == (backend in ("host", "llvm"))
    assert fn.signature == "(x: Tensor[(n, 8), float32]) -> Tensor[(n,), float32]"
    path = tmp_path / "sym.nbyoc"
    fn.save(path)
    loaded = nbyoc.load(path)
    for n in (1, 3, 7, 64):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        for run in (fn, loaded):
            _close_to_host(run(x), specialize(f, {"n": n}), [x], f"{backend} at n={n}")
    assert sorted(key[0][1] for key in fn.specializations) == [1, 3, 7, 64]


def test_a_new_size_compiles_no_kernel_on_llvm():
    fn = nbyoc.compile(_mlp_function())
    fn(np.ones((5, 8), np.float32))  # compiles the kernels of the function's structure
    before = _kernels()
    for n in (6, 13, 200, 1000):
        fn(np.ones((n, 8), np.float32))
    assert _kernels() == before


@pytest.fixture(scope="module")
def ort():
    return pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_a_new_batch_size_of_an_onnx_model_compiles_nothing_and_matches_onnx_runtime(name, ort):
    model = getattr(models, name)()
    rep = nbyoc.frontend.onnx.Backend.prepare(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    before = None
    for n in (2, 3, 8, 1):
        x = np.random.default_rng(n).standard_normal([n, *shape[1:]]).astype(np.float32)
        got = rep.run([x])[0]
        _close_to_onnx_runtime(got, session.run(None, {"x": x})[0], f"{name} at batch {n}")
        if before is None:
            before = _kernels()  # (the first run compiles)
        elif n != 1:  # (a batch of 1 broadcasts where others do not: its own structure)
            assert _kernels() == before, f"{name}: batch {n} compiled"
    assert len(rep.symbolic) == 1 and not rep.executables  # one executable for every size


def test_a_new_sequence_length_of_a_transformer_compiles_nothing(ort):
    model = models.transformer(dynamic_tokens=True)
    fn = nbyoc.compile(nbyoc.from_onnx(model))
    assert fn.signature.startswith("(x: Tensor[(N, T, 16), float32])")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    before = None
    for tokens in (5, 9, 12, 31):
        x = np.random.default_rng(tokens).standard_normal((2, tokens, 16)).astype(np.float32)
        _close_to_onnx_runtime(fn(x), session.run(None, {"x": x})[0], f"{tokens} tokens")
        if before is None:
            before = _kernels()
        assert _kernels() == before, f"{tokens} tokens compiled"


def test_a_new_length_of_a_jit_function_compiles_nothing():
    @nbyoc.jit
    def scaled(a, b):
        return np.exp(a) * b + a.sum(axis=1, keepdims=True)

    sizes = (4, 8, 16, 3, 100)
    for k, n in enumerate(sizes):
        a, b = (np.random.default_rng(n + i).random((n, 5), dtype=np.float32) for i in (0, 1))
        if k == 2:
            before = _kernels()  # (4 specialises, 8 makes the size-generic version)
        _close_to_host(scaled(a, b), scaled.trace(a, b), [a, b], f"n={n}")
    assert _kernels() == before
    assert scaled.signatures == ["(a: float32[4, 5], b: float32[4, 5])",
                                 "(a: float32[s0, 5], b: float32[s0, 5])"]  # fmt: skip


def test_jit_dynamic_true_and_false_and_sizes_that_part_ways():
    generic = nbyoc.jit(lambda a, b: a.sum() + b.sum(), dynamic=True)
    fixed = nbyoc.jit(lambda a, b: a.sum() + b.sum(), dynamic=False)
    for n, m in ((4, 4), (8, 8), (8, 6)):
        a, b = np.ones(n, np.float32), np.ones(m, np.float32)
        assert generic(a, b) == fixed(a, b) == n + m
    # equal sizes shared a symbol; when they part ways that call is compiled for its shapes
    assert generic.signatures == ["(a: float32[s0], b: float32[s0])",
                                  "(a: float32[8], b: float32[6])"]  # fmt: skip
    assert len(fixed.signatures) == 3
    # a function whose tracing needs a size's value is compiled per shape
    listed = nbyoc.jit(lambda x: np.stack([x[i] for i in range(len(x))]) * 2, dynamic=True)
    assert listed(np.ones(3, np.float32)).shape == (3,) and listed.signatures == ["(x: float32[3])"]
    with pytest.raises(nbyoc.errors.NbyocTypeError, match="dynamic must be None, True or False"):
        nbyoc.jit(np.exp, dynamic="yes")


def test_sizes_that_break_an_assumption_are_named_with_their_values():
    x, y = nbyoc.var("x", ("n", 3)), nbyoc.var("y", ("m", 3))
    fn = nbyoc.compile(nbyoc.function([x, y], x + y))
    assert fn(np.ones((4, 3), np.float32), np.ones((1, 3), np.float32)).shape == (4, 3)
    with pytest.raises(ShapeMismatchError, match=r"size m must be 1 or equal n .* m = 3, n = 4"):
        fn(np.ones((4, 3), np.float32), np.ones((3, 3), np.float32))
    a, b = nbyoc.var("a", ("n",)), nbyoc.var("b", ("n",))
    fn = nbyoc.compile(nbyoc.function([a, b], a * b))
    with pytest.raises(ShapeMismatchError, match=r"argument 1 \(b\) has size 5 on axis 0, where "
                                                 r"its type says n = 4 .*from argument 0 \(a\)"):  # fmt: skip
        fn(np.ones(4, np.float32), np.ones(5, np.float32))
    c = nbyoc.var("c", ("2*n + 1",))
    fn = nbyoc.compile(nbyoc.function([c], c * 2.0), "host")
    assert fn(np.ones(9, np.float32)).shape == (9,) and fn.bind_sizes([(9,)]) == {"n": 4}
    with pytest.raises(ShapeMismatchError, match="has size 8 on axis 0, where its type says"):
        fn(np.ones(8, np.float32))


@pytest.mark.parametrize("mode, limit", [("reflect", 3), ("wrap", 2)])
def test_a_pad_over_a_symbolic_length_checks_its_limit_at_call(mode, limit):
    # reflect pads by at most length - 1, wrap by at most the length: unprovable for a
    # symbol, so a call-time check; the op's decomposition needs the length's value,
    # so llvm leaves the pad whole on the host and compiles what follows it
    x = nbyoc.var("x", (2, "m"))
    f = nbyoc.function([x], nbyoc.call_op("pad", x, pads=(0, 3, 0, 2), mode=mode) * 2.0)
    assert str(f.ret_type) == "Tensor[(2, m + 5), float32]"
    fn = nbyoc.compile(f)
    assert [g.attrs.get("Compiler") for g in fn.module.functions.values()] == [None, "llvm"]
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(fn(a), np.pad(a, ((0, 0), (3, 2)), mode=mode) * 2)
    with pytest.raises(
        ShapeMismatchError, match=rf"pad: size .* must be at least 3 .* m = {limit}"
    ):
        fn(np.ones((2, limit), np.float32))


def test_exporting_symbolic_sizes_says_to_fix_them(tmp_path):
    with pytest.warns(nbyoc.errors.PerShapeWarning):
        fn = nbyoc.compile(_mlp_function(), "csource")
    with pytest.raises(nbyoc.errors.CompileError, match=r"sizes are symbolic.*specialize"):
        fn.export_library(tmp_path / "lib.so")


def test_a_symbol_no_argument_gives_is_refused_at_compile():
    x = nbyoc.var("x", ("n*m",))
    with pytest.raises(nbyoc.errors.NbyocTypeError, match="cannot be found from the arguments"):
        nbyoc.compile(nbyoc.function([x], x * 2.0), "host")


def test_a_saved_symbolic_executable_runs_every_size_in_another_process(tmp_path):
    nbyoc.compile(_mlp_function()).save(tmp_path / "mlp.nbyoc")
    code = (
        "import json, sys, numpy as np, nbyoc\n"
        "fn = nbyoc.load(sys.argv[1])\n"
        "print(json.dumps([fn(np.ones((n, 8), np.float32)).tolist() for n in (2, 5)]))\n"
    )
    got = run_fresh(code, tmp_path, str(tmp_path / "mlp.nbyoc"))
    expected = [nbyoc.compile(_mlp_function(), "host")(np.ones((n, 8), np.float32)).tolist()
                for n in (2, 5)]  # fmt: skip
    np.testing.assert_allclose(np.concatenate(got), np.concatenate(expected), rtol=1e-5)


@settings(
    max_examples=examples(16), deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)  # fmt: skip
@given(graphs(dtypes=["float32", "float64", "int32"]), st.integers(2, 9))
def test_random_graphs_with_a_symbolic_leading_size_match_the_host(func, other):
    """A random graph with the leading size of its parameters made one symbol (where they
    share it) builds, and the llvm build matches the host at the traced size and two others;
    at a size the graph cannot take (a reshape's fixed target) the call says so."""
    lead = {p.type.shape[0] for p in func.params if p.type.ndim}
    assume(len(lead) == 1 and next(iter(lead)) > 1)
    size = next(iter(lead))
    dims = {p.name_hint: ("n", *[None] * (p.type.ndim - 1)) for p in func.params if p.type.ndim}
    try:
        symbolic = generalize(func, dims)
    except nbyoc.errors.NbyocTypeError:
        assume(False)  # (a size the graph needs to know, such as an integer index)
    fn = nbyoc.compile(symbolic)
    # (a third size: the later ones mostly run from the first's template, whose guards
    # must hold for them: ``codegen.llvm.templates``)
    for n in (size, other, other + 5):
        shapes = [substitute_type(p.type, {"n": n}) for p in symbolic.params]
        args = random_inputs(nbyoc.function([nbyoc.var(f"a{i}", t.shape, t.dtype)
                                             for i, t in enumerate(shapes)], nbyoc.const(0)),
                             seed=n)  # fmt: skip
        try:
            concrete = specialize(symbolic, {"n": n})
        except nbyoc.errors.NbyocTypeError as e:  # (the same refusal, from the executable)
            with pytest.raises((ShapeMismatchError, type(e))):
                fn(*args)
            continue
        try:
            nbyoc.compile(concrete, "host")(*args)
        except nbyoc.errors.ExecutionError as e:  # (random values for an index operand)
            assert "index is out of range" in str(e), e
            with pytest.raises(nbyoc.errors.ExecutionError, match="index is out of range"):
                fn(*args)
            continue
        _close_to_host(fn(*args), concrete, args, f"n={n}")
