"""ONNX models for the fuzz test of ``from_onnx``: seeds (real models, single-op models
whose inputs are all known, so every value folds while importing, and ONNX's own node
test cases) and ``mutate_onnx``, which changes one thing in a model's structure the way
the crafted models of issue 35 did."""

from __future__ import annotations

import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from nbyoc.frontend.onnx.converters import CONVERTERS

from ..mutations import EXTREME_NUMBERS, mutate_bytes

F = TensorProto.FLOAT
#: Integer values a shape, an axis, a count or a size should never be.
EXTREME_INTS = [0, -1, -5, 1, 7, -7, 2**28, 2**31, 2**40, 2**62, -(2**62)]
#: Where external data might point outside a model's directory.
LOCATIONS = ["../secret.txt", "/etc/passwd", "data.bin", "a/../../b", "", "..\\x", "x\0y"]


def onnx_model(nodes, inputs, outputs, initializers=(), opset: int = 18) -> bytes:
    """The serialised model of one graph of ``nodes``."""
    graph = helper.make_graph(nodes, "g", list(inputs), list(outputs), list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model.SerializeToString()


def ints(name, values):
    """An int64 initializer."""
    return numpy_helper.from_array(np.array(values, np.int64), name)


def floats(name, values):
    """A float32 initializer."""
    return numpy_helper.from_array(np.array(values, np.float32), name)


def single_op_models() -> list[tuple[str, bytes]]:
    """Models of one op each whose inputs are initializers (so it folds), and a few
    with a graph input, covering the ops that make values while importing."""
    x = helper.make_tensor_value_info("x", F, [2, 3])
    y = helper.make_tensor_value_info("y", F, None)
    n = helper.make_node
    known = floats("k", np.arange(6).reshape(2, 3))
    folded = {
        "ConstantOfShape": ([n("ConstantOfShape", ["s"], ["y"])], [ints("s", [2, 3])]),
        "Range": ([n("Range", ["a", "b", "c"], ["y"])],
                  [floats("a", 0), floats("b", 10), floats("c", 1.5)]),
        "Expand": ([n("Expand", ["k", "s"], ["y"])], [known, ints("s", [2, 2, 3])]),
        "Tile": ([n("Tile", ["k", "s"], ["y"])], [known, ints("s", [2, 1])]),
        "Reshape": ([n("Reshape", ["k", "s"], ["y"])], [known, ints("s", [3, 0])]),
        "Split": ([n("Split", ["k"], ["y", "z"], axis=1, num_outputs=2)], [known]),
        "Pad": ([n("Pad", ["k", "p", "", "a"], ["y"])], [known, ints("p", [1, 1]), ints("a", [1])]),
        "Sum": ([n("Sum", ["k", "k"], ["y"])], [known]),
        "Slice": ([n("Slice", ["k", "b", "e"], ["y"])], [known, ints("b", [0]), ints("e", [1])]),
        "Concat": ([n("Concat", ["k", "k"], ["y"], axis=0)], [known]),
        "Dropout": ([n("Dropout", ["k"], ["y", "m"])], [known]),
        "CastLike": ([n("CastLike", ["k", "i"], ["y"])], [known, ints("i", [1])]),
        "Gather": ([n("Gather", ["k", "i"], ["y"], axis=1)], [known, ints("i", [2, 0])]),
    }  # fmt: skip
    found = [
        (f"folded {op}", onnx_model(nodes, [], [y], inits)) for op, (nodes, inits) in folded.items()
    ]
    image = helper.make_tensor_value_info("x", F, [1, 2, 4, 4])
    found += [
        ("Conv", onnx_model([n("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], [image], [y],
                        [floats("w", np.ones((2, 2, 3, 3)))])),
        ("Resize", onnx_model([n("Resize", ["x", "", "r"], ["y"])], [image], [y],
                          [floats("r", [1, 1, 2, 2])])),
        ("MaxPool", onnx_model([n("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])], [image], [y])),
        ("Softmax", onnx_model([n("Softmax", ["x"], ["y"], axis=1)], [x], [y])),
        ("LayerNormalization", onnx_model([n("LayerNormalization", ["x", "g"], ["y"])], [x], [y],
                                      [floats("g", [1, 1, 1])])),
    ]  # fmt: skip
    return found


def node_case_models(every: int) -> list[tuple[str, bytes]]:
    """Every ``every``-th of ONNX's node test cases nbyoc selects, as it is and with its
    inputs made initializers (from the case's data, so every node folds)."""
    from .onnx_cases import selected

    found = []
    for case in selected()[::every]:
        found.append((case.name, case.model.SerializeToString()))
        inputs, _ = case.data_sets[0]
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        graph = model.graph
        for info, value in zip(list(graph.input), inputs):
            array = numpy_helper.to_array(value) if isinstance(value, TensorProto) else value
            if isinstance(array, np.ndarray) and array.dtype != object:
                graph.initializer.append(numpy_helper.from_array(array, info.name))
                graph.input.remove(info)
        found.append((f"{case.name}, inputs known", model.SerializeToString()))
    return found


# -- the mutator --------------------------------------------------------------------------


def _mutate_initializer(rng, model) -> str:
    tensor = rng.choice(model.graph.initializer)
    kind = rng.randrange(6)
    if kind == 0:
        dims = list(tensor.dims) or [1]
        dims[rng.randrange(len(dims))] = rng.choice(EXTREME_INTS)
        tensor.dims[:] = [d if d > -(2**62) else -1 for d in dims]
        return f"initializer {tensor.name!r} dims = {dims}"
    if kind == 1:
        tensor.data_type = rng.choice([0, 2, 3, 8, 9, 10, 16, 17, 22, 25, 99])
        return f"initializer {tensor.name!r} data_type = {tensor.data_type}"
    if kind == 2 and tensor.raw_data:
        tensor.raw_data = tensor.raw_data[: rng.randrange(len(tensor.raw_data))]
        return f"initializer {tensor.name!r} raw_data cut"
    if kind == 3:
        tensor.data_location = TensorProto.EXTERNAL
        del tensor.external_data[:]
        for key, value in (("location", rng.choice(LOCATIONS)),
                           ("offset", str(rng.choice([0, 5, 2**40]))),
                           ("length", str(rng.choice([0, 4, 2**40, -1])))):  # fmt: skip
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        return f"initializer {tensor.name!r} made external: {list(tensor.external_data)}"
    try:
        array = numpy_helper.to_array(tensor).copy()
    except Exception:  # an earlier mutation broke it already
        return "nothing (unreadable initializer)"
    if array.size == 0 or array.dtype.kind not in "iuf":
        return "nothing (empty or not numeric)"
    flat = array.reshape(-1)
    k = rng.randrange(flat.size)
    if flat.dtype.kind in "iu":
        info = np.iinfo(flat.dtype)
        flat[k] = min(max(rng.choice(EXTREME_INTS), info.min), info.max)
    else:
        value = rng.choice(EXTREME_NUMBERS)
        with np.errstate(over="ignore"):
            flat[k] = value if abs(value) < 1e308 or value != value else np.inf
    tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return f"initializer {tensor.name!r}[{k}] = {flat[k]}"


def _mutate_attribute(rng, node) -> str:
    if not node.attribute or rng.random() < 0.3:
        name = rng.choice(["axis", "axes", "num_outputs", "allowzero", "mode", "group",
                           "keepdims", "perm", "pads", "kernel_shape", "to", "value"])  # fmt: skip
        value = rng.choice([rng.choice(EXTREME_INTS), [rng.choice(EXTREME_INTS)], "wrap", 1.5])
        node.attribute.append(helper.make_attribute(name, value))
        return f"{node.op_type}: attribute {name} = {value!r} added"
    attr = rng.choice(node.attribute)
    if attr.type == onnx.AttributeProto.INT:
        attr.i = rng.choice(EXTREME_INTS)
        return f"{node.op_type}.{attr.name} = {attr.i}"
    if attr.type == onnx.AttributeProto.INTS and attr.ints:
        attr.ints[rng.randrange(len(attr.ints))] = rng.choice(EXTREME_INTS)
        return f"{node.op_type}.{attr.name} = {list(attr.ints)}"
    if attr.type == onnx.AttributeProto.FLOAT:
        attr.f = rng.choice([float("nan"), float("inf"), -1e30, 0.0])
        return f"{node.op_type}.{attr.name} = {attr.f}"
    node.attribute.remove(attr)
    return f"{node.op_type}: attribute {attr.name} removed"


def _mutate_node(rng, model) -> str:
    graph = model.graph
    node = rng.choice(graph.node)
    kind = rng.randrange(6)
    if kind == 0:
        old, node.op_type = node.op_type, rng.choice(sorted(CONVERTERS))
        return f"{old} node made {node.op_type}"
    if kind == 1 and node.input:
        k = rng.randrange(len(node.input))
        node.input[k] = rng.choice(["", "nowhere", *[o for m in graph.node for o in m.output]])
        return f"{node.op_type} input {k} = {node.input[k]!r}"
    if kind == 2:
        names = [i.name for i in graph.input] + [t.name for t in graph.initializer]
        names += [o for m in graph.node for o in m.output]
        node.output.append(rng.choice(names) if names and rng.random() < 0.7 else "extra")
        return f"{node.op_type} gains output {node.output[-1]!r}"
    if kind == 3 and node.input:
        del node.input[rng.randrange(len(node.input))]
        return f"{node.op_type} loses an input"
    return _mutate_attribute(rng, node)


def _mutate_graph(rng, model) -> str:
    graph = model.graph
    if graph.input and rng.random() < 0.6:
        info = rng.choice(graph.input)
        dims = info.type.tensor_type.shape.dim
        if dims:
            dim = dims[rng.randrange(len(dims))]
            dim.dim_value = rng.choice([0, 1, 2**31, 2**40, 2**62])
            return f"input {info.name!r} dim = {dim.dim_value}"
    opset = rng.choice([1, 6, 7, 11, 13, 28, 29, 99])
    model.opset_import[0].version = opset
    return f"opset {opset}"


def mutate_onnx(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """One change to a model: an initializer's dims, type, data or location; a node's op
    type, inputs, outputs (a name defined twice) or attributes (extreme values); an
    input's dims; the opset. Not a model: a byte change."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:
        return mutate_bytes(rng, data)
    choices = [_mutate_graph]
    if model.graph.node:
        choices += [_mutate_node] * 3
    if model.graph.initializer:
        choices += [_mutate_initializer] * 2
    try:
        what = rng.choice(choices)(rng, model)
        return what, model.SerializeToString()
    except Exception:  # a model an earlier byte change broke (a name not UTF-8, ...)
        return mutate_bytes(rng, data)
