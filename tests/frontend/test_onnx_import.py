"""nbyoc.from_onnx: what becomes what, and every way a model can be refused, each with
an error that says what to do; the ONNX Backend's per-signature cache and bindings."""

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nbyoc
from nbyoc.errors import ModelImportError, NeedsConstantError, ShapeMismatchError
from nbyoc.frontend.onnx import Backend

from ..helpers import run_fresh


def make(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def relu_model(dims=("N", 4)):
    return make([helper.make_node("Relu", ["input.1"], ["y"])], [tensor("input.1", dims)],
                [tensor("y", dims)])  # fmt: skip


def test_a_model_comes_from_a_path_bytes_or_a_proto(tmp_path):
    model = relu_model((2, 4))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = np.array([[-1, 2, -3, 4]] * 2, np.float32)
    for source in (model, model.SerializeToString(), path, str(path)):
        f = nbyoc.from_onnx(source)
        assert [p.name_hint for p in f.params] == ["input_1"]  # a valid identifier
        np.testing.assert_array_equal(nbyoc.compile(f, backend="host")(x), np.maximum(x, 0))


def test_initializers_and_constants_are_constants_and_several_outputs_a_tuple():
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    nodes = [helper.make_node("Constant", [], ["c"], value_float=2.0),
             helper.make_node("Mul", ["x", "w"], ["a"]), helper.make_node("Add", ["a", "c"], ["b"])]  # fmt: skip
    # An old-style model lists its initializer among the inputs too: still a constant.
    model = make(
        nodes, [tensor("x", [4]), tensor("w", [4])], [tensor("b", [4]), tensor("a", [4])], [w]
    )
    f = nbyoc.from_onnx(model)
    assert [p.name_hint for p in f.params] == ["x"]
    x = np.ones(4, np.float32)
    b, a = nbyoc.compile(f, backend="host")(x)
    np.testing.assert_array_equal(a, np.arange(4))
    np.testing.assert_array_equal(b, np.arange(4) + 2)


def test_dynamic_dims_are_symbolic_and_shapes_fixes_them():
    f = nbyoc.from_onnx(relu_model())
    assert str(f.params[0].type) == "Tensor[(N, 4), float32]"
    fn = nbyoc.compile(f, backend="host")
    for n in (1, 3):
        x = np.linspace(-1, 1, 4 * n, dtype=np.float32).reshape(n, 4)
        np.testing.assert_array_equal(fn(x), np.maximum(x, 0))
    with pytest.raises(ShapeMismatchError, match=r"argument 0 \(input_1\) should be"):
        fn(np.zeros((3, 5), np.float32))
    assert nbyoc.from_onnx(relu_model(), shapes={"input.1": (None, 4)}).type == f.type
    with pytest.raises(
        ModelImportError, match=r"does not fit the model's input 'input.1' of shape \(N, 4\)"
    ):
        nbyoc.from_onnx(relu_model(), shapes={"input.1": (2, 5)})
    with pytest.raises(ModelImportError, match=r"name \['z'\], which are not graph inputs"):
        nbyoc.from_onnx(relu_model(), shapes={"input.1": (2, 4), "z": (1,)})
    assert nbyoc.from_onnx(relu_model(), shapes={"input.1": (3, 4)}).params[0].type.shape == (3, 4)


def test_every_unsupported_op_is_listed_at_once_with_counts_and_domains():
    nodes = [helper.make_node("Unique", ["x"], ["a"]), helper.make_node("Unique", ["a"], ["b"]),
             helper.make_node("FusedConv", ["b"], ["c"], domain="com.microsoft"),
             helper.make_node("Relu", ["c"], ["y"])]  # fmt: skip
    model = make(nodes, [tensor("x", [2])], [tensor("y", [2])])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(ModelImportError) as caught:
        nbyoc.from_onnx(model)
    message = str(caught.value)
    assert "3 node(s)" in message and "FusedConv x1 (com.microsoft)" in message
    assert "Unique x2 (ai.onnx)" in message and "Relu" not in message


@pytest.mark.parametrize(
    "model, message",
    [(make([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2])], [tensor("y", [2])], opset=6),
      "opset 6; nbyoc imports opsets 7 to 28"),
     (b"not a model at all", "not an ONNX model"),
     (42, "takes a path, bytes or an onnx.ModelProto, got int"),
     ("/no/such/model.onnx", "cannot read the ONNX model"),
     (make([helper.make_node("Identity", ["x"], ["y"])], [tensor("x", [2], TensorProto.FLOAT8E8M0)],
           [tensor("y", [2], TensorProto.FLOAT8E8M0)]), "element type FLOAT8E8M0 is not supported"),
     (make([helper.make_node("Relu", ["q"], ["y"])], [tensor("x", [2])], [tensor("y", [2])]),
      "reads ['q'], which no earlier node"),
     (make([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic")], [tensor("x", [1, 1, 2, 2])],
           [tensor("y", None)], [numpy_helper.from_array(np.full(4, 2.0, np.float32), "s")]),
      "Resize node: mode='cubic' is not supported")],
)  # fmt: skip
def test_bad_models_are_refused_clearly(model, message):
    with pytest.raises(ModelImportError, match=re.escape(message)):
        nbyoc.from_onnx(model)


def shape_arithmetic_model():
    """Reshape x (N, 6) to (N, 2, 3), the target computed from Shape as exporters do."""
    ints = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]  # fmt: skip
    return make(nodes, [tensor("x", ["N", 6])], [tensor("y", ["N", 2, 3])],
                [ints("zero", 0), ints("axes", [0]), ints("rest", [2, 3])])  # fmt: skip


def test_shape_arithmetic_folds_while_importing():
    f = nbyoc.from_onnx(shape_arithmetic_model(), shapes={"x": (5, 6)})
    ops = [str(n.op) for n in nbyoc.ir.post_order([f.body]) if isinstance(n, nbyoc.ir.Call)]
    assert ops == ["Op(reshape)"]
    assert f.body.type.shape == (5, 2, 3)


def test_a_value_an_op_needs_must_be_known_and_constants_can_fix_it():
    model = make([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                 [tensor("x", [6]), tensor("shape", [2], TensorProto.INT64)], [tensor("y", None)])  # fmt: skip
    with pytest.raises(NeedsConstantError, match=r"'shape'.*constants=") as caught:
        nbyoc.from_onnx(model)
    assert caught.value.inputs == ("shape",)
    f = nbyoc.from_onnx(model, constants={"shape": np.array([3, 2])})
    assert [p.name_hint for p in f.params] == ["x"] and f.body.type.shape == (3, 2)


def test_the_backend_keeps_one_executable_per_bound_value_and_binds_needed_inputs():
    model = make([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                 [tensor("x", ["N"]), tensor("shape", [2], TensorProto.INT64)], [tensor("y", None)])  # fmt: skip
    assert Backend.supports_device("CPU") and not Backend.supports_device("CUDA")
    rep = Backend.prepare(model, backend="llvm")
    x6, x8 = np.arange(6, dtype=np.float32), np.arange(8, dtype=np.float32)
    assert rep.run([x6, np.array([2, 3])])[0].shape == (2, 3)
    assert rep.bound == ("shape",)
    assert rep.run({"x": x6, "shape": np.array([3, 2])})[0].shape == (3, 2)
    assert rep.run([x8, np.array([2, 4])])[0].shape == (2, 4)
    assert rep.run([x6, np.array([2, 3])])[0].shape == (2, 3)  # from the cache
    # one executable per value of the bound input, each for every size of N
    assert len(rep.symbolic) == 3 and not rep.executables
    with pytest.raises(nbyoc.errors.ArgumentCountError, match="takes 2 input"):
        rep.run([x6])
    with pytest.raises(ValueError, match="CPU"):
        Backend.prepare(model, device="CUDA")


def test_import_nbyoc_works_without_onnx_and_from_onnx_says_what_to_install(tmp_path):
    code = (
        "import json, sys; sys.modules['onnx'] = None\n"
        "import nbyoc\n"
        "try:\n    nbyoc.from_onnx(b'')\n"
        "except nbyoc.errors.MissingDependencyError as e:\n    print(json.dumps(str(e)))\n"
    )
    assert "pip install 'nbyoc[onnx]'" in run_fresh(code, tmp_path)


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def test_shape_arithmetic_folds_on_symbolic_sizes():
    """Shape -> Gather -> Mul -> Concat -> Reshape, Slice bounds from Shape, Resize sizes
    from Shape times 2: the model's dynamic dims stay symbols through all of it, and one
    executable runs every size as ONNX Runtime does."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i1"], ["h"], axis=0),  # h
        helper.make_node("Gather", ["s", "i2"], ["w"], axis=0),  # w
        helper.make_node("Mul", ["h", "w"], ["hw"]),
        helper.make_node("Unsqueeze", ["hw", "axis0"], ["hw1"]),
        helper.make_node("Concat", ["minus1", "hw1"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["x", "flat_shape"], ["flat"]),  # (-1, h*w)
        helper.make_node("Slice", ["s", "one", "three"], ["hw_pair"]),  # [h, w]
        helper.make_node("Sub", ["hw_pair", "one"], ["hw_less"]),  # [h - 1, w - 1]
        helper.make_node("Slice", ["x", "zero2", "hw_less", "axes12"], ["cropped"]),
        helper.make_node("Mul", ["s", "scale"], ["big"]),  # [n, 2h, 2w]
        helper.make_node("Resize", ["x", "", "", "big"], ["up"], mode="nearest"),
    ]  # fmt: skip
    inits = [_ints("i1", 1), _ints("i2", 2), _ints("axis0", [0]), _ints("minus1", [-1]),
             _ints("one", [1]), _ints("three", [3]), _ints("zero2", [0, 0]),
             _ints("axes12", [1, 2]), _ints("scale", [1, 2, 2])]  # fmt: skip
    model = make(nodes, [tensor("x", ["n", "h", "w"])],
                 [tensor("flat", None), tensor("cropped", None), tensor("up", None)],
                 inits, opset=18)  # fmt: skip
    f = nbyoc.from_onnx(model)
    assert [str(t) for t in f.ret_type.fields] == [
        "Tensor[(n, h*w), float32]", "Tensor[(n, h - 1, w - 1), float32]",
        "Tensor[(n, 2*h, 2*w), float32]",
    ]  # fmt: skip
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    fn = nbyoc.compile(f)
    for shape in ((2, 3, 5), (1, 7, 4)):
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        for got, expected in zip(fn(x), session.run(None, {"x": x})):
            np.testing.assert_array_equal(got, expected)


def test_a_known_value_expanded_to_a_symbolic_shape_is_a_tensor_of_that_shape():
    # As Keras' layer norm exports its zeros: Expand(0, Shape(x)); every input is known,
    # but the result's shape is symbolic, so it is built, not folded
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Expand", ["zero", "s"], ["zeros"]),
             helper.make_node("Sub", ["x", "zeros"], ["y"])]  # fmt: skip
    f = nbyoc.from_onnx(make(nodes, [tensor("x", ["n", 3])], [tensor("y", None)], [zero]))
    assert str(f.ret_type) == "Tensor[(n, 3), float32]"
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(nbyoc.compile(f)(x), x)


def test_a_step_needing_a_symbolic_sizes_value_names_the_symbols():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "nf"], ["y"])]  # fmt: skip
    model = make(nodes, [tensor("x", ["batch", 3])], [tensor("y", None)], [_ints("i0", 0)])
    with pytest.raises(NeedsConstantError, match=r"Cast node: .* symbolic size\(s\) batch .*"
                                                 r"shapes="):  # fmt: skip
        nbyoc.from_onnx(model)
    fixed = nbyoc.from_onnx(model, shapes={"x": (2, 3)})  # shapes= fixes it
    assert fixed.ret_type == nbyoc.ir.types.TensorType((2, 3))


def test_the_same_dim_param_is_one_symbol_and_unnamed_dims_get_their_own():
    model = make([helper.make_node("Add", ["a", "b"], ["y"])],
                 [tensor("a", ["batch size", 0]), tensor("b", ["batch size", 0])],
                 [tensor("y", None)])  # fmt: skip
    f = nbyoc.from_onnx(model)
    assert [str(p.type) for p in f.params] == ["Tensor[(batch_size, a_1), float32]",
                                               "Tensor[(batch_size, b_1), float32]"]  # fmt: skip
    assert [str(c) for c in f.body.assumes] == [
        "Constraint(kind='broadcast', args=(b_1, a_1), where='add at axis -1')"
    ]
