"""ONNX's neural-network ops: MatMul, Gemm, Softmax, LogSoftmax, the normalisations,
convolutions, pools, Resize and Upsample.

Attributes follow ONNX already (nbyoc's ops were shaped after them); what nbyoc
refuses on purpose (training-mode outputs, ``ceil_mode`` that changes a pool's
shape, cubic resize, ``tf_crop_and_resize``, antialiasing) is named in the error.
"""

from __future__ import annotations

import math

import numpy as np

from ....ir.builder import call_op, const
from ....ir.ops.conv import COORDINATE_MODES
from ....ir.ops.conv import conv as conv_builder
from ....ir.ops.conv import conv_transpose as conv_transpose_builder
from ..dtypes import onnx_dtype
from ..node import Node
from . import converter


@converter("MatMul")
def matmul(node: Node):
    return call_op("matmul", node.expr(0), node.expr(1))


@converter("Gemm")
def gemm(node: Node):
    a, b = node.expr(0), node.expr(1)
    c = node.expr(2) if node.has(2) else const(np.zeros((), a.type.dtype))
    return call_op(
        "gemm", a, b, c, alpha=node.attr("alpha", 1.0), beta=node.attr("beta", 1.0),
        trans_a=bool(node.attr("transA", 0)), trans_b=bool(node.attr("transB", 0)),
    )  # fmt: skip


def _softmax_2d(nbyoc_op: str):
    """Before opset 13: the input as 2-D (axes before ``axis`` rows, the rest columns),
    normalised along the rows, reshaped back."""

    def convert(node: Node):
        x = node.expr(0)
        axis = node.attr("axis", 1) % max(x.type.ndim, 1)
        rows = math.prod(x.type.shape[:axis])
        flat = call_op("reshape", x, newshape=(rows, math.prod(x.type.shape[axis:])))
        return call_op("reshape", call_op(nbyoc_op, flat, axis=-1), newshape=x.type.shape)

    convert.__name__ = f"{nbyoc_op}_2d"
    return convert


def _softmax(nbyoc_op: str):
    def convert(node: Node):
        return call_op(nbyoc_op, node.expr(0), axis=node.attr("axis", -1))

    convert.__name__ = nbyoc_op
    return convert


converter("Softmax")(_softmax_2d("softmax"))
converter("Softmax", since=13)(_softmax("softmax"))
converter("LogSoftmax")(_softmax_2d("log_softmax"))
converter("LogSoftmax", since=13)(_softmax("log_softmax"))


def _inference_only(node: Node, outputs: int = 1) -> None:
    node.refuse("training_mode", 0)
    if node.n_outputs > outputs:
        raise node.fail(f"only the first {outputs} output(s) are supported (inference)")


@converter("BatchNormalization")
def batch_norm(node: Node):
    _inference_only(node)
    args = [node.expr(i) for i in range(5)]
    return call_op("batch_norm", *args, epsilon=node.attr("epsilon", 1e-5))


@converter("LayerNormalization", since=17)
def layer_norm(node: Node):
    x, scale = node.expr(0), node.expr(1)
    bias = node.expr(2) if node.has(2) else const(np.zeros((), x.type.dtype))
    axis, epsilon = node.attr("axis", -1), node.attr("epsilon", 1e-5)
    # Statistics in stash_type (float32 by default, so float16 inputs are normalised in
    # float32), and Mean and InvStdDev as extra outputs when asked for.
    stash = onnx_dtype(node.attr("stash_type", 1), node.where)
    if node.n_outputs == 1 and stash == x.type.dtype:
        return call_op("layer_norm", x, scale, bias, axis=axis, epsilon=epsilon)
    axes = tuple(range(node.axis(axis, x.type.ndim), x.type.ndim))
    wide = call_op("cast", x, to=stash)
    mean = call_op("mean", wide, axis=axes, keepdims=True)
    centred = call_op("subtract", wide, mean)
    var = call_op("mean", call_op("multiply", centred, centred), axis=axes, keepdims=True)
    inverse = call_op("reciprocal", call_op("sqrt", call_op("add", var, epsilon)))
    normed = call_op("cast", call_op("multiply", centred, inverse), to=x.type.dtype)
    y = call_op("add", call_op("multiply", normed, scale), bias)
    return [y, mean, inverse][: node.n_outputs]


@converter("InstanceNormalization")
def instance_norm(node: Node):
    x, scale, bias = node.expr(0), node.expr(1), node.expr(2)
    axes = tuple(range(2, x.type.ndim))
    per_channel = (-1,) + (1,) * (x.type.ndim - 2)
    centred = call_op("subtract", x, call_op("mean", x, axis=axes, keepdims=True))
    var = call_op("mean", call_op("multiply", centred, centred), axis=axes, keepdims=True)
    normed = call_op(
        "divide", centred, call_op("sqrt", call_op("add", var, node.attr("epsilon", 1e-5)))
    )
    scale = call_op("reshape", scale, newshape=per_channel)
    bias = call_op("reshape", bias, newshape=per_channel)
    return call_op("add", call_op("multiply", normed, scale), bias)


converter("GlobalAveragePool")(lambda node: call_op("global_avg_pool", node.expr(0)))
converter("GlobalMaxPool")(lambda node: call_op("global_max_pool", node.expr(0)))


def _window_attrs(node: Node) -> dict:
    return {
        "strides": node.attr("strides"),
        "pads": node.attr("pads"),
        "dilations": node.attr("dilations"),
        "auto_pad": node.attr("auto_pad", "NOTSET"),
    }


def _check_kernel(node: Node, kernel) -> None:
    given = node.attr("kernel_shape")
    if given is not None and tuple(given) != tuple(kernel):
        raise node.fail(f"kernel_shape {tuple(given)} differs from the weights' {tuple(kernel)}")


@converter("Conv")
def conv(node: Node):
    x, w = node.expr(0), node.expr(1)
    _check_kernel(node, w.type.shape[2:])
    bias = node.expr(2) if node.has(2) else None
    return conv_builder(x, w, bias, group=node.attr("group", 1), **_window_attrs(node))


@converter("ConvTranspose")
def conv_transpose(node: Node):
    x, w = node.expr(0), node.expr(1)
    _check_kernel(node, w.type.shape[2:])
    bias = node.expr(2) if node.has(2) else None
    return conv_transpose_builder(
        x, w, bias, strides=node.attr("strides"), pads=_transposed_pads(node, x, w),
        dilations=node.attr("dilations"), group=node.attr("group", 1),
        output_padding=node.attr("output_padding"),
    )  # fmt: skip


def _transposed_pads(node: Node, x, w):
    """ConvTranspose's pads: given, or worked out (as ONNX says) from ``output_shape``
    or ``auto_pad`` SAME_* (an output ``strides`` times the input), or none (VALID)."""
    auto_pad, output_shape = node.attr("auto_pad", "NOTSET"), node.attr("output_shape")
    k = x.type.ndim - 2
    if auto_pad == "VALID":
        return (0,) * 2 * k
    if output_shape is None and auto_pad == "NOTSET":
        return node.attr("pads")
    strides = node.attr("strides") or (1,) * k
    dilations = node.attr("dilations") or (1,) * k
    extra = node.attr("output_padding") or (0,) * k
    spatial, kernel = x.type.shape[2:], w.type.shape[2:]
    if output_shape is None:
        output_shape = [n * s for n, s in zip(spatial, strides)]
    output_shape = list(output_shape)[-k:]
    total = [s * (n - 1) + e + d * (kk - 1) + 1 - out for n, s, e, d, kk, out in
             zip(spatial, strides, extra, dilations, kernel, output_shape)]  # fmt: skip
    small = [t // 2 for t in total]
    if auto_pad == "SAME_UPPER":
        begins, ends = small, [t - h for t, h in zip(total, small)]
    else:
        begins, ends = [t - h for t, h in zip(total, small)], small
    if any(b < 0 for b in begins) or any(-e >= s for e, s in zip(ends, strides)):
        raise node.fail(f"output_shape {tuple(output_shape)} needs more output than "
                        f"output_padding can add")  # fmt: skip
    # A negative end pad is output grown at the end: output_padding's job.
    node.attrs["output_padding"] = tuple(e + max(0, -p) for e, p in zip(extra, ends))
    return tuple(begins + [max(0, p) for p in ends])


def _pool(nbyoc_op: str):
    def convert(node: Node):
        x = node.expr(0)
        if node.n_outputs > 1:
            raise node.fail("the Indices output is not supported")
        node.refuse("storage_order", 0)
        if node.attr("kernel_shape") is None:
            raise node.fail("kernel_shape is required")
        attrs = {"kernel_shape": tuple(node.attr("kernel_shape")), **_window_attrs(node)}
        include_pad = bool(node.attr("count_include_pad", 0))
        if nbyoc_op == "avg_pool":
            attrs["count_include_pad"] = include_pad
        result = call_op(nbyoc_op, x, **attrs)
        if not node.attr("ceil_mode", 0):
            return result
        extra = _ceil_extra(x.type.shape, result.attrs)
        if not any(extra):
            return result
        if include_pad:  # ONNX counts the given pads but not the extension
            raise node.fail("ceil_mode=1 with count_include_pad=1 that adds a partial "
                            "window is not supported")  # fmt: skip
        # The partial last windows: more padding at the ends, which pools skip.
        k = len(extra)
        pads = result.attrs["pads"]
        attrs.update(pads=pads[:k] + tuple(p + e for p, e in zip(pads[k:], extra)))
        attrs.update(auto_pad="NOTSET")
        return call_op(nbyoc_op, x, **attrs)

    convert.__name__ = nbyoc_op
    return convert


def _ceil_extra(shape, attrs) -> list[int]:
    """Per spatial axis, the end padding that makes the floor-rounded output shape the
    ceil-rounded one ONNX's ceil_mode asks for (a last window must start inside the
    input or its begin padding, else it is dropped)."""
    k = len(attrs["kernel_shape"])
    extra = []
    for d in range(k):
        extent = attrs["dilations"][d] * (attrs["kernel_shape"][d] - 1) + 1
        begin, end, stride = attrs["pads"][d], attrs["pads"][k + d], attrs["strides"][d]
        padded = shape[2 + d] + begin + end
        out = math.ceil((padded - extent) / stride) + 1
        if (out - 1) * stride >= shape[2 + d] + begin:
            out -= 1
        extra.append(max(0, (out - 1) * stride + extent - padded))
    return extra


converter("MaxPool")(_pool("max_pool"))
converter("AveragePool")(_pool("avg_pool"))


def _resize(node: Node, x, scales, sizes, coordinates, nearest="round_prefer_floor"):
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise node.fail(f"mode={mode!r} is not supported (nearest, linear)")
    if coordinates not in COORDINATE_MODES:
        raise node.fail(f"coordinate_transformation_mode={coordinates!r} is not supported")
    node.refuse("exclude_outside", 0)
    node.refuse("antialias", 0)
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise node.fail(f"keep_aspect_ratio_policy={policy!r} is not one of stretch, "
                        f"not_larger, not_smaller")  # fmt: skip
    rank = x.type.ndim
    axes = node.attr("axes")
    if axes is not None:
        axes = [node.axis(a, rank, "axes entry") for a in axes]
    if policy != "stretch" and sizes is not None:
        # One scale for the listed axes (the smallest or largest asked for), the sizes
        # it gives rounded half up, as ONNX's reference does.
        listed = axes or list(range(rank))
        if any(x.type.shape[a] == 0 for a in listed):
            raise node.fail(f"keep_aspect_ratio_policy={policy!r} on an empty axis")
        ratios = [n / x.type.shape[a] for a, n in zip(listed, sizes)]
        scale = {"not_larger": min, "not_smaller": max}[policy](ratios)
        sizes = [int(scale * x.type.shape[a] + 0.5) for a in listed]
        scales = [scale] * len(listed)
    if axes is not None:  # values for the listed axes only
        if scales is not None:
            full = [1.0] * rank
            for a, v in zip(axes, scales):
                full[a] = v
            scales = full
        if sizes is not None:
            full = list(x.type.shape)
            for a, v in zip(axes, sizes):
                full[a] = v
            sizes = full
    return call_op(
        "resize", x, sizes=tuple(sizes) if sizes is not None else None,
        scales=tuple(float(s) for s in scales) if scales is not None else None, mode=mode,
        coordinate_transformation_mode=coordinates,
        nearest_mode=node.attr("nearest_mode", nearest),
    )  # fmt: skip


@converter("Resize", since=10)
def resize_10(node: Node):
    scales = tuple(float(v) for v in node.known(1, "scales").reshape(-1))
    return _resize(node, node.expr(0), scales, None, "asymmetric", "floor")


@converter("Resize", since=11)
def resize(node: Node):
    scales = node.known(2, "scales").reshape(-1) if node.has(2) else np.zeros(0)
    sizes = node.sizes(3, "sizes") if node.has(3) else None
    coordinates = node.attr("coordinate_transformation_mode", "half_pixel")
    chosen = None if sizes is not None or scales.size == 0 else tuple(map(float, scales))
    return _resize(node, node.expr(0), chosen, sizes, coordinates)


@converter("Upsample", since=7)
def upsample_attribute(node: Node):
    if node.attr("scales") is None:
        raise node.fail("scales is required")
    return _resize(node, node.expr(0), tuple(node.attr("scales")), None, "asymmetric", "floor")


@converter("Upsample", since=9)
def upsample(node: Node):
    scales = tuple(float(v) for v in node.known(1, "scales").reshape(-1))
    return _resize(node, node.expr(0), scales, None, "asymmetric", "floor")
