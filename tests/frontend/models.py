"""Small ONNX models built with ``onnx.helper``, with seeded weights: an MLP, a CNN
(conv, batch norm, pooling, a residual add, softmax) and a transformer encoder
block (layer norm, attention with matmul and softmax, GELU). Each takes one input
``x`` whose batch dim is named (dynamic), as exported models do."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper


class Graph:
    """Nodes and seeded initializers, collected as a model is written."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.weights = [], []

    def weight(self, name: str, shape, scale: float = 0.3, offset: float = 0.0) -> str:
        data = (self.rng.standard_normal(shape) * scale + offset).astype(np.float32)
        self.weights.append(numpy_helper.from_array(data, name))
        return name

    def ints(self, name: str, values) -> str:
        self.weights.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def node(self, op: str, inputs, output: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, list(inputs), [output], **attrs))
        return output

    def model(self, x_shape, y_shape, opset: int):
        graph = helper.make_graph(
            self.nodes, "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
            self.weights,
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        return model


def mlp():
    """x (N, 16) -> Gemm -> Relu -> MatMul + bias -> Tanh -> Gemm -> Softmax."""
    g = Graph(1)
    h = g.node("Gemm", ["x", g.weight("w1", (32, 16)), g.weight("b1", (32,))], "h", transB=1)
    h = g.node("Relu", [h], "h_relu")
    h = g.node("MatMul", [h, g.weight("w2", (32, 24))], "h2")
    h = g.node("Add", [h, g.weight("b2", (24,))], "h2b")
    h = g.node("Tanh", [h], "h2t")
    h = g.node("Gemm", [h, g.weight("w3", (24, 10)), g.weight("b3", (10,))], "logits")
    g.node("Softmax", [h], "y", axis=-1)
    return g.model(["N", 16], ["N", 10], 17)


def _conv_bn_relu(g: Graph, x: str, c_in: int, c_out: int, name: str, **conv) -> str:
    y = g.node("Conv", [x, g.weight(f"{name}_w", (c_out, c_in, 3, 3)),
                        g.weight(f"{name}_b", (c_out,), 0.1)], f"{name}_conv", **conv)  # fmt: skip
    stats = [g.weight(f"{name}_scale", (c_out,), 0.1, 1.0), g.weight(f"{name}_bias", (c_out,), 0.1),
             g.weight(f"{name}_mean", (c_out,), 0.1), g.weight(f"{name}_var", (c_out,), 0.1, 1.0)]  # fmt: skip
    y = g.node("BatchNormalization", [y, *stats], f"{name}_bn", epsilon=1e-5)
    return g.node("Relu", [y], f"{name}_relu")


def cnn():
    """x (N, 3, 16, 16): conv-bn-relu, max pool, a residual block, global average
    pool, flatten, gemm, softmax."""
    g = Graph(2)
    h = _conv_bn_relu(g, "x", 3, 8, "c1", pads=[1, 1, 1, 1])
    h = g.node("MaxPool", [h], "pool", kernel_shape=[2, 2], strides=[2, 2])
    r = _conv_bn_relu(g, h, 8, 8, "c2", pads=[1, 1, 1, 1])
    r = g.node("Conv", [r, g.weight("c3_w", (8, 8, 3, 3))], "c3", pads=[1, 1, 1, 1])
    h = g.node("Relu", [g.node("Add", [h, r], "residual")], "res_relu")
    h = g.node("AveragePool", [h], "avg", kernel_shape=[2, 2], strides=[2, 2])
    h = g.node("GlobalAveragePool", [h], "gap")
    h = g.node("Flatten", [h], "flat", axis=1)
    h = g.node("Gemm", [h, g.weight("fc_w", (5, 8)), g.weight("fc_b", (5,))], "fc", transB=1)
    g.node("Softmax", [h], "y", axis=1)
    return g.model(["N", 3, 16, 16], ["N", 5], 17)


def transformer(tokens: int = 8, width: int = 16, heads: int = 2, dynamic_tokens=False):
    """x (N, T, D): pre-norm attention with a residual, then a pre-norm GELU MLP with
    a residual; the head split by Reshape/Transpose with shapes computed from Shape.
    ``dynamic_tokens``: the token count is a dynamic dimension too ("T"), read from
    Shape as exported models do."""
    g = Graph(3)
    dh = width // heads
    n = g.node("LayerNormalization", ["x", g.weight("ln1_g", (width,), 0.1, 1.0),
                                      g.weight("ln1_b", (width,), 0.1)], "ln1", axis=-1)  # fmt: skip
    # The batch size as exported models compute it: Shape -> Gather -> Concat.
    shape = g.node("Shape", ["x"], "x_shape")
    batch = g.node("Gather", [shape, g.ints("zero", 0)], "batch")
    batch = g.node("Unsqueeze", [batch, g.ints("axis0", [0])], "batch_1d")
    if dynamic_tokens:
        count = g.node("Slice", [shape, g.ints("one", [1]), g.ints("two", [2])], "tokens_1d")
        split = g.node("Concat", [batch, count, g.ints("split_dims", [heads, dh])],
                       "split_shape", axis=0)  # fmt: skip
    else:
        split = g.node(
            "Concat", [batch, g.ints("split_dims", [tokens, heads, dh])], "split_shape", axis=0
        )

    def heads_of(name: str) -> str:
        proj = g.node("MatMul", [n, g.weight(f"w{name}", (width, width))], f"{name}_proj")
        proj = g.node("Reshape", [proj, split], f"{name}_split")
        return g.node("Transpose", [proj], f"{name}_heads", perm=[0, 2, 1, 3])

    q, k, v = heads_of("q"), heads_of("k"), heads_of("v")
    kt = g.node("Transpose", [k], "kt", perm=[0, 1, 3, 2])
    scores = g.node("MatMul", [q, kt], "scores")
    scale = g.node(
        "Constant", [], "scale", value=numpy_helper.from_array(np.array(np.sqrt(dh), np.float32))
    )
    scores = g.node("Div", [scores, scale], "scaled")
    attn = g.node("MatMul", [g.node("Softmax", [scores], "probs", axis=-1), v], "attn")
    attn = g.node("Transpose", [attn], "attn_t", perm=[0, 2, 1, 3])
    merged = g.node("Reshape", [attn, g.ints("merge", [0, 0 if dynamic_tokens else tokens,
                                                      width])], "merged")  # fmt: skip
    out = g.node("MatMul", [merged, g.weight("wo", (width, width))], "attn_out")
    h = g.node("Add", ["x", out], "res1")
    n2 = g.node("LayerNormalization", [h, g.weight("ln2_g", (width,), 0.1, 1.0),
                                       g.weight("ln2_b", (width,), 0.1)], "ln2", axis=-1)  # fmt: skip
    up = g.node("Add", [g.node("MatMul", [n2, g.weight("w_up", (width, 4 * width))], "up"),
                        g.weight("b_up", (4 * width,), 0.1)], "up_b")  # fmt: skip
    act = g.node("Gelu", [up], "gelu")
    down = g.node("MatMul", [act, g.weight("w_down", (4 * width, width))], "down")
    g.node("Add", [h, down], "y")
    t = "T" if dynamic_tokens else tokens
    return g.model(["N", t, width], ["N", t, width], 20)


MODELS = {
    "mlp": (mlp, (4, 16)),
    "cnn": (cnn, (2, 3, 16, 16)),
    "transformer": (transformer, (2, 8, 16)),
}
