"""The examplejson backend: the guide's text, codegen -> parse round trips, numbers
equal to NumPy's, subgraphs kept apart, threads, liveness, and malformed text
that gives a clear error (never a crash or a wrong answer)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.examplejson import to_examplejson
from nbyoc.codegen.examplejson.module import ExampleJSONModule, op_kernel
from nbyoc.codegen.examplejson.parse import parse_examplejson
from nbyoc.errors import NbyocError, ParseError
from nbyoc.runtime import HostFunction

from ..helpers import assert_close_to_host, external, reload, run_in_threads
from ..strategies import assert_same_results, graphs, random_inputs
from . import conformance

GUIDE_TEXT = """\
subgraph_0
  input 0 10 10
  input 1 10 10
  input 2 10 10
  input 3 10 10
  add 4 inputs: 0 1 shape: 10 10
  sub 5 inputs: 4 2 shape: 10 10
  mul 6 inputs: 5 3 shape: 10 10
"""


def guide_inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((10, 10)).astype(np.float32) for _ in range(4)]


def run(module: ExampleJSONModule, name: str, inputs):
    func = module.subgraphs[name]
    outs = [np.empty(t.shape, t.dtype) for t in nbyoc.ir.types.tensor_types(func.ret_type)]
    module.get_function(name)(*inputs, *outs)
    return outs


def test_the_guides_text_loads_from_a_file_and_computes(tmp_path):
    path = tmp_path / "subgraph.examplejson"
    path.write_text(GUIDE_TEXT)
    module = nbyoc.load_module(path, "examplejson")
    a, b, c, d = guide_inputs()
    (out,) = run(module, "subgraph_0", [a, b, c, d])
    np.testing.assert_array_equal(out, ((a + b) - c) * d)
    assert module.get_source() == GUIDE_TEXT


def test_the_codegen_writes_the_guides_text_for_the_guides_graph():
    ins = [nbyoc.var(f"in{k}", (10, 10)) for k in range(4)]
    f = external(ins, [((ins[0] + ins[1]) - ins[2]) * ins[3]], "subgraph_0", "examplejson")
    assert to_examplejson(f) + "\n" == GUIDE_TEXT


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_codegen_then_parse_gives_the_same_graph(f):
    ext = f.with_attrs(global_symbol="sub_0")
    outputs = ext.body.fields if isinstance(ext.body, nbyoc.ir.Tuple) else [ext.body]
    if all(isinstance(o, nbyoc.ir.Var) for o in outputs):  # the graph computes nothing
        with pytest.raises(nbyoc.errors.CompileError, match="computes nothing"):
            to_examplejson(ext)
        return
    back = parse_examplejson(to_examplejson(ext))["sub_0"]
    assert nbyoc.structural_equal(back.body, ext.body) or nbyoc.structural_equal(
        nbyoc.ir.Function(back.params, back.body), nbyoc.ir.Function(ext.params, ext.body)
    )


@pytest.mark.parametrize(
    "dtypes",
    [("float32", "float32"), ("int32", "float64"), ("int64", "int32"), ("uint8", "int16"),
     ("float16", "int8"), pytest.param(("bool", "int8"), marks=pytest.mark.slow),
     pytest.param(("uint64", "uint32"), marks=pytest.mark.slow)],
)  # fmt: skip
def test_every_op_matches_numpy(dtypes):
    da, db = dtypes
    a, b = nbyoc.var("in0", (3, 4), da), nbyoc.var("in1", (4,), db)
    x = nbyoc.var("in2", (2, 3, 4), da)
    outs = [
        c
        for op in ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power"]
        for c in conformance.accepted("examplejson", op, a, b)
    ]
    outs += [
        c
        for op in ["negative", "abs", "exp", "sqrt", "tanh", "sigmoid", "relu"]
        for c in conformance.accepted("examplejson", op, a)
    ]
    outs += [nbyoc.sum(x, axis=(0, 2)), nbyoc.mean(x, axis=1, keepdims=True), nbyoc.max(x),
             nbyoc.reshape(x, (4, 6)), nbyoc.transpose(x, (2, 0, 1)), nbyoc.concatenate([x, x], axis=-1),
             a @ nbyoc.transpose(a)]  # fmt: skip
    f = external([a, b, x], outs, "sub_0", "examplejson")
    rng = np.random.default_rng(1)
    inputs = [
        (rng.integers(1, 5, s) if np.dtype(d).kind in "iu" else rng.uniform(0.5, 3, s)).astype(d)
        for s, d in [((3, 4), da), ((4,), db), ((2, 3, 4), da)]
    ]
    module = ExampleJSONModule.load_from_bytes(ExampleJSONModule(to_examplejson(f)).save_to_bytes())
    expected = HostFunction(f)(*inputs)
    for got, want in zip(run(module, "sub_0", inputs), expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        # float16: NumPy's sums round every step in float16, the kernels' once at the end.
        np.testing.assert_allclose(got, want, rtol=5e-3 if want.dtype == np.float16 else 1e-5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(dtypes=["float32", "float64"]))
def test_random_graphs_through_compile_match_the_host(f):
    fn = reload(nbyoc.compile(f, backend="examplejson"))
    assert_close_to_host(fn, f, random_inputs(f))


def test_each_subgraph_keeps_its_own_function_and_tensors():
    text = (
        GUIDE_TEXT
        + """subgraph_1
  input 0 2
  input 1 2
  mul 2 inputs: 0 1 shape: 2
  add 3 inputs: 2 0 shape: 2 dtype: float32
  output 3 2
"""
    )
    module = ExampleJSONModule(text)
    first = module.get_function("subgraph_0")
    second = module.get_function("subgraph_1")  # fetched last: must not redirect `first`
    a, b, c, d = guide_inputs()
    out = np.empty((10, 10), np.float32)
    first(a, b, c, d, out)
    np.testing.assert_array_equal(out, ((a + b) - c) * d)
    x = np.array([2, 3], np.float32)
    o0, o1 = np.empty(2, np.float32), np.empty(2, np.float32)
    second(x, x, o0, o1)
    np.testing.assert_array_equal(o0, x * x + x)
    np.testing.assert_array_equal(o1, x * x)
    with pytest.raises(NbyocError, match=r"no subgraph 'subgraph_9'.*subgraph_0, subgraph_1"):
        module.get_function("subgraph_9")


def test_intermediates_are_reused_by_liveness():
    lines = ["chain", "  input 0 100"] + [f"  exp {k + 1} inputs: {k} shape: 100" for k in range(6)]
    module = ExampleJSONModule("\n".join(lines))
    module.get_function("chain")
    program = module._programs["chain"]
    assert len(program.buffers) == 2


def test_a_node_s_kernel_takes_each_distinct_operand_once():
    # A concatenate of one tensor 600 times compiled a kernel of 600 parameters (over
    # 4 GiB and minutes); its kernel now takes the tensor once.
    x = nbyoc.var("x", (2, 3))
    kernel, _compiled = op_kernel(nbyoc.concatenate([x] * 40, axis=0))
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.empty((80, 3), np.float32)
    kernel(data, out)
    np.testing.assert_array_equal(out, np.concatenate([data] * 40))


def test_concurrent_calls_from_eight_threads_are_correct():
    module = ExampleJSONModule(GUIDE_TEXT)
    run_guide = module.get_function("subgraph_0")
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            a, b, c, d = (rng.standard_normal((10, 10)).astype(np.float32) for _ in range(4))
            out = np.empty((10, 10), np.float32)
            run_guide(a, b, c, d, out)
            if not np.array_equal(out, ((a + b) - c) * d):
                errors.append(seed)

    run_in_threads(worker)
    assert errors == []


HEAD = "g\n  input 0 2 2\n  input 1 2 2\n"


@pytest.mark.parametrize(
    "text,line,needle",
    [
        ("  input 0 2 2\n", 1, "expected a subgraph name"),
        (HEAD + "  frob 2 inputs: 0 1 shape: 2 2\n", 4, "unknown op 'frob'; known ops:"),
        (HEAD + "  add 2 inputs: 0 shape: 2 2\n", 4, "add takes 2 inputs, got 1"),
        (
            HEAD + "  add 2 inputs: 0 1 shape: 2 3\n",
            4,
            "declares shape (2 3) float32, but its inputs give",
        ),
        (HEAD + "  add 2 inputs: 0 1 shape: 2 2 dtype: int32\n", 4, "declares shape (2 2) int32"),
        (HEAD + "  add 2 inputs: 0 7 shape: 2 2\n", 4, "id 7 is not defined"),
        (HEAD + "  add 1 inputs: 0 0 shape: 2 2\n", 4, "id 1 is already defined"),
        (HEAD + "  add 2 inputs: 0 1\n", 4, "add needs 'shape:'"),
        (HEAD + "  add x inputs: 0 1 shape: 2 2\n", 4, "expected an id (an integer), found 'x'"),
        (HEAD + "  add 2 inputs: 0 1 shape: 2 2 axis: 1\n", 4, "add has no attribute 'axis'"),
        (HEAD + "  sum 2 inputs: 0 shape: 2 axis: 5\n", 4, "axis 5 is out of range"),
        ("g\n  input 0 2 -2\n", 2, "non-negative"),
        ("g\n  input 0 2 dtype: complex64\n  exp 1 inputs: 0 shape: 2\n", 2, "not supported"),
        ("g\n  input 0 2\n", 1, "computes nothing"),
        ("g\n  input 0 2\n  exp 1 inputs: 0 shape: 2\ng\n  input 0 2\n", 4, "defined twice"),
        ("g\n  input 0 2\n  const 1 shape: 2 dtype: float32 data: !!\n", 3, "bad base64"),
        ("g\n  input 0 2\n  const 1 shape: 2 dtype: float32 data: AAAA\n", 3, "needs 8"),
        ("g\n  input 0 2\n  exp 1 inputs: 0 shape: 2\n  output 9\n", 4, "id 9 is not defined"),
        ("", None, "no subgraph"),
    ],
)
def test_malformed_text_names_the_line_and_what_was_expected(text, line, needle):
    with pytest.raises(ParseError) as info:
        ExampleJSONModule(text)
    assert needle in str(info.value)
    assert info.value.line == line


def test_binary_garbage_is_a_load_error():
    with pytest.raises(nbyoc.errors.LoadError, match="UTF-8"):
        ExampleJSONModule.load_from_bytes(b"\xff\xfe\x00")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_text_gives_a_correct_result_or_a_clear_error(data):
    lines = GUIDE_TEXT.replace("10 10", "3 3").splitlines()
    k = data.draw(st.integers(0, len(lines) - 1))
    tokens = lines[k].split()
    how = data.draw(
        st.sampled_from(["drop_line", "drop_token", "swap_token", "duplicate_line", "number"])
    )
    if how == "drop_line":
        del lines[k]
    elif how == "duplicate_line":
        lines.insert(k, lines[k])
    elif tokens:
        j = data.draw(st.integers(0, len(tokens) - 1))
        if how == "drop_token":
            del tokens[j]
        elif how == "swap_token":
            tokens[j] = data.draw(
                st.sampled_from(["add", "sub", "mul", "exp", "inputs:", "shape:", "x", "-1", "7"])
            )
        else:
            tokens[j] = str(data.draw(st.integers(-2, 9)))
        lines[k] = "  " + " ".join(tokens)
    text = "\n".join(lines)
    try:
        module = ExampleJSONModule(text)
    except ParseError:
        return
    for name, func in module.subgraphs.items():
        inputs = [
            np.random.default_rng(0).standard_normal(p.type.shape).astype(p.type.dtype)
            for p in func.params
        ]
        expected = HostFunction(func)(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert_same_results(tuple(run(module, name, inputs)), expected)
