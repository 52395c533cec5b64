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


def test_an_if_deciding_at_run_time_names_the_input_to_fix():
    with pytest.raises(NeedsConstantError, match=r"If node.*condition.*'mode'.*constants=") as e:
        nbyoc.from_onnx(mode_model())
    assert e.value.inputs == ("mode",)


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
    body = _graph("b", [helper.make_node("Loop", ["n", "c"], ["l"]),
                        helper.make_node("FancyOp", ["x"], ["f"], domain="com.example")],
                  [tensor("f", [2])])  # fmt: skip
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True))),
             helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body),
             helper.make_node("Loop", ["n", "c"], ["z"])]  # fmt: skip
    model = make(nodes, [tensor("x", [2]), tensor("n", [], TensorProto.INT64)], [tensor("y", [2])])
    message = "the model uses 5 node(s) of op types nbyoc does not import, 4 of them inside "
    message += "subgraphs: FancyOp x2 (com.example), Loop x3 (ai.onnx)"
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
