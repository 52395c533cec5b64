"""The QDQ pattern as integer arithmetic: a ``MatMul``, ``Conv`` or ``Gemm`` whose data
inputs are ``DequantizeLinear`` outputs (8-bit, per tensor; the weight per tensor or per
output channel) and whose only reader is a ``QuantizeLinear`` becomes one
``QLinearMatMul``, ``QLinearConv`` or (ONNX Runtime's) ``QGemm`` (a dequantised int32
bias becomes the bias input), as ONNX Runtime rewrites such models when its graph
optimisations are on, and on the conditions it does (the output of the activation's
type; a signed activation's weight signed; a Gemm with a bias: alpha and beta 1). The
product is then computed on the integers, its sum exact, and requantised once
(``converters.quantize``), so each result is Runtime's (optimised) bit for bit; the
float path computes the product of the dequantised values, as the graph itself says,
and as Runtime does with its optimisations off.

``from_onnx`` applies it before converting (its default, ``qdq="integer"``; ``"float"``
keeps the graph as written); a pattern that does not
match exactly (blocked scales, a product read by other nodes too, a graph output) is
left as it is. Runtime fuses more than this (a Relu or Clip between the product and its
QuantizeLinear, Softmax into ``QLinearSoftmax``, Add and Mul into ``QLinearAdd`` and
``QLinearMul``, a product with no QuantizeLinear after it into one with a float
output); those stay as the graph says.

>>> from onnx import helper
>>> nodes = [helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["fa"]),
...          helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["fb"]),
...          helper.make_node("MatMul", ["fa", "fb"], ["p"]),
...          helper.make_node("QuantizeLinear", ["p", "sy", "zy"], ["y"])]
>>> graph = helper.make_graph(nodes, "g", [], [])
>>> import numpy as np
>>> known = {"sa": np.float32(0.1), "sb": np.float32(0.2), "sy": np.float32(0.5),
...          "za": np.uint8(128), "zb": np.int8(0), "zy": np.uint8(128)}
>>> value = lambda name: np.asarray(known[name]) if name in known else None
>>> [n.op_type for n in integer_products(graph, value).node]
['DequantizeLinear', 'DequantizeLinear', 'QLinearMatMul']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper

#: The ops rewritten, and the integer op (and its domain) each becomes.
_INTEGER_OPS = {"MatMul": ("QLinearMatMul", ""), "Conv": ("QLinearConv", ""),
                "Gemm": ("QGemm", "com.microsoft")}  # fmt: skip
_DEFAULT = ("", "ai.onnx")


def integer_products(
    graph: onnx.GraphProto, known: Callable[[str], np.ndarray | None]
) -> onnx.GraphProto:
    """``graph`` (a copy) with each QDQ product rewritten to its QLinear op. ``known``
    gives the value of a name known while importing (an initializer), else None: every
    scale and zero point must be known, the zero points 8-bit, the scales one value
    (per tensor) or, for the weight, one per output channel along the axis the QLinear
    op reads them on."""
    producer = {o: n for n in graph.node for o in n.output}
    reading: dict[str, list[onnx.NodeProto]] = {}  # name -> the nodes reading it
    for n in graph.node:
        for i in n.input:
            if i:
                reading.setdefault(i, []).append(n)
    readers = Counter({name: len(nodes) for name, nodes in reading.items()})
    readers.update(o.name for o in graph.output)
    replaced: dict[int, onnx.NodeProto] = {}  # id of the QuantizeLinear -> the QLinear node
    dropped: set[int] = set()
    for node in graph.node:
        if node.op_type not in _INTEGER_OPS or node.domain not in _DEFAULT:
            continue
        quantize = _only_reader(node.output[0], readers, reading)
        data = [producer.get(name) for name in node.input[:2]]
        if quantize is None or not all(_dequantize(d) for d in data):
            continue
        a, b = data
        if not (_per_tensor(a, known) and _per_tensor(quantize, known)):
            continue
        if not (_per_tensor(b, known) or _per_channel(b, node, known)):
            continue
        if not _types_fuse(a, b, quantize, known):
            continue
        attrs = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        bias = None
        if len(node.input) > 2 and node.input[2]:
            bias = producer.get(node.input[2])
            if not (_dequantize(bias) and _int32(bias.input[0], known)):
                continue
        if node.op_type == "Gemm":
            # (QGemm adds the int32 bias to the sum, then scales by alpha: so alpha 1 with
            # a bias, and beta 1; it takes no beta)
            if bias is not None and (attrs.get("alpha", 1.0) != 1 or attrs.get("beta", 1.0) != 1):
                continue
            attrs.pop("beta", None)
        inputs = [*_qdq_inputs(a), *_qdq_inputs(b)]
        if node.op_type == "Gemm":
            inputs.append(bias.input[0] if bias is not None else "")
        inputs += _qdq_inputs(quantize, skip_data=True)
        if node.op_type == "Conv" and bias is not None:
            inputs.append(bias.input[0])  # (the int32 bias, whose scale is x's times w's)
        op_type, domain = _INTEGER_OPS[node.op_type]
        replaced[id(quantize)] = helper.make_node(
            op_type, inputs, list(quantize.output), name=node.name, domain=domain or None,
            **attrs,
        )  # fmt: skip
        dropped.add(id(node))
    if not replaced:
        return graph
    copy = onnx.GraphProto()
    copy.CopyFrom(graph)
    del copy.node[:]
    for node in graph.node:
        if id(node) in dropped:
            continue
        copy.node.append(replaced.get(id(node), node))
    return copy


def _only_reader(name: str, readers: Counter, reading: dict):
    """The QuantizeLinear that is ``name``'s one reader (as its data), else None."""
    if readers[name] != 1 or name not in reading:  # (read once, but by a graph output)
        return None
    (node,) = reading[name]
    ok = node.op_type == "QuantizeLinear" and node.domain in _DEFAULT
    return node if ok and node.input[0] == name else None


def _dequantize(node) -> bool:
    return node is not None and node.op_type == "DequantizeLinear" and node.domain in _DEFAULT


def _quantisation(node: onnx.NodeProto, known) -> tuple | None:
    """A Q or DQ node's scale and zero point (both known, the zero point 8-bit), and its
    axis and block size; None otherwise."""
    if len(node.input) < 3 or not node.input[2]:
        return None
    scale, zero = known(node.input[1]), known(node.input[2])
    if scale is None or zero is None or zero.dtype not in (np.int8, np.uint8):
        return None
    attrs = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    return scale, zero, attrs.get("axis", 1), attrs.get("block_size", 0)


def _per_tensor(node: onnx.NodeProto, known) -> bool:
    found = _quantisation(node, known)
    return found is not None and found[0].size == 1 and found[1].size == 1


def _per_channel(node: onnx.NodeProto, product: onnx.NodeProto, known) -> bool:
    """A weight's DequantizeLinear with one scale per output channel: a Conv weight's
    axis 0, a MatMul weight's last (2-D) axis, a Gemm weight's axis 1 (0 when
    transposed)."""
    found = _quantisation(node, known)
    weight = known(node.input[0])
    if found is None or weight is None or found[3]:
        return False
    scale, zero, axis, _ = found
    axis %= weight.ndim
    if product.op_type == "Conv":
        wanted = 0
    else:
        transposed = any(x.name == "transB" and x.i for x in product.attribute)
        wanted = 0 if product.op_type == "Gemm" and transposed else 1
        if weight.ndim != 2:
            return False
    return axis == wanted and scale.ndim == 1 and zero.shape == scale.shape


def _types_fuse(a, b, quantize, known) -> bool:
    """Runtime's own condition: the product's output of the activation's type, and a
    signed activation's weight signed too (the zero points have the data's types)."""
    a_type, b_type = known(a.input[2]).dtype, known(b.input[2]).dtype
    y_type = known(quantize.input[2]).dtype
    return a_type == y_type and (a_type != np.int8 or b_type == np.int8)


def _int32(name: str, known) -> bool:
    value = known(name)
    return value is not None and value.dtype == np.int32


def _qdq_inputs(node: onnx.NodeProto, skip_data: bool = False) -> list[str]:
    """A Q or DQ node's (data,) scale and zero point, as a QLinear op takes them."""
    names = list(node.input) + [""] * (3 - len(node.input))
    return names[1:3] if skip_data else names[:3]
