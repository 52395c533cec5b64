"""ONNX's recurrent ops: LSTM, GRU and RNN, as nbyoc's ``lstm``, ``gru`` and ``rnn``.

The optional inputs a node leaves out are filled in (zero biases, zero initial
states, zero peepholes) and ``layout=1`` (batch first) is transposed to ONNX's
default, so the op sees one form. The op packs every output into one tensor (see
``nbyoc.ir.ops.recurrent``); the outputs the node names are views of it, so the
recurrence runs once whichever the model reads.
"""

from __future__ import annotations

import numpy as np

from ....ir.builder import call_op, const
from ....ir.ops.recurrent import CELLS
from ..node import Node
from . import converter

#: ONNX op type -> nbyoc op.
_OPS = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn"}


def _zeros(shape, dtype):
    # (a broadcast zero, not an array: the batch may be a symbolic size)
    return call_op("broadcast_to", const(np.zeros((), dtype)), shape=tuple(shape))


@converter("LSTM", "GRU", "RNN", since=7)
def recurrent(node: Node):
    cell = CELLS[_OPS[node.op_type]]
    layout = node.attr("layout", 0)
    if layout not in (0, 1):
        raise node.fail(f"layout={layout!r} is not 0 or 1")
    x, w, r = node.expr(0), node.expr(1), node.expr(2)
    if layout:
        x = call_op("transpose", x, axes=(1, 0, 2))
    if x.type.ndim != 3 or r.type.ndim != 3:
        raise node.fail(f"X and R must be 3-D, got {x.type!r} and {r.type!r}")
    dtype = x.type.dtype
    direction = node.attr("direction", "forward")
    directions, hidden = (2 if direction == "bidirectional" else 1), r.type.shape[2]
    batch, gates = x.type.shape[1], cell.gates

    def state(index):
        if not node.has(index):
            return _zeros((directions, batch, hidden), dtype)
        given = node.expr(index)
        return call_op("transpose", given, axes=(1, 0, 2)) if layout else given

    b = node.expr(3) if node.has(3) else _zeros((directions, 2 * gates * hidden), dtype)
    lens = node.expr(4) if node.has(4) else None
    operands = [x, w, r, b, state(5)]
    if cell.states == 2:
        p = node.expr(7) if node.has(7) else _zeros((directions, 3 * hidden), dtype)
        operands += [state(6), p]
    attrs = {
        "direction": direction,
        "activations": node.attr("activations"),
        "activation_alpha": node.attr("activation_alpha"),
        "activation_beta": node.attr("activation_beta"),
        "clip": node.attr("clip"),
        "hidden_size": node.attr("hidden_size"),
    }
    attrs.update({flag: bool(node.attr(flag, 0)) for flag in cell.flags})
    packed = call_op(cell.name, *operands, *([lens] if lens is not None else []), **attrs)
    seq = x.type.shape[0]  # (a symbolic size as readily as a number)
    y = call_op("slice", packed, starts=(0,), ends=(seq,), axes=(0,))
    finals = [  # Y_h, then Y_c
        call_op("squeeze", call_op("slice", packed, starts=(seq + k,), ends=(seq + k + 1,),
                                   axes=(0,)), axes=(0,))
        for k in range(cell.states)
    ]  # fmt: skip
    if layout:
        y = call_op("transpose", y, axes=(2, 0, 1, 3))
        finals = [call_op("transpose", f, axes=(1, 0, 2)) for f in finals]
    outputs = [y, *finals]
    if node.n_outputs > len(outputs):
        raise node.fail(f"it has {len(outputs)} outputs; the node names {node.n_outputs}")
    return outputs[: node.n_outputs]


@converter("DynamicQuantizeLSTM", domain="com.microsoft")
def dynamic_quantize_lstm(node: Node):
    """ONNX Runtime's LSTM with int8 weights (X, W, R, B, sequence_lens, initial_h,
    initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point; W is (directions, input,
    4 * hidden), R (directions, hidden, 4 * hidden), each scale and zero point one per
    direction or one per gate column), as an LSTM of the weights dequantised.

    Runtime also quantises X and each step's hidden state to uint8 before its integer
    products; this computes them in float32, closer to the float LSTM the model was
    quantised from (an OCR model's logits: 0.3% of their range apart from Runtime's)."""
    weights = [_dequantised(node, k, 8 + 2 * m) for m, k in enumerate((1, 2))]
    inputs = [node.inputs[0], *weights, *node.inputs[3:8]]
    inputs += [None] * (8 - len(inputs))
    lstm = Node("LSTM", node.name, inputs, [*node.input_names[:8], *[""] * 8][:8],
                node.attrs, node.opset, node.n_outputs)  # fmt: skip
    return recurrent(lstm)


def _dequantised(node: Node, index: int, scale_index: int):
    """Weight input ``index`` less its zero point (input ``scale_index + 1``), times its
    scale (input ``scale_index``), in float32, transposed to ONNX LSTM's (directions,
    4 * hidden, size): computed now when all three are known (initializers)."""
    parts = [node.inputs[index], node.inputs[scale_index], node.inputs[scale_index + 1]]
    if parts[1] is None:
        raise node.fail(f"input {scale_index} (the scale of input {index}) is required")
    weights = node.expr(index)
    if weights.type.ndim != 3:
        raise node.fail(f"input {index} must be 3-D (directions, size, 4 * hidden)")
    directions, columns = weights.type.shape[0], weights.type.shape[2]

    def shaped(p, name):
        size = int(np.prod(p.shape))
        if size not in (directions, directions * columns):
            raise node.fail(f"{name} of input {index} must hold one value per direction or per "
                            f"gate column, got shape {tuple(p.shape)}")  # fmt: skip
        return (directions, 1, 1) if size == directions else (directions, 1, columns)

    if all(isinstance(p, np.ndarray) for p in parts):
        w, scale, zero = parts
        centred = w.astype(np.int32) - zero.reshape(shaped(zero, "the zero point"))
        dequantised = centred.astype(np.float32) * scale.reshape(shaped(scale, "the scale"))
        return np.ascontiguousarray(dequantised.transpose(0, 2, 1).astype(np.float32))
    scale, zero = node.expr(scale_index), node.expr(scale_index + 1)
    centred = call_op("subtract", call_op("cast", weights, to="int32"),
                      call_op("reshape", call_op("cast", zero, to="int32"),
                              newshape=shaped(zero.type, "the zero point")))  # fmt: skip
    scale = call_op("reshape", scale, newshape=shaped(scale.type, "the scale"))
    dequantised = call_op("multiply", call_op("cast", centred, to="float32"), scale)
    return call_op("transpose", dequantised, axes=(0, 2, 1))
