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

import math
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import onnx

from ...errors import ModelImportError, NbyocError, NeedsConstantError
from ...ir.builder import call_op, const, function, var
from ...ir.nodes import Expr
from .node import Node, Value, as_expr


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


# -- control flow at run time: If, Loop and Scan as nbyoc's cond and loop -------------

#: Converts a subgraph: (graph, the values its input names are bound to, the values of
#: the names it reads from outside) -> its outputs.
ConvertGraph = Callable[[onnx.GraphProto, dict, dict], list[Value]]


def free_names(graph: onnx.GraphProto) -> list[str]:
    """The names ``graph`` (and its subgraphs) read but do not define: the values of the
    graphs around it that it uses, in the order it first reads them."""
    defined = set()
    for g in nested_graphs(graph):
        defined.update(i.name for i in g.input)
        defined.update(t.name for t in g.initializer)
        defined.update(o for n in g.node for o in n.output)
    read = dict.fromkeys(
        name for node, _ in nested_nodes(graph.node) for name in node.input if name
    )
    read.update(dict.fromkeys(o.name for o in graph.output))
    return [name for name in read if name not in defined]


def _captured(graphs: list[onnx.GraphProto], values: dict) -> tuple[dict, list, list[Expr]]:
    """What the subgraphs ``graphs`` read from outside: a scope binding each such name
    (a known value as it is; an expression to a new parameter of the body), the
    parameters, and the expressions they stand for (the op's captured operands)."""
    scope, params, operands = {}, [], []
    for name in dict.fromkeys(n for g in graphs for n in free_names(g)):
        if name not in values:
            continue  # (the conversion says which name no one defines)
        value = values[name]
        if isinstance(value, np.ndarray):
            scope[name] = value
            continue
        p = var(f"captured_{len(params)}", value.type.shape, value.type.dtype)
        scope[name] = p
        params.append(p)
        operands.append(value)
    return scope, params, operands


def _scalar_flag(value: Expr) -> Expr:
    """A one-element condition as the bool scalar the ops take."""
    if math.prod(value.type.shape) != 1:
        raise ModelImportError(f"a condition must hold one value, got {value.type!r}")
    flag = call_op("reshape", value, newshape=())
    return flag if value.type.dtype == "bool" else call_op("cast", flag, to="bool")


def _body(node: Node, convert: ConvertGraph, graph, bound: dict, scope: dict) -> list[Value]:
    """``graph`` converted as a body run at run time: a value its import needs that
    changes from trip to trip (or with the branch taken) is refused as such."""
    try:
        return convert(graph, bound, scope)
    except NeedsConstantError as e:
        raise node.fail(
            f"its {graph.name or 'body'} runs at run time, and inside it {e} (a value the "
            f"body computes from the iteration number or a carried value cannot fix a size; "
            f"one it reads from the graph around it can be fixed with constants=)"
        ) from None


def run_if(node: Node, convert: ConvertGraph, values: dict) -> list[Value]:
    """The outputs of an ``If`` whose condition is known only at run time: a ``cond``
    whose branches are functions of the values either branch reads from outside."""
    branches = [node.attr("then_branch"), node.attr("else_branch")]
    if not all(isinstance(b, onnx.GraphProto) for b in branches):
        raise node.fail("an If needs both a then_branch and an else_branch graph")
    scope, params, operands = _captured(branches, values)
    functions = []
    for name, graph in zip(("then_branch", "else_branch"), branches):
        try:
            outputs = [as_expr(v) for v in _body(node, convert, graph, {}, scope)]
        except ModelImportError as e:  # (a branch meant for other sizes, say: then the
            # condition is what to fix, and the error names the inputs it depends on)
            node.known(0, f"the condition: deciding at run time, both branches must import, "
                          f"and its {name} does not ({e})")  # fmt: skip
            raise
        if len(outputs) != node.n_outputs:
            raise node.fail(
                f"its {name} has {len(outputs)} output(s) for the node's {node.n_outputs}"
            )
        functions.append(function(params, outputs[0] if len(outputs) == 1 else outputs))
    if functions[0].ret_type != functions[1].ret_type:
        raise node.fail(
            f"decided at run time, its branches give different types ({functions[0].ret_type!r} "
            f"and {functions[1].ret_type!r}); nbyoc needs one type for both: fix the sizes or "
            f"inputs that decide it with shapes= or constants="
        )
    result = call_op("cond", _scalar_flag(node.expr(0)), *operands,
                     then_branch=functions[0], else_branch=functions[1])  # fmt: skip
    return [result] if node.n_outputs == 1 else [result[k] for k in range(node.n_outputs)]


def run_loop(node: Node, convert: ConvertGraph, values: dict) -> list[Value]:
    """The outputs of a ``Loop`` (inputs: the trip count M and the condition, each
    optional, then the carried values): a ``loop`` of its body, the values the body
    reads from outside captured. A trip count known while importing bounds the loop;
    one known only at run time joins the condition (then the loop can have no scan
    outputs, whose length it would set)."""
    body = node.attr("body")
    if not isinstance(body, onnx.GraphProto):
        raise node.fail("a Loop needs a body graph")
    carried = [node.expr(k) for k in range(2, len(node.inputs))]
    if len(body.input) != 2 + len(carried):
        raise node.fail(
            f"its body takes {len(body.input)} inputs for the iteration number, the "
            f"condition and {len(carried)} carried value(s)"
        )
    n_scans = len(body.output) - 1 - len(carried)
    if n_scans < 0 or node.n_outputs > len(carried) + n_scans:
        raise node.fail(
            f"its body gives {len(body.output)} outputs for the condition and {len(carried)} "
            f"carried value(s)"
        )
    trips = limit = None
    if node.has(0):
        if isinstance(node.inputs[0], np.ndarray):
            trips = int(np.asarray(node.inputs[0]).reshape(-1)[0])
        elif n_scans:
            node.known(0, "the trip count, which sets the length of its scan outputs")
        else:
            limit = node.expr(0)  # (checked in the condition, trip by trip)
    scope, captured, operands = _captured([body], values)
    index, flag = var("iteration", (), "int64"), var("condition", (), "bool")
    state = [var(f"carried_{k}", c.type.shape, c.type.dtype) for k, c in enumerate(carried)]
    bound = dict(zip((i.name for i in body.input), [index, flag, *state]))
    outputs = [as_expr(v) for v in _body(node, convert, body, bound, scope)]
    go = _scalar_flag(outputs[0]) if node.has(1) else const(np.array(True))
    params = [index, flag, *state, *captured]
    if limit is not None:  # (i + 1 < M: whether another trip may run)
        m = var("trip_count", (), "int64")
        params.append(m)
        more = call_op("less", call_op("add", index, const(np.array(1, np.int64))), m)
        go = call_op("logical_and", go, more)
    scans = outputs[1 + len(carried) :]
    body_function = function(params, [go, *outputs[1 : 1 + len(carried)], *scans])
    start = _scalar_flag(node.expr(1)) if node.has(1) else const(np.array(True))
    extra = []
    if limit is not None:
        m = call_op("reshape", call_op("cast", limit, to="int64"), newshape=())
        start = call_op("logical_and", start, call_op("less", const(np.array(0, np.int64)), m))
        extra = [m]
    try:
        result = call_op("loop", start, *carried, *operands, *extra, body=body_function,
                         carried=len(carried), trips=trips)  # fmt: skip
    except NbyocError as e:
        raise node.fail(f"{e} (a value carried from trip to trip must keep its type)") from None
    return [result[k] for k in range(node.n_outputs)]


def run_scan(node: Node, convert: ConvertGraph, values: dict) -> list[Value]:
    """The outputs of a ``Scan`` (opset 9 on): a ``loop`` over the scan inputs' axis,
    each trip reading one slice of each (from the end for a reverse direction),
    carrying the states and stacking the scan outputs along their axes."""
    body = node.attr("body")
    count = node.attr("num_scan_inputs")
    if not isinstance(body, onnx.GraphProto) or count is None:
        raise node.fail("a Scan needs a body graph and num_scan_inputs")
    inputs = [node.expr(k) for k in range(len(node.inputs))]
    states, sequences = inputs[: len(inputs) - count], inputs[len(inputs) - count :]
    in_axes = list(node.attr("scan_input_axes") or [0] * count)
    in_reverse = list(node.attr("scan_input_directions") or [0] * count)
    sequences = [_moved_first(s, axis, node) for s, axis in zip(sequences, in_axes)]
    lengths = {s.type.shape[0] for s in sequences}
    if len(lengths) != 1:
        raise node.fail(f"its scan inputs have different lengths {sorted(map(str, lengths))}")
    (length,) = lengths
    if not isinstance(length, int):
        raise node.fail(
            f"its scan inputs' length {length} is symbolic; fix it with shapes= (the loop "
            f"needs its trip count when it is built)"
        )
    scope, captured, operands = _captured([body], values)
    index, flag = var("iteration", (), "int64"), var("condition", (), "bool")
    state = [var(f"state_{k}", s.type.shape, s.type.dtype) for k, s in enumerate(states)]
    full = [var(f"sequence_{k}", s.type.shape, s.type.dtype) for k, s in enumerate(sequences)]
    last = const(np.array(length - 1, np.int64))
    slices = [call_op("gather", seq, call_op("subtract", last, index) if reverse else index,
                      axis=0) for seq, reverse in zip(full, in_reverse)]  # fmt: skip
    bound = dict(zip((i.name for i in body.input), [*state, *slices]))
    outputs = [as_expr(v) for v in _body(node, convert, body, bound, scope)]
    if len(outputs) < len(states):
        raise node.fail(f"its body gives {len(outputs)} outputs for {len(states)} state(s)")
    body_function = function(
        [index, flag, *state, *full, *captured], [const(np.array(True)), *outputs]
    )
    try:
        result = call_op("loop", const(np.array(True)), *states, *sequences, *operands,
                         body=body_function, carried=len(states), trips=length)  # fmt: skip
    except NbyocError as e:
        raise node.fail(f"{e} (a state must keep its type from trip to trip)") from None
    results = [result[k] for k in range(len(outputs))]
    n_out = len(outputs) - len(states)
    out_axes = list(node.attr("scan_output_axes") or [0] * n_out)
    out_reverse = list(node.attr("scan_output_directions") or [0] * n_out)
    for k, (axis, reverse) in enumerate(zip(out_axes, out_reverse)):
        stacked = results[len(states) + k]
        if reverse:
            stacked = call_op("slice", stacked, starts=(length - 1,), ends=(-length - 1,),
                              axes=(0,), steps=(-1,))  # fmt: skip
        results[len(states) + k] = _moved_from_first(stacked, axis, node)
    return results


def _moved_first(x: Expr, axis: int, node: Node) -> Expr:
    axis = node.axis(axis, x.type.ndim)
    if axis == 0:
        return x
    order = (axis, *(a for a in range(x.type.ndim) if a != axis))
    return call_op("transpose", x, axes=order)


def _moved_from_first(x: Expr, axis: int, node: Node) -> Expr:
    axis = node.axis(axis, x.type.ndim)
    if axis == 0:
        return x
    rest = list(range(1, x.type.ndim))
    order = (*rest[:axis], 0, *rest[axis:])
    return call_op("transpose", x, axes=order)
