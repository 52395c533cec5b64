"""``fold_constant_layout``: a layout op (transpose, reshape, slice, ...) of constants
becomes a constant, laid out once at compile time.

A model's weights often reach their op through a layout op: ONNX's ``Gemm`` with
``transB=1`` is legalised to ``matmul(x, transpose(W))``. Left in the graph, the
backend lays the weight out again at every call: for ddddocr's recogniser, a (8210,
1024) classifier weight copied transposed per call was 43 ms of its 50 ms on llvm.
Folded, the backend reads a constant already in the layout its op wants.

Only layout ops are folded: they move values and never compute, so the folded constant
is exactly what the op would give at run time on every backend, for every dtype. A
result larger than its operands (a ``broadcast_to``, a ``tile``) is left alone:
folding it would grow the model's constants, and the backends read broadcasts without
copying.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (2, 3))
>>> w = nbyoc.const(np.arange(12, dtype=np.float32).reshape(4, 3))
>>> folded = fold_constant_layout(nbyoc.function([x], x @ nbyoc.transpose(w)))
>>> weight = folded.body.args[1]
>>> type(weight).__name__, weight.data.shape, weight.data.flags["C_CONTIGUOUS"]
('Constant', (3, 4), True)
"""

from __future__ import annotations

import numpy as np

from ..ir.dtypes import dtype_info
from ..ir.nodes import Call, Constant, Expr, Function
from ..ir.traversal import operands, post_order, with_operands
from ..ir.types import TensorType
from .regions import is_op_call


def fold_constant_layout(func: Function) -> Function:
    """``func`` with each layout op whose operands are all constants (and whose result
    is no larger than they are) replaced by its value; ``func`` itself when none is."""
    new: dict[Expr, Expr] = {}
    for node in post_order([func.body]):
        args = [new.get(a, a) for a in operands(node)]
        changed = any(a is not b for a, b in zip(args, operands(node)))
        rebuilt = with_operands(node, args) if changed else node
        if _foldable(rebuilt):
            rebuilt = Constant(_value(rebuilt))
        if rebuilt is not node:
            new[node] = rebuilt
    if func.body not in new:
        return func
    return Function(func.params, new[func.body], func.attrs)


def _foldable(node: Expr) -> bool:
    if not (is_op_call(node) and node.op.kind == "layout" and node.args):
        return False
    if not all(isinstance(a, Constant) for a in node.args):
        return False
    if not isinstance(node.type, TensorType) or not node.type.is_static:
        return False
    return node.type.size * node.type.itemsize <= sum(a.data.nbytes for a in node.args)


def _value(call: Call) -> np.ndarray:
    """The call's value by its NumPy reference (a layout op moves values of any dtype as
    they are), C-contiguous and owning its memory (a view would keep the whole operand
    alive)."""
    value = call.op.reference(*(a.data for a in call.args), **call.attrs)
    value = np.array(value, order="C", copy=True)
    assert value.dtype == dtype_info(call.type.dtype).numpy and value.shape == call.type.shape
    return value
