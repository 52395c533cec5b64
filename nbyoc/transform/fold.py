"""``fold_batch_norm``: a batch norm with constant parameters after a conv (or a
transposed conv) with constant weights becomes part of it.

Inference batch norm is a per-channel affine map, ``y * s + t`` with
``s = scale / sqrt(var + eps)`` and ``t = bias - mean * s``; applied to a conv's
output channel ``m`` it equals the conv with ``w[m]`` scaled by ``s[m]`` and the bias
``b[m] * s[m] + t[m]``. Folding it saves a pass over the conv's output and the
batch norm's own arithmetic, as ONNX Runtime's graph optimiser does. The new weights
are computed in float64 and rounded once to the conv's dtype, so the folded conv
differs from conv-then-batch-norm by rounding only. A ``conv_transpose``'s weight is
laid out (C, M / group, kernel...): output channel ``g * M / group + m`` is column ``m``
of group ``g``'s rows, so its factor scales those (PP-OCR's DB head upsamples with a
transposed conv and a batch norm; unfolded, the norm is a pass over the upsampled map).

A conv read by anything besides the batch norm keeps its own value (folding would
compute it twice); non-constant weights or statistics are left alone.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (1, 2, 4, 4))
>>> w = nbyoc.const(np.ones((3, 2, 3, 3), np.float32))
>>> ones = nbyoc.const(np.ones(3, np.float32))
>>> y = nbyoc.batch_norm(nbyoc.conv(x, w, pads=(1, 1, 1, 1)), ones, ones, ones, ones)
>>> folded = fold_batch_norm(nbyoc.function([x], y))
>>> [n.op.name for n in nbyoc.ir.post_order([folded.body]) if isinstance(n, nbyoc.ir.Call)]
['conv']
"""

from __future__ import annotations

import numpy as np

from ..ir.nodes import Call, Constant, Expr, Function
from ..ir.op import Op
from ..ir.traversal import operands, post_order, with_operands


def fold_batch_norm(func: Function) -> Function:
    """``func`` with every foldable conv -> batch_norm pair made one conv (see the
    module docstring); ``func`` itself when there is none."""
    nodes = post_order([func.body])
    readers: dict[Expr, int] = {}
    for node in nodes:
        for arg in operands(node):
            readers[arg] = readers.get(arg, 0) + 1
    new: dict[Expr, Expr] = {}
    changed = False
    for node in nodes:
        args = [new.get(a, a) for a in operands(node)]
        folded = _folded(node, readers) if _is_op(node, "batch_norm") else None
        if folded is not None:
            conv = node.args[0]
            x = new.get(conv.args[0], conv.args[0])
            new[node] = Call(conv.op.name, [x, *folded], conv.attrs)
            changed = True
        elif any(a is not b for a, b in zip(args, operands(node))):
            new[node] = with_operands(node, args)
    if not changed:
        return func
    return Function(func.params, new.get(func.body, func.body), func.attrs)


def _is_op(node: Expr, name: str) -> bool:
    return isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == name


def _folded(norm: Call, readers: dict) -> list[Constant] | None:
    """The new weight and bias of the conv ``norm`` reads, if ``norm`` folds into it,
    else None."""
    conv, *stats = norm.args
    if not (_is_op(conv, "conv") or _is_op(conv, "conv_transpose")) or readers.get(conv, 0) != 1:
        return None
    weight, *bias = conv.args[1:]
    constant = [weight, *bias, *stats]
    if not all(isinstance(c, Constant) for c in constant):
        return None
    if conv.type.dtype != norm.type.dtype:  # the batch norm widens the result
        return None
    scale, shift, mean, var = (s.data.astype(np.float64) for s in stats)
    factor = scale / np.sqrt(var + float(norm.attrs["epsilon"]))
    w = weight.data.astype(np.float64) * _per_output_channel(conv, factor)
    b = bias[0].data.astype(np.float64) if bias else np.zeros_like(factor)
    b = (b - mean) * factor + shift
    dtype = conv.type.dtype
    return [Constant(w.astype(dtype)), Constant(b.astype(dtype))]


def _per_output_channel(conv: Call, factor: np.ndarray) -> np.ndarray:
    """``factor`` (one per output channel) shaped to scale ``conv``'s weight by it."""
    weight = conv.args[1].type
    spatial = (1,) * (weight.ndim - 2)
    if conv.op.name == "conv":  # (M, C / group, kernel...)
        return factor.reshape((-1, 1, *spatial))
    group = conv.attrs["group"]  # (C, M / group, kernel...): rows of group g, its columns
    rows, columns = weight.shape[0] // group, weight.shape[1]
    by_group = factor.reshape((group, 1, columns, *spatial))
    return np.broadcast_to(by_group, (group, rows, columns, *spatial)).reshape(
        (group * rows, columns, *spatial)
    )
