"""ONNX's TopK and GatherElements, on the sort family's ops.

TopK gives the k largest (or smallest, opset 11's ``largest=0``) values and their
indices, the first of equal values first; ``k`` is an attribute before opset 10 and an
input after. A ``sorted=0`` TopK may return its k values in any order: nbyoc's are
sorted. GatherElements is ``take_along_axis`` once the data is cut to the indices'
sizes on the other axes (ONNX takes a prefix there, NumPy would broadcast).
"""

from __future__ import annotations

from ....ir.builder import call_op
from ....ir.ops.sort import top_k
from ..node import Node
from . import converter


def _top_k(node: Node, k: int):
    x = node.expr(0)
    axis = node.axis(node.attr("axis", -1), x.type.ndim)
    if not 0 <= k <= x.type.shape[axis]:
        raise node.fail(f"k={k} is not within the {x.type.shape[axis]} elements along axis {axis}")
    return list(top_k(x, k, axis=axis, largest=bool(node.attr("largest", 1))))


@converter("TopK")
def top_k_attribute(node: Node):
    return _top_k(node, int(node.attr("k")))


@converter("TopK", since=10)
def top_k_input(node: Node):
    ks = node.ints(1, "k")
    if len(ks) != 1:
        raise node.fail(f"k must hold one integer, got {len(ks)}")
    return _top_k(node, ks[0])


@converter("GatherElements", since=11)
def gather_elements(node: Node):
    data, indices = node.expr(0), node.expr(1)
    if data.type.ndim != indices.type.ndim:
        raise node.fail(f"indices have rank {indices.type.ndim}, data rank {data.type.ndim}; "
                        f"they must be equal")  # fmt: skip
    axis = node.axis(node.attr("axis", 0), data.type.ndim)
    cut = [(a, n) for a, (n, m) in enumerate(zip(indices.type.shape, data.type.shape))
           if a != axis and n != m]  # fmt: skip
    if cut:
        data = call_op("slice", data, starts=(0,) * len(cut), ends=tuple(n for _, n in cut),
                       axes=tuple(a for a, _ in cut))  # fmt: skip
    return call_op("take_along_axis", data, indices, axis=axis)
