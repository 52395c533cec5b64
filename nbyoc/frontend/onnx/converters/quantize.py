"""ONNX's quantisation ops, as the ops they are made of:

- QuantizeLinear: ``y = saturate(round_half_even(x / scale) + zero_point)``
- DequantizeLinear: ``y = (x - zero_point) * scale``
- DynamicQuantizeLinear: QuantizeLinear to uint8 by a scale and zero point taken
  from x's range (widened to hold 0), as ONNX Runtime takes them
- MatMulInteger / ConvInteger: the product or convolution of the operands less
  their zero points, computed in floats where that is exact (``_sum_type``), as int32


per tensor, per axis (a 1-D scale along ``axis``) and blocked (``block_size``
consecutive elements of ``axis`` share one scale: opset 21). They compute as ONNX
Runtime does: the quotient in float32 (float16 inputs widened first), the
difference in int32 before it becomes a float, so each result is bit for bit
Runtime's. The output's type is the zero point's, else ``output_dtype``, else
uint8 (QuantizeLinear); the scale's, else ``output_dtype`` (DequantizeLinear). Every
integer type nbyoc has is a quantised type (int4 and uint4 too, and int2 and uint2),
and so are float8 and float4 (not rounded to an integer: rounded to the type by the
cast, and saturated unless ``saturate=0``, as Cast is).

Fused into the ops around them, a dequantised weight is a constant (folded while
importing), and a QDQ pair around an activation is a handful of elementwise ops in
the same loop.
"""

from __future__ import annotations

import math

import numpy as np

from .... import limits
from ....ir.builder import call_op, const
from ....ir.dtypes import dtype_info
from ..dtypes import onnx_dtype
from ..node import Node
from . import converter
from .elementwise import saturated


def _operand(node: Node, index: int, x, axis: int, block: int):
    """Input ``index`` (a scale or zero point) as an expression broadcasting against
    ``x``: as it is when it has one element, along ``axis`` when it is 1-D (per axis),
    each element repeated over ``block`` positions of ``axis`` when blocked."""
    p = node.expr(index)
    ndim, shape = x.type.ndim, x.type.shape
    if block == 0:
        if math.prod(p.type.shape) == 1:  # per tensor (a 1-element vector too)
            return p if p.type.ndim == 0 else call_op("reshape", p, newshape=())
        if p.type.ndim != 1 or ndim == 0:
            raise node.fail(f"input {index} must be a scalar or 1-D (per axis), got {p.type!r}")
        if p.type.shape[0] != shape[axis]:
            raise node.fail(
                f"input {index} holds {p.type.shape[0]} values for axis {axis} of length "
                f"{shape[axis]}"
            )
        return call_op("reshape", p, newshape=(shape[axis],) + (1,) * (ndim - axis - 1))
    blocks = -(-shape[axis] // block)
    before, after = shape[:axis], shape[axis + 1 :]
    if p.type.shape != (*before, blocks, *after):
        raise node.fail(
            f"input {index} must have shape {(*before, blocks, *after)} for block_size={block}, "
            f"got {p.type!r}"
        )
    inserted = call_op("reshape", p, newshape=(*before, blocks, 1, *after))
    repeated = call_op("broadcast_to", inserted, shape=(*before, blocks, block, *after))
    flat = call_op("reshape", repeated, newshape=(*before, blocks * block, *after))
    return call_op("slice", flat, starts=(0,), ends=(shape[axis],), axes=(axis,))


def _layout(node: Node, x) -> tuple[int, int]:
    """The quantisation axis (in range) and block size."""
    block = node.attr("block_size", 0)
    if block < 0:
        raise node.fail(f"block_size must not be negative, got {block}")
    per_tensor = block == 0 and math.prod(node.expr(1).type.shape) == 1
    if x.type.ndim == 0 or per_tensor:  # (then axis means nothing, in range or not)
        return 0, 0
    return node.axis(node.attr("axis", 1), x.type.ndim), block


def _output_dtype(node: Node) -> str:
    if node.has(2):
        return node.expr(2).type.dtype
    code = node.attr("output_dtype", 0)
    return onnx_dtype(code, f"{node.where}: output_dtype") if code else "uint8"


@converter("QuantizeLinear", since=10)
def quantize_linear(node: Node):
    x = node.expr(0)
    axis, block = _layout(node, x)
    dtype = _output_dtype(node)
    info = dtype_info(dtype)
    if not (info.is_integer or (info.is_float and not info.computed)):
        raise node.fail(
            f"quantising to {dtype} is not supported (integer types, float8 and float4)"
        )
    if node.has(2) and node.expr(2).type.dtype != dtype:
        raise node.fail(f"output_dtype disagrees with the zero point's {node.expr(2).type.dtype}")
    wide = "float32" if dtype_info(x.type.dtype).bits < 32 else x.type.dtype
    scale = call_op("cast", _operand(node, 1, x, axis, block), to=wide)
    q = call_op("divide", call_op("cast", x, to=wide), scale)
    if info.is_integer:
        q = call_op("round", q)
    if node.has(2):
        q = call_op("add", q, call_op("cast", _operand(node, 2, x, axis, block), to=wide))
    if info.is_float:  # a float8 or float4: rounded by the cast, saturated as Cast is
        return call_op("cast", saturated(q, dtype, node.attr("saturate", 1)), to=dtype)
    q = call_op("clip", q, min=float(info.min), max=float(info.max))
    return call_op("cast", q, to=dtype)


@converter("DequantizeLinear", since=10)
def dequantize_linear(node: Node):
    x = node.expr(0)
    info = dtype_info(x.type.dtype)
    if not (info.is_integer or (info.is_float and not info.computed)):
        raise node.fail(
            f"dequantising {x.type.dtype} is not supported (integer types, float8 and float4)"
        )
    axis, block = _layout(node, x)
    scale = _operand(node, 1, x, axis, block)
    # (integers centred in int32, exactly; a float8 or float4 as its float32 value)
    middle = "int32" if info.is_integer else "float32"
    centred = call_op("cast", x, to=middle)
    if node.has(2):
        zero = call_op("cast", _operand(node, 2, x, axis, block), to=middle)
        centred = call_op("subtract", centred, zero)
    y = call_op("multiply", call_op("cast", centred, to=scale.type.dtype), scale)
    code = node.attr("output_dtype", 0)
    return call_op("cast", y, to=onnx_dtype(code, f"{node.where}: output_dtype")) if code else y


def _known_centred(node: Node, index: int, zero_index: int, dtype: str, zero_shape=None):
    """``_centred``'s value when input ``index`` and its zero point are known (a
    weight's: computed once, here, not at every call), else None."""
    value = node.inputs[index]
    zero = node.inputs[zero_index] if node.has(zero_index) else np.zeros((), np.int32)
    if not (isinstance(value, np.ndarray) and isinstance(zero, np.ndarray)):
        return None
    limits.check("folded_bytes", value.size * np.dtype(dtype).itemsize,
                 f"{node.where}: input {index} less its zero point")  # fmt: skip
    if zero.size == 1:
        zero = zero.reshape(())
    elif zero_shape is not None:
        zero = zero.reshape(zero_shape)
    return value.astype(dtype) - zero.astype(dtype)


def _centred(node: Node, index: int, zero_index: int, dtype: str, zero_shape=None):
    """Input ``index`` less its zero point (input ``zero_index``, when given; reshaped to
    ``zero_shape`` when it holds one per row or channel), in ``dtype`` (a constant when
    both are known)."""
    known = _known_centred(node, index, zero_index, dtype, zero_shape)
    if known is not None:
        return const(known)
    x = call_op("cast", node.expr(index), to=dtype)
    if not node.has(zero_index):
        return x
    zero = node.expr(zero_index)
    if math.prod(zero.type.shape) == 1:
        zero = call_op("reshape", zero, newshape=())
    elif zero_shape is not None:
        zero = call_op("reshape", zero, newshape=zero_shape)
    return call_op("subtract", x, call_op("cast", zero, to=dtype))


@converter("MatMulInteger", since=10)
def matmul_integer(node: Node):
    # The operands are 8-bit: in floats every product and every partial sum is an exact
    # integer (float32 where ``_sum_type`` proves the sums small, else float64: exact for
    # up to 2**37 terms), so the int32 result is exact too, and the product runs as a
    # float matrix product (llvm's tiles, BLAS) rather than NumPy's integer loops:
    # ddddocr's older recogniser spent 3.0 s of its 3.2 in one 16 x 1024 x 8210 int32
    # product on the host.
    # (A's zero point may hold one per row, B's one per column: broadcast as such)
    a = node.expr(0)
    rows = (a.type.shape[-2], 1) if a.type.ndim >= 2 else None
    dtype = _sum_type(node, 0, 1)
    product = call_op("matmul", _centred(node, 0, 2, dtype, rows), _centred(node, 1, 3, dtype))
    return call_op("cast", product, to="int32")


@converter("ConvInteger", since=10)
def conv_integer(node: Node):
    # nbyoc's conv computes in floats: every product of 8-bit values is exact, and so is
    # every partial sum in any order while it stays an integer the mantissa holds:
    # float32 when ``_sum_type`` proves each output's terms add up to less than 2**24
    # (from the weights' values: ddddocr's older recogniser's largest is 3.8e6), else
    # float64 (sums of fewer than 2**37 products). So the int32 result is exact, and in
    # float32 the conv runs twice the lanes: that recogniser's convs took 2.2x as long
    # in float64.
    from ....ir.ops.conv import conv as conv_builder
    from .nn import _check_kernel, _window_attrs

    w = node.expr(1)
    _check_kernel(node, w.type.shape[2:])
    per_channel = (w.type.shape[0],) + (1,) * (w.type.ndim - 1)
    exact = _sum_type(node, 0, 1, b_zero_shape=per_channel)
    x = _centred(node, 0, 2, exact)
    weights = _centred(node, 1, 3, exact, per_channel)
    y = conv_builder(x, weights, None, group=node.attr("group", 1), **_window_attrs(node))
    return call_op("cast", y, to="int32")


@converter("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(node: Node):
    # As ONNX Runtime: the range widened to hold 0; a scale of 1 for an all-zero x;
    # the zero point clamped to [0, 255] before it is rounded; x then quantised by them.
    x = node.expr(0)
    if x.type.dtype != "float32":
        raise node.fail(f"x must be float32, got {x.type!r}")
    low = call_op("minimum", call_op("min", x), 0.0)
    high = call_op("maximum", call_op("max", x), 0.0)
    spread = call_op("subtract", high, low)
    scale = call_op(
        "where", call_op("equal", spread, 0.0), call_op("cast", 1.0, to="float32"),
        call_op("divide", spread, 255.0),
    )  # fmt: skip
    zero = call_op("round", call_op("clip", call_op("negative", call_op("divide", low, scale)),
                                    min=0.0, max=255.0))  # fmt: skip
    q = call_op("add", call_op("round", call_op("divide", x, scale)), zero)
    y = call_op("cast", call_op("clip", q, min=0.0, max=255.0), to="uint8")
    return [y, scale, call_op("cast", zero, to="uint8")]


# -- QLinear ops: integer products requantised ----------------------------------------
# ONNX Runtime computes them as: the integer accumulator (int32), times one float32
# multiplier (the operands' scales over the output's), rounded half to even, plus the
# output's zero point, saturated. The accumulators here are exact (sums of products of
# 8-bit values, in floats: ``_sum_type``), so the results are Runtime's.

#: A sum of products of integers whose magnitudes add up to less than this is exact in
#: float32, in any order and with or without fused multiply-adds: every partial sum is
#: an integer its 24-bit mantissa holds.
FLOAT32_EXACT = 2**24


def _span(node: Node, index: int, zero_index: int):
    """The centred values of input ``index`` (less its zero point), as far as known
    while importing: the values when known, else the largest magnitude its type and
    zero point allow."""
    value, zero = node.inputs[index], node.inputs[zero_index] if node.has(zero_index) else 0
    if isinstance(value, np.ndarray) and isinstance(zero, np.ndarray | int):
        return value, zero
    info = dtype_info(node.expr(index).type.dtype)
    if not isinstance(zero, np.ndarray | int):
        return None, int(info.max) - int(info.min)
    zero = np.asarray(zero, np.int64)
    return None, int(max(np.max(zero - int(info.min)), np.max(int(info.max) - zero)))


def _sum_type(node: Node, a_index: int, b_index: int, b_zero_shape=None, b_transposed=False):
    """float32 when every output of the product of inputs ``a_index`` and ``b_index``
    (each less its zero point, the next input but one) is a sum of terms whose
    magnitudes provably add up to less than ``FLOAT32_EXACT``, else float64 (exact up to
    2**53: sums of up to 2**37 products of 8-bit values). B is a matrix (K, N) read by
    columns (``b_transposed``: (N, K)), or a conv weight (N, ...) by its first axis
    (``b_zero_shape`` broadcasts its zero points)."""
    a_values, a_zero = _span(node, a_index, a_index + 2)
    b_values, b_zero = _span(node, b_index, b_index + 2)
    a_max = (int(np.max(np.abs(a_values.astype(np.int64) - np.asarray(a_zero, np.int64)),
                        initial=0)) if a_values is not None else a_zero)  # fmt: skip
    w = node.expr(b_index).type
    conv = b_zero_shape is not None
    if not all(isinstance(d, int) for d in w.shape):
        return "float64"
    if b_values is not None:
        zero = np.asarray(b_zero, np.int64)
        if zero.size == 1:
            zero = zero.reshape(())
        elif conv:
            zero = zero.reshape(b_zero_shape)
        elif b_transposed:
            zero = zero.reshape(-1, 1)
        centred = np.abs(b_values.astype(np.int64) - zero)
        if conv:
            sums = centred.reshape(w.shape[0], -1).sum(axis=1)
        else:
            sums = centred.sum(axis=-1 if b_transposed else -2)
        column = int(np.max(sums, initial=0))
    else:
        k = math.prod(w.shape[1:]) if conv else w.shape[-1 if b_transposed else -2]
        column = k * b_zero
    return "float32" if a_max * column < FLOAT32_EXACT else "float64"


def _scale_of(node: Node, index: int, shape=None):
    """Scale input ``index`` as a float32 scalar, or (one per channel) reshaped to
    ``shape``."""
    s = call_op("cast", node.expr(index), to="float32")
    if math.prod(s.type.shape) == 1:
        return call_op("reshape", s, newshape=())
    if shape is None:
        raise node.fail(f"input {index} must hold one scale, got {s.type!r}")
    return call_op("reshape", s, newshape=shape)


def _requantised(node: Node, accumulator, multiplier, zero_index: int):
    """``round_half_even(float32(accumulator) * multiplier) + zero point``, saturated to
    the zero point's type (input ``zero_index``; uint8 when it is left out)."""
    dtype = node.expr(zero_index).type.dtype if node.has(zero_index) else "uint8"
    info = dtype_info(dtype)
    y = call_op("round", call_op("multiply", call_op("cast", accumulator, to="float32"),
                                 multiplier))  # fmt: skip
    if node.has(zero_index):
        y = call_op("add", y, call_op("cast", _scale_of(node, zero_index), to="float32"))
    return call_op("cast", call_op("clip", y, min=float(info.min), max=float(info.max)), to=dtype)


@converter("QLinearMatMul", since=10)
def qlinear_matmul(node: Node):
    # a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point
    b = node.expr(3)
    columns = (b.type.shape[-1],) if b.type.ndim >= 1 else None
    # (the int32 accumulator, exact, on a backend's fast float product)
    exact = _sum_type(node, 0, 3) if b.type.ndim >= 2 and node.expr(0).type.ndim >= 1 else "float64"
    product = call_op("cast", call_op("matmul", _centred(node, 0, 2, exact),
                                      _centred(node, 3, 5, exact)), to="int32")  # fmt: skip
    multiplier = call_op(
        "divide", call_op("multiply", _scale_of(node, 1), _scale_of(node, 4, columns)),
        _scale_of(node, 6),
    )  # fmt: skip
    return _requantised(node, product, multiplier, 7)


@converter("QLinearConv", since=10)
def qlinear_conv(node: Node):
    # x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B
    from ....ir.ops.conv import conv as conv_builder
    from .nn import _check_kernel, _window_attrs

    w = node.expr(3)
    _check_kernel(node, w.type.shape[2:])
    per_channel = (w.type.shape[0],) + (1,) * (w.type.ndim - 2)
    channels = (w.type.shape[0],) + (1,) * (w.type.ndim - 1)
    # (a conv of 8-bit values is exact in float64, as in ConvInteger; in float32 when
    # small enough: _sum_type)
    exact = _sum_type(node, 0, 3, b_zero_shape=channels)
    weights = _centred(node, 3, 5, exact, channels)
    y = conv_builder(_centred(node, 0, 2, exact), weights, None,
                     group=node.attr("group", 1), **_window_attrs(node))  # fmt: skip
    y = call_op("cast", y, to="int32")
    if node.has(8):
        y = call_op("add", y, call_op("reshape", call_op("cast", node.expr(8), to="int32"),
                                      newshape=per_channel))  # fmt: skip
    multiplier = call_op(
        "divide", call_op("multiply", _scale_of(node, 1), _scale_of(node, 4, per_channel)),
        _scale_of(node, 6),
    )  # fmt: skip
    return _requantised(node, y, multiplier, 7)


@converter("QGemm", domain="com.microsoft")
def qgemm(node: Node):
    # ONNX Runtime's QGemm: A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale,
    # y_zero_point; the int32 sum of the centred products and of C (the int32 bias), times
    # alpha * a_scale * b_scale (/ y_scale), in float32: requantised as QLinearMatMul, or a
    # float32 result when there is no y_zero_point (as Runtime computes either).
    transposed = bool(node.attr("transB", 0))
    exact = _sum_type(node, 0, 3, b_transposed=transposed)  # (exact, as QLinearMatMul's)
    a = _centred(node, 0, 2, exact)
    if node.attr("transA", 0):
        a = call_op("transpose", a, axes=(1, 0))
    n = node.expr(3).type.shape[0 if transposed else 1]
    known = _known_centred(node, 3, 5, exact, (n, 1) if transposed else (n,))
    if known is not None:  # (a weight: transposed once, here)
        b = const(np.ascontiguousarray(known.T if transposed else known))
    else:
        b = _centred(node, 3, 5, exact, (n, 1) if transposed else (n,))
        b = call_op("transpose", b, axes=(1, 0)) if transposed else b
    columns = (n,)
    accumulator = call_op("cast", call_op("matmul", a, b), to="int32")
    if node.has(6):
        accumulator = call_op("add", accumulator, call_op("cast", node.expr(6), to="int32"))
    scale = _scale_of(node, 1)
    alpha = float(node.attr("alpha", 1.0))
    if alpha != 1.0:
        scale = call_op("multiply", call_op("cast", alpha, to="float32"), scale)
    scale = call_op("multiply", scale, _scale_of(node, 4, columns))
    if node.has(7):
        scale = call_op("divide", scale, _scale_of(node, 7))
    if node.has(8):
        return _requantised(node, accumulator, scale, 8)
    return call_op("multiply", call_op("cast", accumulator, to="float32"), scale)


def _qlinear_binary(node: Node, combine, zero_before_rounding: bool):
    """ONNX Runtime's QLinearAdd and QLinearMul (A, A_scale, A_zero_point, B, B_scale,
    B_zero_point, C_scale, C_zero_point): in float32, as Runtime's x86 kernels compute,
    the output's zero point added before rounding (Mul) or after (Add)."""
    a = call_op("cast", _centred(node, 0, 2, "int32"), to="float32")
    b = call_op("cast", _centred(node, 3, 5, "int32"), to="float32")
    y = combine(a, _scale_of(node, 1), b, _scale_of(node, 4), _scale_of(node, 6))
    dtype = node.expr(7).type.dtype if node.has(7) else node.expr(0).type.dtype
    info = dtype_info(dtype)
    zero = call_op("cast", _scale_of(node, 7), to="float32") if node.has(7) else None
    if zero is not None and zero_before_rounding:
        y = call_op("add", y, zero)
    y = call_op("round", y)
    if zero is not None and not zero_before_rounding:
        y = call_op("add", y, zero)
    return call_op("cast", call_op("clip", y, min=float(info.min), max=float(info.max)), to=dtype)


@converter("QLinearAdd", domain="com.microsoft")
def qlinear_add(node: Node):
    def add(a, a_scale, b, b_scale, c_scale):
        return call_op("add", call_op("multiply", a, call_op("divide", a_scale, c_scale)),
                       call_op("multiply", b, call_op("divide", b_scale, c_scale)))  # fmt: skip

    return _qlinear_binary(node, add, zero_before_rounding=False)


@converter("QLinearMul", domain="com.microsoft")
def qlinear_mul(node: Node):
    def mul(a, a_scale, b, b_scale, c_scale):
        ratio = call_op("divide", call_op("multiply", a_scale, b_scale), c_scale)
        return call_op("multiply", call_op("multiply", a, b), ratio)

    return _qlinear_binary(node, mul, zero_before_rounding=True)
