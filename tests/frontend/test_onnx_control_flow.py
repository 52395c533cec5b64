"""ONNX control flow: an If whose condition is known while importing is replaced by the
branch it takes (nested Ifs too), matching ONNX Runtime; one deciding at run time is
refused naming what would fix it; ops nbyoc lacks inside subgraphs are counted."""

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nbyoc
from nbyoc.errors import ModelImportError, NeedsConstantError

from .test_onnx_import import make, tensor


def _graph(name, nodes, outputs, initializers=()):
    return helper.make_graph(nodes, name, [], outputs, list(initializers))


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def mode_model():
    """y = If(mode == 1): relu(x) * 2 (a branch-local initializer), else: an inner If
    on a constant picks -x (its then branch) over x + 100."""
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    then = _graph("then", [helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Mul", ["r", "two"], ["t"])],
                  [tensor("t", [2, 3])], [two])  # fmt: skip
    inner_then = _graph(
        "inner_then", [helper.make_node("Neg", ["x"], ["n"])], [tensor("n", [2, 3])]
    )
    hundred = numpy_helper.from_array(np.array(100.0, np.float32), "hundred")
    inner_else = _graph("inner_else", [helper.make_node("Add", ["x", "hundred"], ["h"])],
                        [tensor("h", [2, 3])], [hundred])  # fmt: skip
    otherwise = _graph(
        "else",
        [helper.make_node("Constant", [], ["yes"], value=numpy_helper.from_array(np.array(True))),
         helper.make_node("If", ["yes"], ["e"], then_branch=inner_then, else_branch=inner_else)],
        [tensor("e", [2, 3])],
    )  # fmt: skip
    nodes = [
        helper.make_node("Equal", ["mode", "one"], ["cond"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=otherwise),
    ]
    return make(nodes, [tensor("x", [2, 3]), tensor("mode", [], TensorProto.INT64)],
                [tensor("y", [2, 3])], [_ints("one", 1)])  # fmt: skip


@pytest.mark.parametrize("mode", [0, 1])
def test_an_if_on_a_fixed_input_takes_its_branch_and_matches_onnx_runtime(mode):
    ort = pytest.importorskip("onnxruntime")
    model = mode_model()
    x = np.array([[-1.5, 0, 2], [3, -4, 0.25]], np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x, "mode": np.array(mode, np.int64)})
    f = nbyoc.from_onnx(model, constants={"mode": np.array(mode, np.int64)})
    assert [p.name_hint for p in f.params] == ["x"]
    ops = {n.op.name for n in nbyoc.ir.post_order([f.body]) if isinstance(n, nbyoc.ir.Call)}
    assert ops == ({"relu", "multiply"} if mode else {"negative"})  # only the branch taken
    for backend in ("host", "llvm"):
        np.testing.assert_array_equal(nbyoc.compile(f, backend)(x), expected)


def test_an_if_deciding_at_run_time_becomes_a_cond_that_takes_either_branch():
    ort = pytest.importorskip("onnxruntime")
    model = mode_model()
    f = nbyoc.from_onnx(model)
    assert [n.op.name for n in nbyoc.ir.post_order([f.body])
            if isinstance(n, nbyoc.ir.Call)].count("cond") == 1  # fmt: skip
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    for backend in ("host", "llvm"):
        run = nbyoc.compile(f, backend)
        for mode in (1, 0):
            (expected,) = session.run(None, {"x": x, "mode": np.array(mode)})
            np.testing.assert_array_equal(run(x, np.array(mode)), expected)


def test_an_if_deciding_at_run_time_between_types_is_refused_saying_how_to_fix_it():
    wide = _graph("wide", [helper.make_node("Concat", ["x", "x"], ["w"], axis=0)],
                  [tensor("w", None)])  # fmt: skip
    same = _graph("same", [helper.make_node("Identity", ["x"], ["s"])], [tensor("s", None)])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=wide, else_branch=same)]
    model = make(nodes, [tensor("x", [2]), tensor("c", [], TensorProto.BOOL)], [tensor("y", None)])
    with pytest.raises(ModelImportError, match=r"branches give different types.*constants="):
        nbyoc.from_onnx(model)
    assert nbyoc.from_onnx(model, constants={"c": np.array(False)}).body.type.shape == (2,)


def test_an_if_on_a_size_follows_the_size():
    # As PyTorch exports an LSTM wrapper: squeeze the batch axis when the batch is 1.
    squeeze = _graph("squeeze", [helper.make_node("Squeeze", ["x", "zero1"], ["s"])],
                     [tensor("s", None)], [_ints("zero1", [0])])  # fmt: skip
    keep = _graph("keep", [helper.make_node("Identity", ["x"], ["k"])], [tensor("k", None)])
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
        helper.make_node("Equal", ["batch", "one"], ["single"]),
        helper.make_node("If", ["single"], ["y"], then_branch=squeeze, else_branch=keep),
    ]
    model = make(nodes, [tensor("x", ["batch", 4])], [tensor("y", None)],
                 [_ints("zero", 0), _ints("one", 1)])  # fmt: skip
    assert nbyoc.from_onnx(model, shapes={"x": (1, 4)}).body.type.shape == (4,)
    assert nbyoc.from_onnx(model, shapes={"x": (3, 4)}).body.type.shape == (3, 4)
    with pytest.raises(NeedsConstantError, match=r"batch.*shapes="):
        nbyoc.from_onnx(model)


def test_ops_nbyoc_lacks_inside_subgraphs_are_counted_with_the_rest():
    body = _graph("b", [helper.make_node("Unique", ["x"], ["l"]),
                        helper.make_node("FancyOp", ["x"], ["f"], domain="com.example")],
                  [tensor("f", [2])])  # fmt: skip
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True))),
             helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body),
             helper.make_node("Unique", ["x"], ["z"])]  # fmt: skip
    model = make(nodes, [tensor("x", [2]), tensor("n", [], TensorProto.INT64)], [tensor("y", [2])])
    message = "the model uses 5 node(s) of op types nbyoc does not import, 4 of them inside "
    message += "subgraphs: FancyOp x2 (com.example), Unique x3 (ai.onnx)"
    with pytest.raises(ModelImportError, match=re.escape(message)):
        nbyoc.from_onnx(model)


def test_a_branch_with_the_wrong_outputs_or_a_missing_one_is_refused():
    one = _graph("one", [helper.make_node("Relu", ["x"], ["r"])], [tensor("r", [2])])
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True))),
             helper.make_node("If", ["c"], ["y", "z"], then_branch=one, else_branch=one)]  # fmt: skip
    model = make(nodes, [tensor("x", [2])], [tensor("y", [2])])
    with pytest.raises(ModelImportError, match=r"then_branch has 1 output\(s\) for the node's 2"):
        nbyoc.from_onnx(model)
    nowhere = _graph("nowhere", [], [tensor("ghost", [2])])
    nodes[1] = helper.make_node("If", ["c"], ["y"], then_branch=nowhere, else_branch=one)
    with pytest.raises(ModelImportError, match=r"subgraph 'nowhere'.*\['ghost'\].*no node"):
        nbyoc.from_onnx(make(nodes, [tensor("x", [2])], [tensor("y", [2])]))


def _ort(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _assert_like_ort(model, feeds, backends=("host", "llvm"), **import_options):
    expected = _ort(model, feeds)
    f = nbyoc.from_onnx(model, **import_options)
    for backend in backends:
        got = nbyoc.compile(f, backend)(
            *[v for k, v in feeds.items() if k not in import_options.get("constants", {})]
        )
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-6, err_msg=backend)


def _while_model(with_scan: bool):
    """PyTorch's export of a while loop: a trip count M (an input, or a constant) and a
    condition the body computes; the body reads w from outside (captured), carries s
    and (with_scan) records each s."""
    body_nodes = [
        helper.make_node("Mul", ["s_in", "w"], ["s_out"]),
        helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
        helper.make_node("Less", ["total", "limit"], ["go"]),
    ]
    outputs = [tensor("go", [], TensorProto.BOOL), tensor("s_out", [3])]
    if with_scan:
        body_nodes.append(helper.make_node("Identity", ["s_out"], ["record"]))
        outputs.append(tensor("record", [3]))
    body = helper.make_graph(
        body_nodes, "body",
        [tensor("i", [], TensorProto.INT64), tensor("c", [], TensorProto.BOOL), tensor("s_in", [3])],
        outputs,
    )  # fmt: skip
    limit = numpy_helper.from_array(np.array(1000.0, np.float32), "limit")
    loop_outputs = ["s_final", "records"] if with_scan else ["s_final"]
    nodes = [helper.make_node("Loop", ["m", "start", "s0"], loop_outputs, body=body)]
    inputs = [tensor("m", [], TensorProto.INT64), tensor("start", [], TensorProto.BOOL),
              tensor("s0", [3]), tensor("w", [3])]  # fmt: skip
    return make(nodes, inputs, [tensor(o, None) for o in loop_outputs], [limit])


@pytest.mark.parametrize("m", [0, 1, 4, 50])
def test_a_loop_with_a_run_time_trip_count_and_condition_runs_like_ort(m):
    feeds = {"m": np.array(m), "start": np.array(True), "s0": np.ones(3, np.float32),
             "w": np.array([1.5, 2.0, 3.0], np.float32)}  # fmt: skip
    _assert_like_ort(_while_model(with_scan=False), feeds)


def test_a_loop_with_scan_outputs_needs_its_trip_count_and_stacks_them():
    feeds = {"m": np.array(3), "start": np.array(True), "s0": np.ones(3, np.float32),
             "w": np.array([1.5, 2.0, 3.0], np.float32)}  # fmt: skip
    model = _while_model(with_scan=True)
    with pytest.raises(NeedsConstantError, match="trip count"):
        nbyoc.from_onnx(model)
    _assert_like_ort(model, feeds, constants={"m": np.array(3)})


def test_scan_reverse_directions_and_axes_run_like_ort():
    """A running sum over axis 1 of x, read backwards, its partial sums written along
    axis 1 backwards too; the body reads a bias from outside."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["t"]),
         helper.make_node("Add", ["t", "bias"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["partial"])],
        "body", [tensor("sum_in", [2]), tensor("x_t", [2])],
        [tensor("sum_out", [2]), tensor("partial", [2])],
    )  # fmt: skip
    nodes = [helper.make_node("Scan", ["init", "x"], ["final", "partials"], body=body,
                              num_scan_inputs=1, scan_input_axes=[1],
                              scan_input_directions=[1], scan_output_axes=[1],
                              scan_output_directions=[1])]  # fmt: skip
    model = make(nodes, [tensor("init", [2]), tensor("x", [2, 5]), tensor("bias", [2])],
                 [tensor("final", None), tensor("partials", None)], opset=16)  # fmt: skip
    rng = np.random.default_rng(0)
    feeds = {"init": rng.standard_normal(2).astype(np.float32),
             "x": rng.standard_normal((2, 5)).astype(np.float32),
             "bias": np.array([0.5, -1.0], np.float32)}  # fmt: skip
    _assert_like_ort(model, feeds, backends=("host", "llvm", "csource"))


def test_a_loop_body_that_needs_a_trip_value_for_a_size_says_so():
    body = helper.make_graph(
        [helper.make_node("Unsqueeze", ["i", "zero"], ["start"]),
         helper.make_node("Slice", ["x", "start", "end"], ["piece"])],
        "body", [tensor("i", [], TensorProto.INT64), tensor("c", [], TensorProto.BOOL)],
        [tensor("c", [], TensorProto.BOOL), tensor("piece", None)],
    )  # fmt: skip
    nodes = [helper.make_node("Loop", ["m", ""], ["pieces"], body=body)]
    inits = [_ints("m", 3), _ints("zero", [0]), _ints("end", [100])]
    model = make(nodes, [tensor("x", [5])], [tensor("pieces", None)], inits)
    with pytest.raises(ModelImportError, match=r"body runs at run time, and inside it .*Slice"):
        nbyoc.from_onnx(model)


def test_a_run_time_if_with_a_branch_that_cannot_import_names_the_input_to_fix():
    # (as Silero VAD's 8 kHz network, given the 16 kHz input size)
    bad = _graph("bad", [helper.make_node("Reshape", ["x", "three"], ["r"])], [tensor("r", None)],
                 [_ints("three", [3])])  # fmt: skip
    good = _graph("good", [helper.make_node("Identity", ["x"], ["g"])], [tensor("g", None)])
    nodes = [helper.make_node("Equal", ["rate", "one"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=good, else_branch=bad)]  # fmt: skip
    model = make(nodes, [tensor("x", [2]), tensor("rate", [], TensorProto.INT64)],
                 [tensor("y", None)], [_ints("one", 1)])  # fmt: skip
    with pytest.raises(NeedsConstantError, match=r"its else_branch does not \(Reshape") as e:
        nbyoc.from_onnx(model)
    assert e.value.inputs == ("rate",)
    assert nbyoc.from_onnx(model, constants={"rate": np.array(1)}).body.type.shape == (2,)
