"""Control flow in ONNX models: the subgraphs of ``If``, ``Loop`` and ``Scan`` nodes,
and ``If`` nodes taken while importing.

An ``If`` whose condition is known when the model is imported (a constant, shape
arithmetic that folds, an input fixed with ``constants=``) is replaced by the branch it
takes: that branch's nodes are converted in a scope of their own, seeing every value
of the graphs around it (ONNX subgraphs read outer values by name), and its outputs
become the ``If``'s. Nested ``If``\\ s are taken the same way, branch by branch. An
``If`` deciding at run time is refused, naming the inputs its condition depends on.

The checks made before converting anything (the op types a model uses, its names)
walk the subgraphs too (``nested_nodes``), so an op nbyoc lacks inside a branch is
listed with the rest.

>>> from onnx import helper, TensorProto
>>> branch = helper.make_graph(
...     [helper.make_node("Relu", ["x"], ["y"])], "then", [],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
>>> node = helper.make_node("If", ["c"], ["out"], then_branch=branch, else_branch=branch)
>>> [(n.op_type, depth) for n, depth in nested_nodes([node])]
[('If', 0), ('Relu', 1), ('Relu', 1)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import onnx

from .node import Node, Value


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs among ``node``'s attributes (a branch, a loop's body), in order.
    (How deep they nest is bounded by protobuf itself: it neither reads nor builds
    messages nested past about a hundred levels, some thirty Ifs, so taking Ifs
    recursively stays far from Python's recursion limit.)"""
    graphs = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            graphs.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            graphs.extend(attr.graphs)
    return graphs


def nested_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[tuple[onnx.NodeProto, int]]:
    """Every node of ``nodes`` and of their subgraphs, nested ones included, each with
    its depth (0: not inside a subgraph); a node comes before its subgraphs' nodes."""
    stack = [(node, 0) for node in reversed(list(nodes))]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        inner = [n for graph in subgraphs(node) for n in graph.node]
        stack.extend((n, depth + 1) for n in reversed(inner))


def nested_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph inside it."""
    yield graph
    for node, _ in nested_nodes(graph.node):
        yield from subgraphs(node)


def take_if(node: Node, convert_branch: Callable[[onnx.GraphProto], list[Value]]) -> list[Value]:
    """The outputs of the ``If`` ``node``: those of the branch its condition (known while
    importing) takes, converted by ``convert_branch``."""
    condition = node.known(0, "the condition, which picks the branch")
    if condition.size != 1 or condition.dtype == object:
        shape = condition.shape
        raise node.fail(f"the condition must be one boolean, got {condition.dtype} {shape}")
    take = bool(np.asarray(condition).reshape(-1)[0])
    name = "then_branch" if take else "else_branch"
    branch = node.attr(name)
    if not isinstance(branch, onnx.GraphProto):
        raise node.fail(f"the condition is {take} but the node has no {name} graph")
    outputs = convert_branch(branch)
    if len(outputs) != node.n_outputs:
        raise node.fail(f"its {name} has {len(outputs)} output(s) for the node's {node.n_outputs}")
    return outputs
