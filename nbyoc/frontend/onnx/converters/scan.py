"""ONNX scans: CumSum and CumProd, the axis an input (known when importing), with the
``exclusive`` and ``reverse`` attributes the scan ops share. ONNX keeps the input's
dtype where NumPy widens small integers (an int32 cumsum is int64 in NumPy): the
wider result is cast back, which wraps as an int32 running sum would.
"""

from __future__ import annotations

from ....ir.builder import call_op
from ..node import Node
from . import converter


def _scan(nbyoc_op: str):
    def convert(node: Node):
        x = node.expr(0)
        axes = node.ints(1, "axis")
        if len(axes) != 1:
            raise node.fail(f"axis must hold one integer, got {len(axes)}")
        axis = node.axis(axes[0], x.type.ndim)
        out = call_op(nbyoc_op, x, axis=axis, exclusive=bool(node.attr("exclusive", 0)),
                      reverse=bool(node.attr("reverse", 0)))  # fmt: skip
        return out if out.type.dtype == x.type.dtype else call_op("cast", out, to=x.type.dtype)

    convert.__name__ = nbyoc_op
    return convert


converter("CumSum", since=11)(_scan("cumsum"))
converter("CumProd", since=26)(_scan("cumprod"))
