"""CumSum, CumProd, TopK, GatherElements and Einsum imported from ONNX, against ONNX's
reference evaluator on inputs its node cases do not cover: NaN and ties in TopK,
wrapping integer sums, indices shorter than the data, ellipses."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import nbyoc

FLOAT, INT8 = TensorProto.FLOAT, TensorProto.INT8


def model(node, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph([node], "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def assert_like_reference(m, feeds: dict, backend="host"):
    want = ReferenceEvaluator(m).run(None, feeds)
    got = nbyoc.frontend.onnx.Backend.prepare(m, backend=backend).run(feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_with_nan_and_ties(largest):
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    m = model(node, [info("x", FLOAT, [2, 6])],
              [info("v", FLOAT, None), info("i", TensorProto.INT64, None)], [k])  # fmt: skip
    x = np.array([[1, 3, 3, np.nan, 0, 3], [2, 2, 2, 2, 1, 5]], np.float32)
    got_v, got_i = nbyoc.frontend.onnx.Backend.prepare(m, backend="host").run({"x": x})
    order = [[3, 1, 2], [5, 0, 1]] if largest else [[4, 0, 1], [4, 0, 1]]
    np.testing.assert_array_equal(got_i, order)  # (NaN the largest; the first of ties first)
    np.testing.assert_array_equal(got_v, np.take_along_axis(x, np.array(order), 1))
    if largest == 0:  # (ONNX's reference sorts NaN as NumPy: the same when it is not taken)
        assert_like_reference(m, {"x": x})


def test_cumsum_keeps_int8_and_wraps_on_llvm():
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], reverse=1)
    axis = helper.make_tensor("axis", TensorProto.INT32, [], [0])
    m = model(node, [info("x", INT8, [5, 3])], [info("y", INT8, None)], [axis])
    x = np.array([[100, -100, 7]] * 5, np.int8)
    assert_like_reference(m, {"x": x}, backend="llvm")


def test_gather_elements_with_indices_shorter_than_the_data():
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)
    m = model(node, [info("x", FLOAT, ["n", 4]), info("i", TensorProto.INT64, [2, 2])],
              [info("y", FLOAT, None)])  # fmt: skip
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    i = np.array([[3, -1], [0, 2]])
    (got,) = nbyoc.frontend.onnx.Backend.prepare(m, backend="host").run({"x": x, "i": i})
    # (the rows the indices have, as torch.gather reads them; ONNX's reference evaluator
    # asks for equal sizes)
    np.testing.assert_array_equal(got, [[3, 3], [4, 6]])
    assert_like_reference(m, {"x": x[:2], "i": i})


def test_einsum_with_an_ellipsis_on_llvm():
    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="...ij,...jk->...ik")
    m = model(node, [info("a", FLOAT, [2, 3, 4]), info("b", FLOAT, [2, 4, 5])],
              [info("y", FLOAT, None)])  # fmt: skip
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4), np.float32), rng.standard_normal((2, 4, 5), np.float32)
    got = nbyoc.frontend.onnx.Backend.prepare(m, backend="llvm").run({"a": a, "b": b})
    np.testing.assert_allclose(got[0], a @ b, rtol=1e-5)
