"""ONNX ops that move, select or describe elements: Reshape, Transpose, Concat, Slice,
Gather, ScatterElements (and its old name Scatter), ScatterND, OneHot, Squeeze, Unsqueeze,
Flatten, Expand, Tile, Pad, Split, Shape, Size, ConstantOfShape, Range, Constant, Dropout.

Their shape-like operands (a reshape's shape, a slice's bounds, pads, repeats)
must be known when importing; most moved from attributes to inputs over the
opsets, hence the versions. Shape, Size, ConstantOfShape and Range give known
arrays, so shape arithmetic folds away.
"""

from __future__ import annotations

import math

import numpy as np

from ....ir.builder import call_op, const
from ....ir.ops.index import split as split_builder
from ....ir.symbols import SizeExpr
from ..node import Node
from ..size_values import size_array
from . import converter


def _copy_zeros(node: Node, x, shape) -> tuple[int, ...]:
    """ONNX Reshape's shape with each 0 replaced by the input's dim at that position."""
    dims = x.type.shape
    if any(n == 0 and i >= len(dims) for i, n in enumerate(shape)):
        raise node.fail(f"shape {tuple(shape)} copies (0) a dim at a position the "
                        f"{len(dims)}-D input does not have")  # fmt: skip
    return tuple(dims[i] if n == 0 else n for i, n in enumerate(shape))


@converter("Reshape", since=5)
def reshape(node: Node):
    x = node.expr(0)
    shape = node.sizes(1, "shape")
    if not node.attr("allowzero", 0):  # 0 copies the input's dim at that position
        shape = _copy_zeros(node, x, shape)
    return call_op("reshape", x, newshape=tuple(shape))


@converter("Reshape")
def reshape_attribute(node: Node):
    x = node.expr(0)
    return call_op("reshape", x, newshape=_copy_zeros(node, x, node.attr("shape")))


@converter("Transpose")
def transpose(node: Node):
    perm = node.attr("perm")
    return call_op("transpose", node.expr(0), axes=tuple(perm) if perm is not None else None)


@converter("Concat")
def concat(node: Node):
    parts = [node.expr(i) for i in range(len(node.inputs)) if node.has(i)]
    return call_op("concatenate", *parts, axis=node.attr("axis"))


@converter("Slice")
def slice_attributes(node: Node):
    return call_op(
        "slice", node.expr(0), starts=tuple(node.attr("starts")), ends=tuple(node.attr("ends")),
        axes=tuple(node.attr("axes")) if node.attr("axes") is not None else None,
    )  # fmt: skip


@converter("Slice", since=10)
def slice_inputs(node: Node):
    axes = node.ints(3, "axes") if node.has(3) else None
    steps = node.ints(4, "steps") if node.has(4) else None
    return call_op(
        "slice", node.expr(0), starts=node.sizes(1, "starts"), ends=node.sizes(2, "ends"),
        axes=axes, steps=steps,
    )  # fmt: skip


@converter("Gather")
def gather(node: Node):
    return call_op("gather", node.expr(0), node.expr(1), axis=node.attr("axis", 0))


#: ScatterElements' and ScatterND's reductions, each from the opset that brought it.
SCATTER_REDUCTIONS = {"none": 1, "add": 16, "mul": 16, "max": 18, "min": 18}


def _scatter_reduction(node: Node) -> str:
    reduction = node.attr("reduction", "none")
    if node.opset < SCATTER_REDUCTIONS.get(reduction, 1 << 30):
        known = [name for name, since in SCATTER_REDUCTIONS.items() if since <= node.opset]
        raise node.fail(f"reduction={reduction!r} is not one of opset {node.opset}'s: "
                        f"{', '.join(known)}")  # fmt: skip
    return reduction


@converter("Scatter", since=9)  # (ScatterElements' name before opset 11)
@converter("ScatterElements", since=11)
def scatter_elements(node: Node):
    return call_op("scatter_elements", node.expr(0), node.expr(1), node.expr(2),
                   axis=node.attr("axis", 0), reduction=_scatter_reduction(node))  # fmt: skip


@converter("ScatterND", since=11)
def scatter_nd(node: Node):
    return call_op("scatter_nd", node.expr(0), node.expr(1), node.expr(2),
                   reduction=_scatter_reduction(node))  # fmt: skip


@converter("OneHot", since=9)
def one_hot(node: Node):
    # on where the index (negative ones counting back from depth) equals the position
    # along the new axis, off elsewhere: an index out of range is off everywhere
    indices = node.expr(0)
    depth = node.known(1, "depth")
    if depth.size != 1 or depth.dtype.kind not in "iuf":
        raise node.fail(f"depth must be one number, got {depth.dtype} {depth.shape}")
    depth = int(depth.reshape(-1)[0])  # (a float depth is cast, as ONNX says)
    values = node.expr(2)
    if values.type.shape != (2,):
        raise node.fail(f"values must hold [off, on], got {values.type!r}")
    if depth < 1:
        raise node.fail(f"depth must be positive, got {depth}")
    rank = indices.type.ndim + 1
    axis = node.axis(node.attr("axis", -1), rank)
    index = call_op("cast", indices, to="int64")
    index = call_op("where", call_op("less", index, 0), call_op("add", index, depth), index)
    positions = np.arange(depth, dtype=np.int64).reshape((depth,) + (1,) * (rank - 1 - axis))
    hit = call_op("equal", call_op("unsqueeze", index, axes=(axis,)), const(positions))
    off, on = (call_op("reshape", values[k : k + 1], newshape=()) for k in (0, 1))
    return call_op("where", hit, on, off)


@converter("Squeeze")
def squeeze_attribute(node: Node):
    axes = node.attr("axes")
    return call_op("squeeze", node.expr(0), axes=tuple(axes) if axes else None)


@converter("Squeeze", since=13)
def squeeze(node: Node):
    axes = node.ints(1, "axes") if node.has(1) else None
    return call_op("squeeze", node.expr(0), axes=axes or None)


@converter("Unsqueeze")
def unsqueeze_attribute(node: Node):
    axes = node.attr("axes")
    if axes is None:  # (required before opset 13, where it became an input)
        raise node.fail("before opset 13, Unsqueeze needs its axes attribute")
    return call_op("unsqueeze", node.expr(0), axes=tuple(axes))


@converter("Unsqueeze", since=13)
def unsqueeze(node: Node):
    return call_op("unsqueeze", node.expr(0), axes=node.ints(1, "axes"))


@converter("Flatten")
def flatten(node: Node):
    return call_op("flatten", node.expr(0), axis=node.attr("axis", 1))


@converter("Expand", since=8)
def expand(node: Node):
    return call_op("expand", node.expr(0), shape=node.sizes(1, "shape"))


@converter("Tile", since=6)
def tile(node: Node):
    return call_op("tile", node.expr(0), repeats=node.ints(1, "repeats"))


def _pad(node: Node, x, pads, value, axes=None):
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise node.fail(f"mode={mode!r} is not supported (constant, reflect, edge, wrap)")
    if axes is not None:  # pads for the listed axes only: zeros elsewhere
        rank, k = x.type.ndim, len(axes)
        if len(pads) != 2 * k:
            raise node.fail(f"pads holds {len(pads)} values for {k} axes (2 per axis)")
        full = [0] * (2 * rank)
        for i, axis in enumerate(axes):
            axis = node.axis(axis, rank, "axes entry")
            full[axis], full[rank + axis] = pads[i], pads[k + i]
        pads = full
    return call_op("pad", x, pads=tuple(pads), mode=mode, value=float(value))


@converter("Pad", since=2)
def pad_attributes(node: Node):
    return _pad(node, node.expr(0), node.attr("pads"), node.attr("value", 0.0))


@converter("Pad", since=11)
def pad(node: Node):
    value = node.known(2, "constant_value").reshape(()) if node.has(2) else 0.0
    axes = node.ints(3, "axes") if node.has(3) else None
    return _pad(node, node.expr(0), node.ints(1, "pads"), value, axes)


def _split(node: Node, sizes):
    x = node.expr(0)
    axis = node.axis(node.attr("axis", 0), x.type.ndim)
    if sizes is None:
        count = node.attr("num_outputs", node.n_outputs)
        if count < 1:
            raise node.fail(f"num_outputs is {count}; a split makes at least one part")
        if count != node.n_outputs:
            raise node.fail(f"num_outputs is {count}, but the node has {node.n_outputs} outputs")
        length = x.type.shape[axis]
        if node.attr("num_outputs") is not None and length % count:
            # opset 18: the last part is smaller when the length does not divide
            chunk = math.ceil(length / count)
            sizes = [chunk] * (count - 1) + [length - chunk * (count - 1)]
        else:
            sizes = count
    return list(split_builder(x, sizes if isinstance(sizes, int) else list(sizes), axis))


@converter("Split", since=2)
def split_attribute(node: Node):
    return _split(node, node.attr("split"))


@converter("Split", since=13)
def split(node: Node):
    return _split(node, node.ints(1, "split") if node.has(1) else None)


@converter("Shape")
def shape(node: Node):
    dims = node.expr(0).type.shape
    start, end = node.attr("start", 0), node.attr("end", None)
    return size_array(list(dims[slice(start, end)]))  # (symbolic sizes stay symbols)


@converter("Size")
def size(node: Node):
    return size_array(math.prod(node.expr(0).type.shape))


@converter("ConstantOfShape", since=9)
def constant_of_shape(node: Node):
    value = node.attr("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    if fill.size != 1:
        raise node.fail(f"value must hold one element, holds {fill.size}")
    shape = node.sizes(0, "shape")
    if any(isinstance(d, SizeExpr) for d in shape):  # computed when the sizes are known
        return call_op("broadcast_to", const(fill.reshape(())), shape=shape)
    node.computing(shape, fill.dtype)
    return np.full(shape, fill[0], fill.dtype)


def _scalar(node: Node, index: int, what: str) -> np.ndarray:
    value = node.known(index, what)
    if value.size != 1:
        raise node.fail(f"input {index} ({what}) must hold one value, holds {value.size}")
    return value.reshape(())


@converter("Range", since=11)
def range_(node: Node):
    start, limit, delta = (_scalar(node, i, n) for i, n in
                           enumerate(("start", "limit", "delta")))  # fmt: skip
    if not all(np.isfinite(v) for v in (start, limit, delta)):
        raise node.fail(f"start, limit and delta must be finite, got {start}, {limit}, {delta}")
    if delta == 0:
        raise node.fail("delta is 0")
    # ONNX's count, in exact arithmetic for integers; known before anything is allocated.
    if np.issubdtype(start.dtype, np.integer):
        span, step = int(limit) - int(start), int(delta)
        count = max(-(-span // step), 0)
    else:
        span = (float(limit) - float(start)) / float(delta)
        if not math.isfinite(span):
            raise node.fail(f"a range from {start} to {limit} by {delta} has no finite length")
        count = max(math.ceil(span), 0)
    node.computing((count,), start.dtype)
    return np.arange(start, limit, delta, dtype=start.dtype)


@converter("Constant")
def constant(node: Node):
    attrs = node.attrs
    if "value" in attrs:
        return np.asarray(attrs["value"])
    for name, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                        ("value_int", np.int64), ("value_ints", np.int64)):  # fmt: skip
        if name in attrs:
            return np.asarray(attrs[name], dtype)
    raise node.fail(f"holds {', '.join(attrs) or 'nothing'}; nbyoc reads value, value_float(s) "
                    f"and value_int(s)")  # fmt: skip


@converter("Dropout")
def dropout(node: Node):
    # Inference: the identity (a training_mode input set to true is refused).
    if node.has(2) and bool(node.known(2, "training_mode").reshape(())):
        raise node.fail("training_mode=true is not supported (inference only)")
    x = node.expr(0)
    out = call_op("identity", x)
    if node.n_outputs > 1:  # the mask: every element kept
        node.computing(x.type.shape, bool)
        return [out, np.ones(x.type.shape, bool)]
    return out
