"""Every benchmark graph as an ONNX model, for ONNX Runtime to run beside nbyoc.

The elementwise graphs of graphs.py are written here again as ONNX nodes; the
neural-network graphs (softmax, layer norm, GELU, ...) are *defined* here and
nbyoc imports them with ``nbyoc.from_onnx``, so both run the same model. Inputs
are the graph's parameters (float32, n x n); weights (layer norm's scale and
bias) are seeded initializers.

>>> model = onnx_model("softmax", 4)
>>> [n.op_type for n in model.graph.node]
['Softmax']
"""

from __future__ import annotations

import numpy as np

try:
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # optional: pip install '.[test]'
    helper = None

#: The opset every model here is written for (LayerNormalization 17, Gelu 20).
OPSET = 20


def _model(nodes, inputs: dict[str, tuple], output_shape, initializers=()):
    graph = helper.make_graph(
        nodes, "bench",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))
         for name, shape in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(output_shape))],
        list(initializers),
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    return model


def _constant(name: str, value) -> object:
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _nodes(*specs):
    """ONNX nodes from (op, inputs, output, attributes) tuples."""
    return [helper.make_node(op, list(i), [out], **(attrs or {})) for op, i, out, attrs in specs]


def _square(n: int, names: str) -> dict[str, tuple]:
    return {name: (n, n) for name in names}


def reference(n: int):
    nodes = _nodes(("Add", "ab", "t", None), ("Sub", ["t", "c"], "u", None),
                   ("Mul", ["u", "d"], "y", None))  # fmt: skip
    return _model(nodes, _square(n, "abcd"), (n, n))


def diamond(n: int):
    nodes = _nodes(("Mul", "ab", "t", None), ("Add", "tc", "p", None), ("Sub", "td", "q", None),
                   ("Mul", "pq", "y", None))  # fmt: skip
    return _model(nodes, _square(n, "abcd"), (n, n))


def chain10(n: int):
    nodes = _nodes(
        ("Mul", "ab", "t1", None), ("Add", ["t1", "a"], "t2", None), ("Tanh", ["t2"], "t3", None),
        ("Mul", ["t3", "half"], "t4", None), ("Exp", ["t4"], "t5", None),
        ("Sub", ["t5", "b"], "t6", None), ("Abs", ["t6"], "t7", None), ("Sqrt", ["t7"], "t8", None),
        ("Max", ["t8", "a"], "t9", None), ("Sigmoid", ["t9"], "y", None),
    )  # fmt: skip
    return _model(nodes, _square(n, "ab"), (n, n), [_constant("half", 0.5)])


def fallback(n: int):
    inputs = {**_square(n, "abc"), "v": (n, 1), **_square(n, "de")}
    nodes = _nodes(
        ("Mul", "ab", "t1", None), ("Add", ["t1", "c"], "t2", None), ("Tanh", ["t2"], "t3", None),
        ("MatMul", ["t3", "v"], "yv", None), ("Sub", ["d", "yv"], "t4", None),
        ("Relu", ["t4"], "t5", None), ("Mul", ["t5", "e"], "y", None),
    )  # fmt: skip
    return _model(nodes, inputs, (n, n))


def mlp(batch: int, hidden: int):
    inputs = {"x": (batch, hidden), "w1": (hidden, hidden), "b1": (hidden,),
              "w2": (hidden, hidden), "b2": (hidden,)}  # fmt: skip
    nodes = _nodes(
        ("MatMul", ["x", "w1"], "h1", None), ("Add", ["h1", "b1"], "h2", None),
        ("Relu", ["h2"], "h3", None), ("MatMul", ["h3", "w2"], "h4", None),
        ("Add", ["h4", "b2"], "y", None),
    )  # fmt: skip
    return _model(nodes, inputs, (batch, hidden))


def softmax(n: int):
    return _model(_nodes(("Softmax", ["x"], "y", {"axis": -1})), {"x": (n, n)}, (n, n))


def log_softmax(n: int):
    return _model(_nodes(("LogSoftmax", ["x"], "y", {"axis": -1})), {"x": (n, n)}, (n, n))


def _norm_weights(n: int):
    rng = np.random.default_rng(7)
    return (_constant("scale", 1 + 0.1 * rng.standard_normal(n)),
            _constant("bias", 0.1 * rng.standard_normal(n)))  # fmt: skip


def layer_norm(n: int):
    nodes = _nodes(("LayerNormalization", ["x", "scale", "bias"], "y", {"axis": -1}))
    return _model(nodes, {"x": (n, n)}, (n, n), _norm_weights(n))


def rms_norm(n: int):
    """x / sqrt(mean(x**2) + eps) * scale over the last axis, in primitive ops (ONNX's
    RMSNormalization is opset 23, newer than many runtimes)."""
    nodes = _nodes(
        ("Mul", ["x", "x"], "sq", None),
        ("ReduceMean", ["sq", "axes"], "ms", {"keepdims": 1}),
        ("Add", ["ms", "eps"], "mse", None), ("Sqrt", ["mse"], "rms", None),
        ("Div", ["x", "rms"], "normed", None), ("Mul", ["normed", "scale"], "y", None),
    )  # fmt: skip
    scale, _ = _norm_weights(n)
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    return _model(nodes, {"x": (n, n)}, (n, n), [scale, axes, _constant("eps", 1e-6)])


def gelu(n: int):
    return _model(_nodes(("Gelu", ["x"], "y", {"approximate": "tanh"})), {"x": (n, n)}, (n, n))


#: graph -> builder of its model at size n (the MLP's builder takes its own sizes).
MODELS = {
    "reference": reference,
    "diamond": diamond,
    "chain10": chain10,
    "fallback": fallback,
    "softmax": softmax,
    "log_softmax": log_softmax,
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
    "gelu": gelu,
}


def onnx_model(graph: str, n: int):
    """The ONNX model of ``graph`` at n x n."""
    return MODELS[graph](n)


def weights(model) -> dict[str, np.ndarray]:
    """The model's initializers as arrays (for the NumPy versions of the graphs)."""
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def session(model):
    """An ONNX Runtime session with its default settings (what a user gets), and a
    function of the graph's inputs in order returning the output; None if ONNX
    Runtime is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in sess.get_inputs()]

    def run(*arrays):
        return sess.run(None, dict(zip(names, arrays)))[0]

    return run
