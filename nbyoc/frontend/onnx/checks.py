"""Checks of a whole ONNX model before anything in it is converted: its names are
text, and it defines each name once.

>>> from onnx import helper, TensorProto
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
>>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["x"])], "g", [x], [x])
>>> check_single_assignment(graph)
Traceback (most recent call last):
    ...
nbyoc.errors.ModelImportError: 'x' is defined twice, by graph input 'x' and by a Relu node: ...
"""

from __future__ import annotations

import onnx

from ...errors import ModelImportError, shown
from .control_flow import nested_graphs, nested_nodes


def check_text(model: onnx.ModelProto) -> None:
    """Refuse a model whose names are not UTF-8 text (protobuf hands such a string field
    over as bytes, which no later step expects)."""
    named = [("opset domain", o.domain) for o in model.opset_import]
    for graph in nested_graphs(model.graph):
        named += [("graph input", i.name) for i in graph.input]
        named += [("graph output", o.name) for o in graph.output]
        named += [("initializer", t.name) for t in graph.initializer]
    for node, _ in nested_nodes(model.graph.node):
        named += [("node name", node.name), ("op type", node.op_type), ("domain", node.domain)]
        named += [("node input", n) for n in node.input]
        named += [("node output", n) for n in node.output]
        named += [("attribute name", a.name) for a in node.attribute]
    for what, name in named:
        if not isinstance(name, str):
            raise ModelImportError(f"the model's {what} {shown(name)} is not UTF-8 text")


def check_single_assignment(graph: onnx.GraphProto) -> None:
    """Refuse a graph that defines one name twice (ONNX graphs are in SSA form: a value
    is a graph input, an initializer or a node's output, once). An initializer may also
    be listed as a graph input (its default value, before IR version 4). Each subgraph
    is checked the same way (a name it defines is its own, seen by nothing outside)."""
    for each in nested_graphs(graph):
        _check_one_graph(each)


def _check_one_graph(graph: onnx.GraphProto) -> None:
    defined: dict[str, str] = {}

    def define(name: str, by: str) -> None:
        if name in defined:
            raise ModelImportError(
                f"{name!r} is defined twice, by {defined[name]} and by {by}: an ONNX graph "
                f"defines each name once"
            )
        defined[name] = by

    for tensor in graph.initializer:
        define(tensor.name, f"initializer {tensor.name!r}")
    initializers = set(defined)
    for info in graph.input:
        if info.name not in initializers:
            define(info.name, f"graph input {info.name!r}")
    for node in graph.node:
        by = f"{node.op_type} node {node.name!r}" if node.name else f"a {node.op_type} node"
        for name in node.output:
            if name:  # "": an optional output left out
                define(name, by)
