"""Ops that select, reshape or repeat elements: ``slice``, ``gather``, ``squeeze``,
``unsqueeze``, ``flatten``, ``broadcast_to``, ``expand``, ``tile``, ``pad``, ``identity``,
and the ``split`` builder (NumPy's ``x[...]`` on graph values, built from ``slice``,
``reshape`` and ``gather``, is the NumPy layer's: ``nbyoc.frontend.numpy.indexing``).
Their attributes follow ONNX's conventions (so a frontend maps onto them directly) and
are stored in normal form.

Most are defined by decomposition into ``reshape``, ``slice``, ``broadcast_to`` and
``concatenate``, so a backend needs no rows for them; a repeat count (``tile``'s, an edge
or constant ``pad``'s) is a broadcast, so a decomposition's size never depends on it.
``slice`` is a view on llvm, ``identity`` and ``broadcast_to`` are elementwise copies that
fuse into a loop nest.

>>> import nbyoc
>>> x = nbyoc.var("x", (4, 6))
>>> nbyoc.slice(x, starts=(1, -1), ends=(4, -7), steps=(1, -2)).type
Tensor[(3, 3), float32]
>>> nbyoc.unsqueeze(x, (0, 3)).shape, nbyoc.pad(x, (1, 0, 1, 2)).shape
((1, 4, 6, 1), (6, 8))
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence

import numpy as np

from ...errors import NbyocTypeError, UndecidableSizeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op, const
from ..dtypes import dtype_info
from ..nodes import Expr
from ..op import Op, register_op
from ..symbols import SizeExpr, collecting, maximum, minimum, require
from ..types import TensorType
from .elementwise import ELEMENTWISE_LOOPS, broadcast_shapes, register_elementwise
from .reduce import normalize_axes


def _register(name, arity, rule, reference, summary, attrs=None, decompose=None, kind="layout"):
    register_op(Op(name, arity, rule, reference, kind, summary, attrs=attrs or {},
                   decompose=decompose))  # fmt: skip


# -- slice ------------------------------------------------------------------------------


def _clamp(value: int, size: int, step: int) -> int:
    """ONNX's (and Python's) resolution of a start or end index on an axis of ``size``:
    negative counts from the end, then clamped to [0, size] (to [-1, size - 1] when
    stepping backwards, where -1 means "before the first element")."""
    if value < 0:
        value += size
    if step > 0:
        return minimum(maximum(value, 0), size)
    return minimum(maximum(value, -1), size - 1)


def _length(start, end, step):
    """How many elements ``range(start, end, step)`` holds, for resolved indices
    (also symbolic ones)."""
    if step > 0:
        return maximum(0, (end - start + step - 1) // step)
    return maximum(0, (start - end - step - 1) // -step)


def _slice_rule(types, attrs):
    (t,) = types
    starts, ends = attrs["starts"], attrs["ends"]
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(range(len(starts)))
    steps = attrs["steps"] if attrs["steps"] is not None else (1,) * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise NbyocTypeError(
            f"slice({t!r}): starts, ends, axes and steps must have one entry per sliced axis "
            f"(got {len(starts)}, {len(ends)}, {len(axes)}, {len(steps)})"
        )
    full_starts, full_ends, full_steps = [0] * t.ndim, list(t.shape), [1] * t.ndim
    seen, given = set(), {}
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if not -t.ndim <= axis < t.ndim or axis % t.ndim in seen:
            raise NbyocTypeError(f"slice({t!r}): axis {axis} is out of range or repeated")
        if step == 0:
            raise NbyocTypeError(f"slice({t!r}): a step of 0 selects nothing; use 1 or -1")
        axis %= t.ndim
        seen.add(axis)
        size = t.shape[axis]
        full_starts[axis] = _clamp(start, size, step)
        full_ends[axis] = _clamp(end, size, step)
        full_steps[axis] = step
        given[axis] = (start, end)
    # "Before the first element" (-1 when stepping backwards) is stored as -(size + 1),
    # which resolves to itself: the normal form must survive the rule again.
    shape = [_length(*bounds) for bounds in zip(full_starts, full_ends, full_steps)]
    for axis in range(t.ndim):
        if full_steps[axis] < 0:
            size = t.shape[axis]
            full_starts[axis] = -(size + 1) if full_starts[axis] == -1 else full_starts[axis]
            full_ends[axis] = -(size + 1) if full_ends[axis] == -1 else full_ends[axis]
            # A symbolic index that may resolve to -1 ("before the first element") has no
            # resolved form that means the same for every size: the given index is kept,
            # and resolved again once the size is known.
            for bounds, side in ((full_starts, 0), (full_ends, 1)):
                if isinstance(bounds[axis], SizeExpr) and bounds[axis].bounds()[0] < 0:
                    bounds[axis] = given[axis][side]
    normal = {"starts": tuple(full_starts), "ends": tuple(full_ends),
              "axes": tuple(range(t.ndim)), "steps": tuple(full_steps)}  # fmt: skip
    return TensorType(shape, t.dtype), normal


def python_slices(attrs) -> tuple[builtins.slice, ...]:
    """The Python slices of a slice call's normal-form attributes (an end of -1 when
    stepping backwards means "through the first element": None in Python).

    >>> python_slices({"starts": (3,), "ends": (-5,), "steps": (-1,)})
    (slice(3, None, -1),)
    """
    return tuple(
        builtins.slice(s, None if e < 0 else e, st)
        for s, e, st in zip(attrs["starts"], attrs["ends"], attrs["steps"])
    )


def _slice_reference(x, starts, ends, axes, steps):
    return x[python_slices({"starts": starts, "ends": ends, "steps": steps})]


_register(
    "slice", 1, _slice_rule, _slice_reference,
    "Elements ``starts[i]:ends[i]:steps[i]`` along ``axes[i]`` (ONNX Slice; negative "
    "indices count from the end, out-of-range ones are clamped)",
    attrs={"starts": Attr("sizes"), "ends": Attr("sizes"), "axes": Attr("ints", None),
           "steps": Attr("ints", None)},
)  # fmt: skip


# -- gather -----------------------------------------------------------------------------


def _gather_rule(types, attrs):
    x, indices = types
    if not dtype_info(indices.dtype).is_integer:
        raise NbyocTypeError(f"gather: indices must be integers, got {indices!r}")
    if x.ndim == 0:
        raise NbyocTypeError("gather: cannot index a 0-d tensor")
    (axis,) = normalize_axes("gather", x, attrs["axis"])
    shape = x.shape[:axis] + indices.shape + x.shape[axis + 1 :]
    return TensorType(shape, x.dtype), {"axis": axis}


def _gather_reference(x, indices, axis):
    size = x.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise IndexError(f"gather: an index is out of range for an axis of length {size}")
    return np.take(x, indices.astype(np.int64), axis=axis)


_register("gather", 2, _gather_rule, _gather_reference,
          "Entries of ``x`` along ``axis`` picked by integer ``indices`` (negative ones count "
          "from the end), as ``np.take``; an index out of range is an error when it runs",
          attrs={"axis": Attr("int", 0)})  # fmt: skip


# -- reshapes: squeeze, unsqueeze, flatten (decomposed into reshape) ---------------------


def _squeeze_shape(t: TensorType, axes) -> tuple[int, ...]:
    if axes is None:
        if t.symbols:  # (which axes go would depend on the sizes)
            raise UndecidableSizeError(
                f"squeeze({t!r}) without axes: whether a symbolic size is 1 is known only "
                f"at call time; name the axes to squeeze"
            )
        return tuple(d for d in t.shape if d != 1)
    axes = normalize_axes("squeeze", t, axes)
    bad = [a for a in axes if isinstance(t.shape[a], int) and t.shape[a] != 1]
    if bad:
        raise NbyocTypeError(f"squeeze({t!r}): axes {bad} do not have length 1")
    for a in axes:  # a symbolic size squeezed must be 1 when called
        require("equal", t.shape[a], 1, where=f"squeeze of axis {a}")
    return tuple(d for i, d in enumerate(t.shape) if i not in axes)


def _unsqueeze_shape(t: TensorType, axes) -> tuple[int, ...]:
    rank = t.ndim + len(axes)
    normal = sorted(a % rank if -rank <= a < rank else rank + 99 for a in axes)
    if normal and (normal[-1] >= rank or len(set(normal)) != len(normal)):
        raise NbyocTypeError(f"unsqueeze({t!r}): axes {tuple(axes)} are out of range or repeat")
    dims = iter(t.shape)
    return tuple(1 if i in normal else next(dims) for i in range(rank))


def _flatten_shape(t: TensorType, axis: int) -> tuple[int, ...]:
    if not -t.ndim <= axis <= t.ndim:
        raise NbyocTypeError(f"flatten({t!r}): axis {axis} is out of range [{-t.ndim}, {t.ndim}]")
    if axis < 0:  # counted from the end, as ONNX's Flatten: -1 keeps the last axis apart
        axis += t.ndim
    return (math.prod(t.shape[:axis]), math.prod(t.shape[axis:]))


RESHAPES = {
    "squeeze": (_squeeze_shape, {"axes": Attr("ints", None)},
                "Drop axes of length 1 (``axes``: which; None: all)"),
    "unsqueeze": (_unsqueeze_shape, {"axes": Attr("ints")},
                  "Insert axes of length 1 at ``axes`` (positions in the result)"),
    "flatten": (_flatten_shape, {"axis": Attr("int", 1)},
                "A 2-D view: axes before ``axis`` become rows, the rest columns (ONNX Flatten)"),
}  # fmt: skip


def _reshape_op(name, shape_of):
    def rule(types, attrs):
        (t,) = types
        return TensorType(shape_of(t, *attrs.values()), t.dtype), attrs

    def reference(x, **attrs):
        return np.reshape(x, shape_of(TensorType(x.shape, x.dtype.name), *attrs.values()))

    def decompose(x, **attrs):
        # (what the shape needs of symbolic sizes, the reshape's rule needs again: its
        # sizes multiply to the same total exactly when the squeezed ones are 1)
        with collecting():
            newshape = shape_of(x.type, *attrs.values())
        return call_op("reshape", x, newshape=newshape)

    return rule, reference, decompose


for _name, (_shape_of, _attrs, _summary) in RESHAPES.items():
    _rule, _reference, _decompose = _reshape_op(_name, _shape_of)
    _register(_name, 1, _rule, _reference, _summary, _attrs, _decompose)


# -- copies: identity, broadcast_to, expand, tile ------------------------------------------


def _identity_loop(dtypes, attrs):
    return (dtypes[0], dtypes[0])


register_elementwise("identity", 1, np.copy, "A copy of ``x``", loop=_identity_loop,
                     moves_only=True)  # fmt: skip


def _broadcast_rule(types, attrs):
    (t,) = types
    shape = tuple(attrs["shape"])
    if broadcast_shapes("broadcast_to", (t, TensorType(shape, t.dtype))) != shape:
        raise NbyocTypeError(f"broadcast_to({t!r}): cannot broadcast to {shape}")
    return TensorType(shape, t.dtype), {"shape": shape}


def _broadcast_reference(x, shape):
    return np.broadcast_to(x, shape).copy()


register_op(Op("broadcast_to", 1, _broadcast_rule, _broadcast_reference, "elementwise",
               "``x`` repeated along broadcast axes to ``shape`` (NumPy's rules)",
               attrs={"shape": Attr("sizes")}, moves_only=True))  # fmt: skip
ELEMENTWISE_LOOPS["broadcast_to"] = _identity_loop  # a copy: computes in x's dtype


def _expand_shape(t: TensorType, shape) -> tuple[int, ...]:
    return broadcast_shapes("expand", (t, TensorType(tuple(shape), t.dtype)))


def _expand_reference(x, shape):
    return _broadcast_reference(x, _expand_shape(TensorType(x.shape, x.dtype.name), shape))


_register(
    "expand", 1,
    lambda types, attrs: (TensorType(_expand_shape(types[0], attrs["shape"]), types[0].dtype),
                          {"shape": tuple(attrs["shape"])}),
    _expand_reference,
    "``x`` broadcast together with ``shape`` (ONNX Expand: the result may be larger than both)",
    {"shape": Attr("sizes")},
    lambda x, shape: call_op("broadcast_to", x, shape=_expand_shape(x.type, shape)),
)  # fmt: skip


def _tile_rule(types, attrs):
    (t,) = types
    repeats = tuple(attrs["repeats"])
    if len(repeats) != t.ndim or any(r < 0 for r in repeats):
        raise NbyocTypeError(
            f"tile({t!r}): repeats needs one non-negative count per axis, got {repeats}"
        )
    return TensorType(tuple(d * r for d, r in zip(t.shape, repeats)), t.dtype), attrs


def _tile_decomposition(x, repeats):
    # Each repeated axis of length d becomes (count, d) with a broadcast along count, and
    # the result is read back flat: one copy whatever the counts (a concatenate of
    # ``count`` operands was ``count`` loops to compile: 33 s for repeats (300, 1)).
    if all(count == 1 for count in repeats):
        return x
    shape = x.type.shape
    spread, wide = [], []
    for size, count in zip(shape, repeats):
        spread += [size] if count == 1 else [1, size]
        wide += [size] if count == 1 else [count, size]
    x = call_op("reshape", x, newshape=tuple(spread))
    x = call_op("broadcast_to", x, shape=tuple(wide))
    return call_op("reshape", x, newshape=tuple(d * r for d, r in zip(shape, repeats)))


_register("tile", 1, _tile_rule, lambda x, repeats: np.tile(x, repeats),
          "``x`` repeated ``repeats[i]`` times along each axis i (ONNX Tile)",
          {"repeats": Attr("ints")}, _tile_decomposition)  # fmt: skip


# -- pad --------------------------------------------------------------------------------


def _pad_pairs(t: TensorType, pads) -> list[tuple[int, int]]:
    if len(pads) != 2 * t.ndim or any(p < 0 for p in pads):
        raise NbyocTypeError(
            f"pad({t!r}): pads holds the {t.ndim} begins then the {t.ndim} ends "
            f"(non-negative, ONNX's order), got {tuple(pads)}"
        )
    return list(zip(pads[: t.ndim], pads[t.ndim :]))


def _pad_rule(types, attrs):
    (t,) = types
    pairs = _pad_pairs(t, attrs["pads"])
    for axis, (before, after) in enumerate(pairs):
        size = t.shape[axis]
        # (a symbolic length is checked at call time)
        if attrs["mode"] == "reflect":
            require("at_least", size - 1, builtins.max(before, after), where="pad", error=(
                f"pad({t!r}): reflect pads axis {axis} (length {size}) by at most {size - 1}"
            ))  # fmt: skip
        if attrs["mode"] == "edge" and size == 0 and (before or after):
            raise NbyocTypeError(f"pad({t!r}): an empty axis has no edge to repeat")
        if attrs["mode"] == "wrap":
            require("at_least", size, builtins.max(before, after), where="pad", error=(
                f"pad({t!r}): wrap pads axis {axis} (length {size}) by at most {size}"
            ))  # fmt: skip
    shape = tuple(d + b + a for d, (b, a) in zip(t.shape, pairs))
    return TensorType(shape, t.dtype), {**attrs, "pads": tuple(attrs["pads"])}


def _pad_reference(x, pads, mode, value):
    pairs = _pad_pairs(TensorType(x.shape, x.dtype.name), pads)
    if mode == "constant":
        return np.pad(x, pairs, mode="constant", constant_values=x.dtype.type(value))
    return np.pad(x, pairs, mode=mode)


def _pad_decomposition(x, pads, mode, value):
    pairs = _pad_pairs(x.type, pads)
    for axis, (before, after) in enumerate(pairs):
        if not (before or after):
            continue
        size = x.type.shape[axis]

        def part(start, end, step=1, x=x, axis=axis):
            return call_op("slice", x, starts=(start,), ends=(end,), axes=(axis,), steps=(step,))

        def spread(piece, count, x=x, axis=axis):
            # ``piece`` (a 0-d value, or x's length-1 edge) broadcast to ``count`` along
            # the axis: one copy whatever the count, never a concatenate of ``count``
            # operands nor a constant the padding's size made at compile time.
            shape = list(x.type.shape)
            shape[axis] = count
            return call_op("broadcast_to", piece, shape=tuple(shape))

        if mode == "constant":
            fill = const(np.full((), value, x.type.dtype))
            sides = [spread(fill, before), spread(fill, after)]
        elif mode == "edge":
            sides = [spread(part(0, 1), before), spread(part(size - 1, size), after)]
        elif mode == "wrap":  # the other end's elements, as if the axis were a ring
            sides = [part(size - before, size), part(0, after)]
        else:  # reflect: the mirror image without the edge element itself
            end = size - 2 - after
            sides = [part(before, 0, -1), part(size - 2, end if end >= 0 else -(size + 1), -1)]
        pieces = [p for p, n in zip([sides[0], x, sides[1]], [before, 1, after]) if n]
        x = call_op("concatenate", *pieces, axis=axis)
    return x


_register(
    "pad", 1, _pad_rule, _pad_reference,
    "``x`` padded by ``pads`` (the begins of every axis, then the ends, as in ONNX) with "
    "``value`` (mode constant), its edge values (edge), its mirror image (reflect) or "
    "its other end (wrap)",
    {"pads": Attr("ints"),
     "mode": Attr("str", "constant", choices=("constant", "reflect", "edge", "wrap")),
     "value": Attr("float", 0.0)},
    _pad_decomposition,
)  # fmt: skip


# -- split: a builder over the ops above ---------------------------------------------------


def split(x: Operand, sections: int | Sequence[int], axis: int = 0) -> tuple[Expr, ...]:
    """``x`` cut along ``axis`` into ``sections`` equal parts (an int) or parts of the given
    sizes (a list), as a tuple of slices (split has no op of its own).

    >>> import nbyoc
    >>> [p.shape for p in split(nbyoc.var("x", (2, 7)), [3, 4], axis=1)]
    [(2, 3), (2, 4)]
    """
    (axis,) = normalize_axes("split", x.type, axis)
    size = x.type.shape[axis]
    # (split is a builder, not an op: a condition on a symbolic size must be provable)
    if isinstance(sections, int):
        rest = size % sections if sections > 0 else 1
        if isinstance(rest, SizeExpr):
            raise UndecidableSizeError(
                f"split: cannot tell at compile time that the axis of length {size} has "
                f"{sections} equal parts; fix its size"
            )
        if rest:
            raise NbyocTypeError(f"split: an axis of length {size} has no {sections} equal parts")
        sizes = [size // sections] * sections
    else:
        sizes = [operator.index(n) for n in sections]
        if any(n < 0 for n in sizes) or sum(sizes) != size:
            raise (UndecidableSizeError if isinstance(size, SizeExpr) else NbyocTypeError)(
                f"split: sizes {sizes} do not add up to the axis length {size}"
            )
    parts, start = [], 0
    for n in sizes:
        parts.append(call_op("slice", x, starts=(start,), ends=(start + n,), axes=(axis,)))
        start += n
    return tuple(parts)
