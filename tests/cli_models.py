"""Small ONNX models for the command-line tests, built with ``onnx.helper``: each says
in its name what it has that a test needs (two inputs of two dtypes, an integer output,
an op nbyoc refuses, an output named as no file may be)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def _model(nodes, inputs, outputs, initializers=(), opset=17, **kwargs) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kwargs)
    model.ir_version = 8
    return model


def scaled_table_lookup() -> onnx.ModelProto:
    """x float32 (N, 4), rows int64 (3,) -> ``out:0`` = Gather(table, rows) * 2 + x[:3]
    (float32 (3, 4)), ``best`` = ArgMax(x, axis 1) (int64 (N,)). The table has 12 rows,
    so any random index (-5 to 5) picks one."""
    table = numpy_helper.from_array(np.arange(48, dtype=np.float32).reshape(12, 4), "table")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    starts, ends = (numpy_helper.from_array(np.array([v], np.int64), n)
                    for n, v in (("starts", 0), ("ends", 3)))  # fmt: skip
    nodes = [
        helper.make_node("Gather", ["table", "rows"], ["picked"], axis=0),
        helper.make_node("Mul", ["picked", "two"], ["scaled"]),
        helper.make_node("Slice", ["x", "starts", "ends"], ["head"]),
        helper.make_node("Add", ["scaled", "head"], ["out:0"]),
        helper.make_node("ArgMax", ["x"], ["best"], axis=1, keepdims=0),
    ]
    inputs = [helper.make_tensor_value_info("x", F32, ["N", 4]),
              helper.make_tensor_value_info("rows", I64, [3])]  # fmt: skip
    outputs = [helper.make_tensor_value_info("out:0", F32, [3, 4]),
               helper.make_tensor_value_info("best", I64, ["N"])]  # fmt: skip
    return _model(nodes, inputs, outputs, [table, two, starts, ends],
                  producer_name="cli-tests", producer_version="1.0")  # fmt: skip


def matmul_relu() -> onnx.ModelProto:
    """x (2, 3) @ w (3, 5) + b, relu: fixed shapes; csource has no matmul."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((3, 5)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["xwb"]),
             helper.make_node("Relu", ["xwb"], ["y"])]  # fmt: skip
    return _model(nodes, [helper.make_tensor_value_info("x", F32, [2, 3])],
                  [helper.make_tensor_value_info("y", F32, [2, 5])], [w, b])  # fmt: skip


def with_refused_ops() -> onnx.ModelProto:
    """Relu, then two op types nbyoc has no converter for: one of another domain, and
    one of ONNX's own inside an If's branch."""
    branch = helper.make_graph(
        [helper.make_node("NoSuchOnnxOp", ["r"], ["b"])], "branch", [],
        [helper.make_tensor_value_info("b", F32, [2])],
    )  # fmt: skip
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Custom", ["r"], ["c"], domain="com.example"),
        helper.make_node("If", ["flag"], ["y"], then_branch=branch, else_branch=branch),
    ]
    inputs = [helper.make_tensor_value_info("x", F32, [2]),
              helper.make_tensor_value_info("flag", TensorProto.BOOL, [])]  # fmt: skip
    outputs = [helper.make_tensor_value_info("y", F32, [2]),
               helper.make_tensor_value_info("c", F32, [2])]  # fmt: skip
    model = _model(nodes, inputs, outputs)
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    return model
