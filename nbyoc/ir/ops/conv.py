"""Spatial ops over (N, C, spatial...) tensors: ``conv`` (1-D to 3-D, strides, pads,
dilations, groups, bias), ``conv_transpose``, ``max_pool``, ``avg_pool`` and ``resize``
(nearest and linear), with ONNX's attributes.

Attributes are stored in normal form: one stride, dilation and kernel size per
spatial axis, ``pads`` as the begins then the ends, and ``auto_pad`` resolved into
explicit pads (so ``SAME_UPPER`` and explicit pads that mean the same are one node).
The NumPy references gather the windows with ``sliding_window_view``; the host runs
them (NumPy's BLAS for conv). ``conv_transpose``'s reference is a direct sum over the
taps, and no backend lowers the op itself: ``nbyoc.transform.conv_transpose`` rewrites it
into ordinary convs for a backend that lowers conv, checked against this reference.

>>> import nbyoc
>>> x, w = nbyoc.var("x", (1, 3, 32, 32)), nbyoc.var("w", (8, 3, 3, 3))
>>> y = nbyoc.conv(x, w, strides=(2, 2), auto_pad="SAME_UPPER")
>>> y.shape, y.attrs["pads"]
((1, 8, 16, 16), (0, 0, 1, 1))
"""

from __future__ import annotations

import fractions
import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...errors import NbyocTypeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import dtype_info, promote
from ..nodes import Expr
from ..op import Op, describe, register_op
from ..symbols import SizeExpr, maximum, require
from ..types import TensorType

AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _per_axis(name: str, what: str, values, count: int, default: int) -> tuple[int, ...]:
    values = (default,) * count if values is None else tuple(values)
    if len(values) != count or any(v < 1 for v in values):
        raise NbyocTypeError(f"{name}: {what} needs {count} positive values, got {values}")
    return values


def check_spatial(name: str, x: TensorType) -> None:
    """Refuse an ``x`` that is not (N, C, spatial...): the type rules index its axes."""
    if x.ndim < 3:
        raise NbyocTypeError(f"{name}({x!r}): needs (N, C, spatial...) input with a spatial axis")


def window_geometry(name: str, x: TensorType, kernel, attrs) -> dict:
    """The normal form of a windowed op's attributes and its output's spatial shape."""
    check_spatial(name, x)
    k = x.ndim - 2
    spatial = x.shape[2:]
    strides = _per_axis(name, "strides", attrs["strides"], k, 1)
    dilations = _per_axis(name, "dilations", attrs["dilations"], k, 1)
    extent = [d * (kk - 1) + 1 for d, kk in zip(dilations, kernel)]
    mode = attrs["auto_pad"]
    if mode == "NOTSET":
        pads = (0,) * 2 * k if attrs["pads"] is None else tuple(attrs["pads"])
        if len(pads) != 2 * k or any(p < 0 for p in pads):
            raise NbyocTypeError(
                f"{name}: pads holds {k} begins then {k} ends (non-negative), got {pads}"
            )
    elif mode == "VALID":
        pads = (0,) * 2 * k
    elif any(isinstance(size, SizeExpr) for size in spatial):
        # SAME_* over a symbolic size: the padding depends on the size's parity, so the
        # mode stays in the normal form (made explicit once the sizes are known)
        out = tuple((size + s - 1) // s for size, s in zip(spatial, strides))
        normal = {"strides": strides, "pads": None, "dilations": dilations, "auto_pad": mode}
        return {"attrs": normal, "spatial": out}
    else:  # SAME_*: the output has ceil(size / stride) elements, the padding split in two
        begins, ends = [], []
        for size, s, e in zip(spatial, strides, extent):
            total = maximum(0, (-(-size // s) - 1) * s + e - size)  # ceil(size / s)
            small, large = total // 2, total - total // 2
            begins.append(small if mode == "SAME_UPPER" else large)
            ends.append(large if mode == "SAME_UPPER" else small)
        pads = tuple(begins + ends)
    out = []
    for axis, (size, s, e) in enumerate(zip(spatial, strides, extent)):
        padded = size + pads[axis] + pads[k + axis]
        require("at_least", padded, e, where=f"{name} spatial axis {axis} with its padding",
                error=f"{name}({x!r}): the window ({e} elements with dilation) is larger "
                      f"than spatial axis {axis} with its padding ({padded})")  # fmt: skip
        out.append((padded - e) // s + 1)
    normal = {"strides": strides, "pads": pads, "dilations": dilations, "auto_pad": "NOTSET"}
    return {"attrs": normal, "spatial": tuple(out)}


def _windows(x: np.ndarray, kernel, strides, pads, dilations, fill) -> np.ndarray:
    """(N, C, *out, *kernel): each output position's window (padding holds ``fill``)."""
    k = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0), *zip(pads[:k], pads[k:])], constant_values=fill)
    extent = [d * (kk - 1) + 1 for d, kk in zip(dilations, kernel)]
    windows = sliding_window_view(x, extent, axis=tuple(range(2, 2 + k)))
    select = (slice(None), slice(None))
    select += tuple(slice(None, None, s) for s in strides)
    select += tuple(slice(None, None, d) for d in dilations)
    return windows[select]


def _window_attrs():
    return {
        "strides": Attr("ints", None), "pads": Attr("ints", None),
        "dilations": Attr("ints", None),
        "auto_pad": Attr("str", "NOTSET", choices=AUTO_PAD),
    }  # fmt: skip


# -- conv -------------------------------------------------------------------------------


def _conv_rule(types, attrs):
    if len(types) not in (2, 3):
        raise NbyocTypeError(f"conv takes x, w and an optional bias, got {len(types)} operands")
    x, w = types[:2]
    for t in types:
        if not dtype_info(t.dtype).is_float:
            raise NbyocTypeError(f"conv({describe(types)}): takes float tensors")
    check_spatial("conv", x)
    group = attrs["group"]
    wrong = (f"conv({describe(types)}): w must be (M, C / group, kernel...) with the rank of "
             f"x, and group must divide C and M")  # fmt: skip
    if w.ndim != x.ndim or group < 1:
        raise NbyocTypeError(wrong)
    require("divisible", x.shape[1], group, where="conv's channels", error=wrong)
    require("divisible", w.shape[0], group, where="conv's filters", error=wrong)
    require("equal", w.shape[1] * group, x.shape[1], where="conv's channels",
            error=f"conv({describe(types)}): x has {x.shape[1]} channels, w expects "
                  f"{w.shape[1]} x {group} groups")  # fmt: skip
    if len(types) == 3 and types[2].shape != (w.shape[0],):
        raise NbyocTypeError(f"conv: bias must have shape ({w.shape[0]},), got {types[2]!r}")
    geometry = window_geometry("conv", x, w.shape[2:], attrs)
    shape = (x.shape[0], w.shape[0], *geometry["spatial"])
    return TensorType(shape, promote(*(t.dtype for t in types))), {
        **geometry["attrs"],
        "group": group,
    }


def _conv_reference(x, w, *bias, strides, pads, dilations, auto_pad, group):
    # im2col and one BLAS product per group, all groups in one batched matmul (a
    # depthwise conv is as many groups as channels: one NumPy call, not a Python loop).
    k = x.ndim - 2
    dtype = np.result_type(x, w, *bias)
    windows = _windows(x.astype(dtype, copy=False), w.shape[2:], strides, pads, dilations, 0)
    n, out = x.shape[0], windows.shape[2 : 2 + k]
    c, m = w.shape[1], w.shape[0] // group
    taps = c * math.prod(w.shape[2:])
    # (N, G, c, *out, *kernel) -> (G, N, *out, c, *kernel) -> (G, N * positions, taps)
    columns = windows.reshape(n, group, c, *windows.shape[2:])
    order = (1, 0, *range(3, 3 + k), 2, *range(3 + k, 3 + 2 * k))
    columns = columns.transpose(order).reshape(group, n * math.prod(out), taps)
    weights = w.astype(dtype, copy=False).reshape(group, m, taps).transpose(0, 2, 1)
    product = np.matmul(columns, weights)  # (G, N * positions, m)
    product = product.reshape(group, n, *out, m)
    result = product.transpose(1, 0, 2 + k, *range(2, 2 + k)).reshape(n, group * m, *out)
    if bias:
        result = result + bias[0].reshape((-1,) + (1,) * k)
    return np.ascontiguousarray(result, dtype=dtype)


register_op(Op("conv", None, _conv_rule, _conv_reference, "matmul",
               "Convolution (cross-correlation, as ONNX Conv) of x (N, C, ...) with w "
               "(M, C / group, kernel...), plus an optional bias (M,)",
               attrs={**_window_attrs(), "group": Attr("int", 1)}))  # fmt: skip


# -- pools ------------------------------------------------------------------------------


def _pool_rule(name: str):
    def infer(types, attrs):
        (x,) = types
        check_spatial(name, x)
        kernel = tuple(attrs["kernel_shape"])
        if len(kernel) != x.ndim - 2 or any(kk < 1 for kk in kernel):
            raise NbyocTypeError(
                f"{name}({x!r}): kernel_shape needs {x.ndim - 2} positive sizes, got {kernel}"
            )
        geometry = window_geometry(name, x, kernel, attrs)
        k = x.ndim - 2
        pads = geometry["attrs"]["pads"] or ()
        if any(p >= kk for p, kk in zip(pads, kernel * 2)) and k:
            raise NbyocTypeError(f"{name}: a pad must be smaller than the kernel")
        dtype = x.dtype
        if name == "avg_pool" and not dtype_info(dtype).is_float:
            raise NbyocTypeError(f"avg_pool({x!r}): takes float tensors")
        normal = {**attrs, **geometry["attrs"], "kernel_shape": kernel}
        return TensorType(x.shape[:2] + geometry["spatial"], dtype), normal

    return infer


def _max_pool_reference(x, kernel_shape, strides, pads, dilations, auto_pad):
    info = dtype_info(x.dtype.name)
    low = -np.inf if info.is_float else info.min
    k = len(kernel_shape)
    windows = _windows(x, kernel_shape, strides, pads, dilations, low)
    axes = tuple(range(2 + k, 2 + 2 * k))
    out = windows.max(axis=axes)
    if info.is_float:  # NaN propagates, as ONNX Runtime's and NumPy's max do
        out = np.where(np.isnan(windows).any(axis=axes), np.nan, out)
    return out.astype(x.dtype, copy=False)


def _avg_pool_reference(x, kernel_shape, strides, pads, dilations, auto_pad, count_include_pad):
    k = len(kernel_shape)
    axes = tuple(range(2 + k, 2 + 2 * k))
    total = _windows(x, kernel_shape, strides, pads, dilations, 0).sum(axis=axes)
    if count_include_pad:
        count = math.prod(kernel_shape)
    else:
        ones = np.ones((1, 1, *x.shape[2:]), x.dtype)
        count = _windows(ones, kernel_shape, strides, pads, dilations, 0).sum(axis=axes)
    return (total / count).astype(x.dtype, copy=False)


register_op(Op("max_pool", 1, _pool_rule("max_pool"), _max_pool_reference, "reduce",
               "The maximum of each window of ``kernel_shape`` (padding never wins)",
               attrs={"kernel_shape": Attr("ints"), **_window_attrs()}))  # fmt: skip
register_op(Op("avg_pool", 1, _pool_rule("avg_pool"), _avg_pool_reference, "reduce",
               "The mean of each window of ``kernel_shape``; padding counts when "
               "``count_include_pad``",
               attrs={"kernel_shape": Attr("ints"), **_window_attrs(),
                      "count_include_pad": Attr("bool", False)}))  # fmt: skip


def conv(
    x: Operand, w: Operand, bias: Operand | None = None, strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None, group: int = 1,
    auto_pad: str = "NOTSET",
) -> Expr:  # fmt: skip
    """Convolution of ``x`` (N, C, ...) with ``w`` (M, C / group, kernel...), plus ``bias``
    (M,) if given, as ONNX Conv: ``pads`` are the begins then the ends of the spatial axes,
    ``auto_pad`` one of NOTSET, SAME_UPPER, SAME_LOWER, VALID.

    >>> import nbyoc
    >>> x, w = nbyoc.var("x", (2, 4, 10)), nbyoc.var("w", (4, 1, 3))
    >>> nbyoc.conv(x, w, group=4, pads=(1, 1)).shape  # depthwise
    (2, 4, 10)
    """
    operands = (x, w) if bias is None else (x, w, bias)
    return call_op("conv", *operands, strides=strides, pads=pads, dilations=dilations,
                   group=group, auto_pad=auto_pad)  # fmt: skip


# -- conv_transpose ------------------------------------------------------------------------


def _conv_transpose_rule(types, attrs):
    if len(types) not in (2, 3):
        raise NbyocTypeError(
            f"conv_transpose takes x, w and an optional bias, got {len(types)} operands"
        )
    x, w = types[:2]
    for t in types:
        if not dtype_info(t.dtype).is_float:
            raise NbyocTypeError(f"conv_transpose({describe(types)}): takes float tensors")
    k, group = x.ndim - 2, attrs["group"]
    wrong = (f"conv_transpose({describe(types)}): w must be (C, M / group, kernel...) with "
             f"C x's channels, the rank of x, and group dividing C")  # fmt: skip
    if k < 1 or w.ndim != x.ndim or group < 1:
        raise NbyocTypeError(wrong)
    require("equal", w.shape[0], x.shape[1], where="conv_transpose's channels", error=wrong)
    require("divisible", x.shape[1], group, where="conv_transpose's channels", error=wrong)
    m = w.shape[1] * group
    if len(types) == 3 and types[2].shape != (m,):
        raise NbyocTypeError(f"conv_transpose: bias must have shape ({m},), got {types[2]!r}")
    strides = _per_axis("conv_transpose", "strides", attrs["strides"], k, 1)
    dilations = _per_axis("conv_transpose", "dilations", attrs["dilations"], k, 1)
    pads = (0,) * 2 * k if attrs["pads"] is None else tuple(attrs["pads"])
    extra = (0,) * k if attrs["output_padding"] is None else tuple(attrs["output_padding"])
    if len(pads) != 2 * k or any(p < 0 for p in pads) or len(extra) != k:
        raise NbyocTypeError(
            f"conv_transpose: pads holds {k} begins then {k} ends, output_padding {k} values"
        )
    if any(e < 0 or e >= max(s, d) for e, s, d in zip(extra, strides, dilations)):
        raise NbyocTypeError("conv_transpose: output_padding must be below the stride")
    spatial = tuple(
        s * (n - 1) + e + d * (kk - 1) + 1 - pads[i] - pads[k + i]
        for i, (n, s, e, d, kk) in enumerate(zip(x.shape[2:], strides, extra, dilations,
                                                 w.shape[2:]))
    )  # fmt: skip
    for axis, n in enumerate(spatial):
        require(
            "at_least",
            n,
            1,
            where=f"conv_transpose's output axis {axis}",
            error=f"conv_transpose({describe(types)}): the pads leave no output",
        )
    normal = {"strides": strides, "pads": pads, "dilations": dilations, "group": group,
              "output_padding": extra}  # fmt: skip
    return TensorType((x.shape[0], m, *spatial), promote(*(t.dtype for t in types))), normal


def _conv_transpose_reference(x, w, *bias, strides, pads, dilations, group, output_padding):
    k = x.ndim - 2
    dtype = np.result_type(x, w, *bias)
    c, mg = x.shape[1] // group, w.shape[1]
    full = [s * (n - 1) + e + d * (kk - 1) + 1 for n, s, e, d, kk in
            zip(x.shape[2:], strides, output_padding, dilations, w.shape[2:])]  # fmt: skip
    # Only the output the pads keep is made: the uncropped result can be far larger (a
    # huge stride cropped back by huge pads is a small output).
    kept = [f - pads[i] - pads[k + i] for i, f in enumerate(full)]
    out = np.zeros((x.shape[0], mg * group, *kept), dtype)
    for tap in np.ndindex(*w.shape[2:]):
        # Input position j lands at t * d + s * j - begin: only the j that land inside count.
        source, target = [], []
        for t, d, s, n, begin, size in zip(tap, dilations, strides, x.shape[2:], pads, kept):
            at = t * d - begin
            first, last = max(0, -(at // s)), min(n, -((at - size) // s))  # ceilings
            source.append(slice(first, last))
            target.append(slice(at + s * first, at + s * (last - 1) + 1, s))
        if any(part.start >= part.stop for part in source):
            continue
        for g in range(group):
            xs = x[(slice(None), slice(g * c, (g + 1) * c), *source)].astype(dtype, copy=False)
            ws = w[(slice(g * c, (g + 1) * c), slice(None), *tap)].astype(dtype, copy=False)
            contribution = np.tensordot(xs, ws, axes=([1], [0]))
            out[(slice(None), slice(g * mg, (g + 1) * mg), *target)] += np.moveaxis(
                contribution, -1, 1
            )
    if bias:
        out = out + bias[0].reshape((-1,) + (1,) * k)
    return np.ascontiguousarray(out.astype(dtype, copy=False))


register_op(Op("conv_transpose", None, _conv_transpose_rule, _conv_transpose_reference, "matmul",
               "Transposed convolution (ONNX ConvTranspose) of x (N, C, ...) with w "
               "(C, M / group, kernel...), plus an optional bias (M,)",
               attrs={"strides": Attr("ints", None), "pads": Attr("ints", None),
                      "dilations": Attr("ints", None), "group": Attr("int", 1),
                      "output_padding": Attr("ints", None)}))  # fmt: skip


def conv_transpose(
    x: Operand, w: Operand, bias: Operand | None = None, strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None, dilations: Sequence[int] | None = None, group: int = 1,
    output_padding: Sequence[int] | None = None,
) -> Expr:  # fmt: skip
    """Transposed convolution of ``x`` (N, C, ...) with ``w`` (C, M / group, kernel...),
    plus ``bias`` (M,) if given, as ONNX ConvTranspose (explicit pads).

    >>> import nbyoc
    >>> x, w = nbyoc.var("x", (1, 4, 5, 5)), nbyoc.var("w", (4, 2, 3, 3))
    >>> nbyoc.conv_transpose(x, w, strides=(2, 2), pads=(1, 1, 1, 1), output_padding=(1, 1)).shape
    (1, 2, 10, 10)
    """
    operands = (x, w) if bias is None else (x, w, bias)
    return call_op("conv_transpose", *operands, strides=strides, pads=pads, dilations=dilations,
                   group=group, output_padding=output_padding)  # fmt: skip


# -- resize ------------------------------------------------------------------------------

COORDINATE_MODES = (
    "half_pixel",
    "pytorch_half_pixel",
    "asymmetric",
    "align_corners",
    "half_pixel_symmetric",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_rule(types, attrs):
    (x,) = types
    sizes, scales = attrs["sizes"], attrs["scales"]
    if sizes is None and scales is None:
        raise NbyocTypeError("resize: give sizes or scales (one per axis)")
    # A scale must be finite: the output size is floor(size * scale).
    if scales is not None and (len(scales) != x.ndim or any(not 0 < v < math.inf for v in scales)):
        raise NbyocTypeError(f"resize({x!r}): scales needs {x.ndim} positive, finite values")
    if sizes is not None and (len(sizes) != x.ndim or any(n < 0 for n in sizes)):
        raise NbyocTypeError(f"resize({x!r}): sizes needs {x.ndim} non-negative values")
    # Normal form holds both: the sizes (from scales, rounded down, if not given) and the
    # scales the coordinates use (ONNX: the given ones, else output / input).
    if sizes is None:
        sizes = tuple(_scaled(n, v) for n, v in zip(x.shape, scales))
    if scales is None:
        scales = [_ratio(out, n) for out, n in zip(sizes, x.shape)]
        # (a ratio of symbolic sizes that is no number is taken again once they are known)
        scales = None if None in scales else scales
    if attrs["mode"] == "linear" and not dtype_info(x.dtype).is_float:
        raise NbyocTypeError(f"resize({x!r}): linear mode takes float tensors")
    normal = {**attrs, "sizes": tuple(sizes),
              "scales": None if scales is None else tuple(float(s) for s in scales)}  # fmt: skip
    return TensorType(tuple(sizes), x.dtype), normal


def _scaled(n, scale: float):
    """``floor(n * scale)``; for a symbolic ``n``, exactly, with the float's fraction."""
    if isinstance(n, int):
        return math.floor(n * scale)
    ratio = fractions.Fraction(scale)
    return (n * ratio.numerator) // ratio.denominator


def _ratio(out, n) -> float | None:
    """``out / n`` as ONNX's scale (1.0 for an empty axis); None when symbolic sizes
    leave it no number."""
    if isinstance(out, int) and isinstance(n, int):
        return out / n if n else 1.0
    quotient = out // n
    if isinstance(quotient, int) and quotient * n == out:
        return float(quotient)
    inverse = n // out
    if isinstance(inverse, int) and inverse * out == n:
        return 1.0 / inverse
    return None


def _source_coordinates(out_size, in_size, scale, mode) -> np.ndarray:
    """Where each output position samples the input along one axis (ONNX Resize)."""
    x = np.arange(out_size, dtype=np.float64)
    if mode == "align_corners":
        # ONNX divides by the unrounded output length, in_size * scale (with sizes
        # given, the scale is out / in, so that is the output size).
        length = in_size * scale
        return x * ((in_size - 1) / (length - 1)) if length > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "pytorch_half_pixel" and out_size <= 1:
        return np.zeros_like(x)
    if mode == "half_pixel_symmetric":  # centred: the rounding of the size split evenly
        offset = in_size / 2 * (1 - out_size / (in_size * scale))
        return offset + (x + 0.5) / scale - 0.5
    return (x + 0.5) / scale - 0.5


def _resize_reference(x, sizes, scales, mode, coordinate_transformation_mode, nearest_mode):
    out = x
    for axis, (n_in, n_out, scale) in enumerate(zip(x.shape, sizes, scales)):
        if n_in == n_out and scale == 1.0:
            continue
        where = _source_coordinates(n_out, n_in, scale, coordinate_transformation_mode)
        if mode == "nearest":
            rounding = {"round_prefer_floor": lambda v: np.ceil(v - 0.5),
                        "round_prefer_ceil": lambda v: np.floor(v + 0.5),
                        "floor": np.floor, "ceil": np.ceil}[nearest_mode]  # fmt: skip
            index = np.clip(rounding(where), 0, n_in - 1).astype(np.int64)
            out = np.take(out, index, axis=axis)
            continue
        where = np.clip(where, 0, n_in - 1)  # outside: the edge value (exclude_outside=0)
        low = np.floor(where).astype(np.int64)
        high = np.minimum(low + 1, n_in - 1)
        shape = [1] * out.ndim
        shape[axis] = n_out
        frac = (where - low).reshape(shape).astype(out.dtype)
        a, b = np.take(out, low, axis=axis), np.take(out, high, axis=axis)
        out = a + (b - a) * frac
    return np.ascontiguousarray(out.astype(x.dtype, copy=False))


register_op(Op("resize", 1, _resize_rule, _resize_reference, "layout",
               "``x`` resampled to ``sizes`` (or by ``scales``), nearest or (multi)linear, "
               "with ONNX Resize's coordinate modes",
               attrs={"sizes": Attr("sizes", None), "scales": Attr("floats", None),
                      "mode": Attr("str", "nearest", choices=("nearest", "linear")),
                      "coordinate_transformation_mode": Attr("str", "half_pixel",
                                                             choices=COORDINATE_MODES),
                      "nearest_mode": Attr("str", "round_prefer_floor",
                                           choices=NEAREST_MODES)},
               moves_only=False))  # fmt: skip
