"""ONNX's Einsum: its equation is NumPy's subscripts (``nbyoc.einsum`` plans the
contraction into transposes, reshapes, matmuls and sums)."""

from __future__ import annotations

from ....ir.einsum import einsum as build_einsum
from ..node import Node
from . import converter


@converter("Einsum", since=12)
def einsum(node: Node):
    equation = node.attr("equation")
    if isinstance(equation, bytes):
        equation = equation.decode()
    return build_einsum(equation, *(node.expr(i) for i in range(len(node.inputs))))
