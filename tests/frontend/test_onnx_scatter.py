"""ONNX ScatterElements (and the old Scatter) and ScatterND in small models, against ONNX
Runtime on every backend (the scatters run on the host, the ops around them on the
backend); reductions only from the opsets that have them; an index out of range is an
error naming the op, the axis and the value."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import nbyoc
from nbyoc.errors import ExecutionError, ModelImportError, PerShapeWarning

from ..helpers import reload
from .test_onnx_import import make, tensor

ort = pytest.importorskip("onnxruntime")

BACKENDS = ["host", "llvm", "csource", "examplejson"]
INT64 = TensorProto.INT64


def assert_matches_runtime(model, inputs: dict, backends=BACKENDS):
    """nbyoc's results on each backend, after a save and load, are Runtime's (but for
    the last bits of Runtime's own tanh and of sums in another order)."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    f = nbyoc.from_onnx(model)
    for backend in backends:
        with warnings.catch_warnings():  # (csource and examplejson: one build per size)
            warnings.simplefilter("ignore", PerShapeWarning)
            got = reload(nbyoc.compile(f, backend=backend))(*inputs.values())
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape, backend
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-7, err_msg=backend)


def elements_model(reduction: str | None, opset=18, op="ScatterElements", index_type=INT64):
    """x (N, 6) -> Relu -> scatter u * 2 along axis 1 at i (N, 4) -> + 2."""
    attrs = {"axis": -1} if reduction is None else {"axis": -1, "reduction": reduction}
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["u", "two"], ["u2"]),
             helper.make_node(op, ["r", "i", "u2"], ["s"], **attrs),
             helper.make_node("Add", ["s", "two"], ["y"])]  # fmt: skip
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    inputs = [tensor("x", ["N", 6]), tensor("i", ["N", 4], index_type), tensor("u", ["N", 4])]
    return make(nodes, inputs, [tensor("y", ["N", 6])], [two], opset=opset)


def elements_inputs(rows: int, distinct: bool, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    if distinct:  # (with reduction none, Runtime's order for repeats is not ONNX's rule)
        i = np.stack([rng.permutation(6)[:4] for _ in range(rows)])
        i[:, ::2] -= 6  # negative indices count from the end
    else:
        i = rng.integers(-6, 6, (rows, 4))
    return {"x": rng.standard_normal((rows, 6)).astype(np.float32), "i": i,
            "u": rng.standard_normal((rows, 4)).astype(np.float32)}  # fmt: skip


@pytest.mark.parametrize("reduction", [None, "none", "add", "mul", "max", "min"])
def test_scatter_elements_models_match_runtime(reduction):
    model = elements_model(reduction)
    assert_matches_runtime(model, elements_inputs(3, distinct=reduction in (None, "none")))


def test_the_batch_dim_stays_symbolic_and_every_size_runs():
    f = nbyoc.from_onnx(elements_model("add"))
    assert str(f.ret_type) == "Tensor[(N, 6), float32]"
    session = ort.InferenceSession(elements_model("add").SerializeToString(),
                                   providers=["CPUExecutionProvider"])  # fmt: skip
    fn = nbyoc.compile(f)
    for rows in (1, 5):
        inputs = elements_inputs(rows, distinct=False, seed=rows)
        np.testing.assert_allclose(fn(*inputs.values()), session.run(None, inputs)[0], rtol=1e-6)


@pytest.mark.parametrize("op,opset", [("Scatter", 10), ("ScatterElements", 11)])
def test_the_old_scatter_and_the_first_scatter_elements_match_runtime(op, opset):
    inputs = elements_inputs(2, distinct=True, seed=4)
    if op == "Scatter":  # (Scatter's indices were not yet allowed to be negative)
        inputs["i"] %= 6
    assert_matches_runtime(elements_model(None, opset, op), inputs, backends=["host", "llvm"])


def cache_model(reduction: str | None, index_type=INT64):
    """A key cache (2, 8, 4) updated at (batch, position) pairs p (2, 3, 2) with rows
    tanh(k) (2, 3, 4), then scaled: ScatterND's use in decoders."""
    attrs = {} if reduction is None else {"reduction": reduction}
    nodes = [helper.make_node("Tanh", ["k"], ["t"]),
             helper.make_node("ScatterND", ["cache", "p", "t"], ["s"], **attrs),
             helper.make_node("Mul", ["s", "s"], ["y"])]  # fmt: skip
    inputs = [tensor("cache", [2, 8, 4]), tensor("p", [2, 3, 2], index_type),
              tensor("k", [2, 3, 4])]  # fmt: skip
    return make(nodes, inputs, [tensor("y", [2, 8, 4])], opset=18)


@pytest.mark.parametrize("reduction", [None, "add", "mul", "max", "min"])
def test_scatter_nd_models_match_runtime(reduction):
    rng = np.random.default_rng(5)
    if reduction is None:  # distinct pairs, some counted from the end
        p = np.array([[[0, 1], [1, -1], [0, 7]], [[1, 2], [-2, 3], [1, -6]]])
    else:  # repeated pairs combine
        p = np.array([[[0, 1], [0, 1], [1, -1]], [[1, 1], [-1, 1], [0, 1]]])
    inputs = {"cache": rng.standard_normal((2, 8, 4)).astype(np.float32), "p": p,
              "k": rng.standard_normal((2, 3, 4)).astype(np.float32)}  # fmt: skip
    assert_matches_runtime(cache_model(reduction), inputs)


def test_int32_indices_match_runtime():
    # (ScatterElements': ONNX's ScatterND takes int64 indices only; nbyoc's op takes both)
    inputs = elements_inputs(3, distinct=False, seed=6)
    inputs["i"] = inputs["i"].astype(np.int32)
    model = elements_model("max", index_type=TensorProto.INT32)
    assert_matches_runtime(model, inputs, backends=["host"])


@pytest.mark.parametrize(
    "model,message",
    [
        (elements_model("add", opset=13), "reduction='add' is not one of opset 13's: none"),
        (elements_model("max", opset=16), "reduction='max' is not one of opset 16's: none, add, mul"),
        (elements_model("sum", opset=18), "reduction='sum' is not one of opset 18's: none, add, mul, max, min"),
        (elements_model("mul", opset=10, op="Scatter"), "reduction='mul' is not one of opset 10's: none"),
    ],
)  # fmt: skip
def test_a_reduction_its_opset_lacks_is_refused(model, message):
    with pytest.raises(ModelImportError, match=message):
        nbyoc.from_onnx(model)


def test_an_index_out_of_range_is_an_error_naming_the_op_the_axis_and_the_value():
    fn = nbyoc.compile(nbyoc.from_onnx(cache_model(None)), backend="llvm")
    inputs = {"cache": np.zeros((2, 8, 4), np.float32),
              "p": np.array([[[0, 1], [1, 3], [0, 8]], [[1, 2], [0, 3], [1, 0]]]),
              "k": np.zeros((2, 3, 4), np.float32)}  # fmt: skip
    with pytest.raises(ExecutionError, match=r"scatter_nd: index 8 is out of range for axis 1 of "
                                             r"data \(length 8: valid indices are -8 to 7\)"):  # fmt: skip
        fn(*inputs.values())
