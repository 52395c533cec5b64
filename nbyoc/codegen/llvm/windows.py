"""llvm stages that pick elements by computed positions: ``gather``, the pools
(``max_pool``, ``avg_pool``) and ``resize``, as loops writing a destination array.

A gather checks every index before it writes anything, so an index out of range
raises (as NumPy's ``take`` does) instead of reading outside the operand. A pool
loops over each window's positions and skips those in the padding, so it reads
only the operand (never a padded copy); ``max_pool`` lets NaN win, ``avg_pool``
sums in float64 and divides by the window's real elements (or its full size,
``count_include_pad``). A resize computes each output element's source positions
from its index with the reference's float64 arithmetic, so nearest picks the same
elements; linear interpolates all resized axes at once in float64 (the reference
goes axis by axis in the dtype, so the two agree to rounding). A resize whose
positions depend only on its scales runs as a stage function of one task per output
row, its extents read at run time (``resize_tasks``): one function for every size.
"""

from __future__ import annotations

import math

from ...ir.dtypes import dtype_info
from ...ir.nodes import Call
from . import rules
from .loops import loop_nest, parallel_first, subscript, tap_outputs
from .reductions import REDUCTIONS
from .sizes import Dim, Sizes, value, written
from .stages import Lead, StageBody


def gather_stage(node: Call, sources: list[str], dest: str, parallel: bool) -> list[str]:
    """``np.take(x, indices, axis)`` into ``dest``; negative indices count from the end."""
    x_name, index_name = sources
    size = node.args[0].type.shape[node.attrs["axis"]]
    (before, j, after), fetch, copy = _gather_copy(node, x_name, index_name, dest, size)
    if not j:  # a 0-d index: read once, by the check (a prange cannot index a 0-d array)
        fetch = ["k = np.int64(index)", *fetch[1:]]
    return gather_checks(node, sources) + loop_nest(
        node.type.shape, [*fetch, copy], before + j + after, parallel_first(parallel)
    )


def _gather_copy(node: Call, x_name: str, index_name: str, dest: str, size):
    """A gather's index names (before the axis, of the indices, after it), the lines
    reading the index at ``j`` into ``k`` (a negative one counting back from ``size``, a
    number or a ``Dim``), and the line copying one element."""
    x, indices = node.args
    axis = node.attrs["axis"]
    j = [f"j{d}" for d in range(indices.type.ndim)]
    before = [f"i{d}" for d in range(axis)]
    after = [f"i{d}" for d in range(axis + 1, x.type.ndim)]
    fetch = [f"k = np.int64({index_name}[{subscript(j)}])", "if k < 0:", f"    k += {size}"]
    source = subscript([*before, "k", *after])
    return (
        (before, j, after),
        fetch,
        f"{dest}[{subscript(before + j + after)}] = {x_name}[{source}]",
    )


def gather_checks(node: Call, sources: list[str]) -> list[str]:
    """The loops raising IndexError unless every index of a gather lies within its axis,
    run before anything is copied (the kernel's, also when a stage function copies:
    ``gather_tasks``)."""
    x, indices = node.args
    size = x.type.shape[node.attrs["axis"]]
    index_name = sources[1]
    j = [f"j{d}" for d in range(indices.type.ndim)]
    low = f"index < -{size} or " if dtype_info(indices.type.dtype).kind == "int" else ""
    check = [
        f"index = {index_name}[{subscript(j)}]",
        f"if {low}index >= {size}:",
        f'    raise IndexError("nbyoc: a gather index is out of range for an axis of length '
        f'{size}")',
    ]
    return loop_nest(indices.type.shape, check, j)


def gather_tasks(node: Call) -> StageBody | None:
    """A gather as a stage function of one task per (outer position, index), copying one
    row of the axes after the gathered one (one task per outer position, over every
    index, when the gathered axis is the last), every extent read at run time: one function
    for every size of a structure (rank, axis, index rank, dtypes). Its indices are
    checked before it runs (``gather_checks``, in the kernel), so the function reads
    only within its operand. None for 0-d indices.

    >>> import nbyoc
    >>> x, i = nbyoc.var("x", (5, 4, 3)), nbyoc.var("i", (2,), "int64")
    >>> body = gather_tasks(nbyoc.call_op("gather", x, i, axis=1))
    >>> body.tasks, body.sizes.argument(), body.lines[:3]
    (10, '(2, 5, 4, 3)', ['q = task', 'j0 = q % z0', 'q = q // z0'])
    """
    x, indices = node.args
    axis = node.attrs["axis"]
    if indices.type.ndim == 0:
        return None
    sizes = Sizes()
    index_extents = sizes.dims(indices.type.shape)
    outer = sizes.dims(x.type.shape[:axis])
    size = sizes.dim(x.type.shape[axis])
    inner = sizes.dims(x.type.shape[axis + 1 :])
    (before, j, after), fetch, copy = _gather_copy(node, "operand0", "operand1", "result", size)
    if after:  # a task per outer position and index, copying a row of the axes after
        task_axes = [*zip(before, outer), *zip(j, index_extents)]
        loops, head, innermost = list(zip(after, inner)), fetch, [copy]
        tasks = math.prod(x.type.shape[:axis]) * math.prod(indices.type.shape)
        work = math.prod(x.type.shape[axis + 1 :])
    else:  # the gathered axis is the last: a task per outer position, over every index
        # (a task per element ran a (2048, 512) -> (2048, 256) gather 10x slower)
        task_axes = list(zip(before, outer))
        loops, head, innermost = list(zip(j, index_extents)), [], [*fetch, copy]
        tasks, work = math.prod(x.type.shape[:axis]), math.prod(indices.type.shape)
    lines = ["q = task"]
    for name, extent in reversed(task_axes):
        lines += [f"{name} = q % {extent}", f"q = q // {extent}"]
    lines += head
    for depth, (name, extent) in enumerate(loops):
        lines.append("    " * depth + f"for {name} in range({extent}):")
    lines += ["    " * len(loops) + line for line in innermost]
    return StageBody(
        lines,
        tasks,
        max(1, work),
        lead=Lead.spread(node.type.shape[0], tasks) if task_axes else None,
        sizes=sizes,
        parameters=["operand0", "operand1", "result"],
    )


def pool_stage(node: Call, sources, dest: str, parallel: bool, epilogue=None) -> StageBody:
    """max_pool / avg_pool of the (N, C, spatial...) operand into ``dest``, as a stage
    function's body: a task per (image, channel) plane, so that a pool shares the
    parallel loop of the convs around it (``StageBody.lead``)."""
    assert epilogue is None, "internal: a pool takes no epilogue"
    (source,) = sources
    (x,) = node.args
    attrs = node.attrs
    kernel, strides, dilations = attrs["kernel_shape"], attrs["strides"], attrs["dilations"]
    k = len(kernel)
    begins = attrs["pads"][:k]
    if node.op.name == "max_pool" and k == 2 and math.prod(kernel) >= SEPARABLE_MIN_TAPS:
        return _separable_max(node, source, dest)
    # Images and channels are read at run time; the window and the spatial extents are
    # written in: with constant extents LLVM proves which taps can reach the padding and
    # vectorises the row (read at run time, a 3x3/2 max pool over 56x56 ran 2.2x slower).
    sizes = Sizes()
    images, channels = sizes.dims(x.type.shape[:2])
    spatial, out_shape = written(x.type.shape[2:]), written(node.type.shape[2:])
    dtype = x.type.dtype
    element = rules.load(f"{source}[{subscript(['n', 'c', *(f'p{d}' for d in range(k))])}]", dtype)
    if node.op.name == "max_pool":
        start = REDUCTIONS["max"].identity(dtype)
        # A select, not a branch, so that LLVM can vectorise the loop over outputs.
        update = ["v = " + element, "acc = v if v > acc or v != v else acc"]
        result = "acc"
    else:
        start = rules.cast("0", "float64")
        update = [f"acc += {rules.cast(element, 'float64')}", "count += 1"]
        full = float(math.prod(kernel))
        result = f"acc / {full!r}" if attrs["count_include_pad"] else "acc / count"
    # Each kernel axis: its input position, skipped when it falls in the padding.
    # An axis whose windows all lie inside the operand (no padding reached) has no
    # test: it kept the CNN's 2x2 pools from vectorising.
    # Such a last axis also runs over unsigned positions to an opaque bound (signed
    # ones are wrapped when negative; a small constant bound is unrolled into scalar
    # code): the CNN's 2x2 max pool took 46 us that way, 24 us this way.
    window: list[str] = []
    inside = [  # (a choice of code, so by value: the test's presence is in the text)
        begins[d] == 0
        and (value(out_shape[d]) - 1) * strides[d] + (kernel[d] - 1) * dilations[d]
        < value(spatial[d])
        for d in range(k)
    ]
    for d in range(k):
        pad = "    " * d
        position = f"o{d} * {strides[d]} - {begins[d]} + q{d} * {dilations[d]}"
        if d == k - 1 and inside[d]:
            position = f"o{d} * np.uint64({strides[d]}) + np.uint64(q{d} * {dilations[d]})"
        window += [f"{pad}for q{d} in range({kernel[d]}):", f"{pad}    p{d} = {position}"]
        if not inside[d]:
            window += [f"{pad}    if p{d} < 0 or p{d} >= {spatial[d]}:", f"{pad}        continue"]
    window += ["    " * k + line for line in update]
    out = subscript(["n", "c", *(f"o{d}" for d in range(k))])
    inner = [
        f"acc = {start}",
        "count = 0",
        *window,
        f"{dest}[{out}] = {rules.store(rules.cast(result, node.type.dtype), node.type.dtype)}",
    ]
    lines = loop_nest(out_shape, inner, [f"o{d}" for d in range(k)])
    if inside[k - 1]:
        last = f"for o{k - 1} in range({out_shape[-1]}):"
        lines = [
            line.replace(last, f"for o{k - 1} in range(np.uint64(opaque({out_shape[-1]}))):")
            for line in lines
        ]
    body = [f"n = task // {channels}", f"c = task % {channels}", *lines]
    work = value(math.prod(out_shape)) * math.prod(kernel)
    images, channels = value(images), value(channels)
    lead = Lead(images, 1, channels)
    return StageBody(body, images * channels, work, lead=lead, sizes=sizes)


#: A 2-D max pool of at least this many taps per window takes the maximum along rows,
#: then along columns of the row maxima: k0 + k1 steps an output instead of k0 * k1, in
#: loops over outputs that vectorise. A YOLO SPP's 13x13 pool over 192 planes of 13x13
#: took 4.2 ms tap by tap. (A 3x3/2 pool's taps mostly stay inside the operand, where
#: the direct loop vectorises too; ``tests/ir/test_conv.py`` holds both paths to the
#: loop oracle.)
SEPARABLE_MIN_TAPS = 16


def _separable_max(node: Call, source: str, dest: str) -> StageBody:
    """A 2-D max pool as two passes over one (image, channel) plane per task: each input
    row's maxima over the window's columns (``rows``, one row per input row), then each
    output row's maximum over the window's rows of those. The maximum of a window is the
    maximum of its rows' maxima, NaN winning in both passes as in the direct loop. Each
    pass runs a tap's outputs in a loop whose bounds leave out the padding (a tap ``q``
    reaches input ``o * s - b + q * d``, inside for ``o`` in ``loops.tap_outputs``)."""
    (x,) = node.args
    attrs = node.attrs
    kernel, strides, dilations = attrs["kernel_shape"], attrs["strides"], attrs["dilations"]
    begins = attrs["pads"][:2]
    sizes = Sizes()
    images, channels = sizes.dims(x.type.shape[:2])
    height, width = written(x.type.shape[2:])
    out_height, out_width = written(node.type.shape[2:])
    dtype = x.type.dtype
    start = REDUCTIONS["max"].identity(dtype)
    value_type = rules.NP_TYPES[rules.value_dtype(dtype)]
    keep = "{0}[o1] = v if v > {0}[o1] or v != v else {0}[o1]"  # a select: it vectorises
    bounds, position = [], []  # (per axis: the outputs a tap reads inside, and where)
    for d, outputs, extent in ((0, out_height, height), (1, out_width, width)):
        s, b, dil = strides[d], begins[d], dilations[d]
        bounds.append(tap_outputs(("first", "last"), f"q{d}", outputs, extent - 1 + b, s, b, dil))
        position.append(f"o{d} * {s} - {b} + q{d} * {dil}")
    element = rules.load(f"{source}[n, c, p0, {position[1]}]", dtype)
    result = rules.store(rules.cast("acc[o1]", dtype), dtype)
    body = [
        f"n = task // {channels}",
        f"c = task % {channels}",
        f"for p0 in range({height}):",
        "    row = rows[p0]",
        f"    row[:] = {start}",
        f"    for q1 in range({kernel[1]}):",
        *("        " + line for line in bounds[1]),
        "        for o1 in range(first, last):",
        f"            v = {element}",
        "            " + keep.format("row"),
        f"for o0 in range({out_height}):",
        f"    acc[:] = {start}",
        f"    for q0 in range({kernel[0]}):",
        *("        " + line for line in bounds[0]),
        "        if o0 < first or o0 >= last:",
        "            continue",
        f"        p0 = {position[0]}",
        f"        for o1 in range({out_width}):",
        "            v = rows[p0, o1]",
        "            " + keep.format("acc"),
        f"    for o1 in range({out_width}):",
        f"        {dest}[n, c, o0, o1] = {result}",
    ]
    setup = [
        f"rows = np.empty(({height}, {out_width}), {value_type})",
        f"acc = np.empty({out_width}, {value_type})",
    ]
    work = (
        value(out_height) * value(out_width) * kernel[0]
        + value(height) * value(out_width) * kernel[1]
    )
    images, channels = value(images), value(channels)
    return StageBody(
        body, images * channels, work, setup=setup, lead=Lead(images, 1, channels), sizes=sizes
    )


def _coordinate(o: str, n_in: int, n_out: int, scale: float, mode: str) -> str:
    """Source of where output position ``o`` samples the input along one axis, in
    float64 and in the same operations as the reference (so the same numbers)."""
    if mode == "align_corners":  # the unrounded output length, as the reference
        length = n_in * scale
        return f"{o} * {(n_in - 1) / (length - 1)!r}" if length > 1 else "0.0"
    if mode == "asymmetric":
        return f"{o} / {scale!r}"
    if mode == "pytorch_half_pixel" and n_out <= 1:
        return "0.0"
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / (n_in * scale))
        return f"{offset!r} + ({o} + 0.5) / {scale!r} - 0.5"
    return f"({o} + 0.5) / {scale!r} - 0.5"


#: ONNX Resize's nearest modes as float64 source rounding ``v``.
NEAREST = {
    "round_prefer_floor": "np.ceil({v} - 0.5)",
    "round_prefer_ceil": "np.floor({v} + 0.5)",
    "floor": "np.floor({v})",
    "ceil": "np.ceil({v})",
}


def resize_stage(node: Call, sources: list[str], dest: str, parallel: bool) -> list[str]:
    """resize (nearest, or multilinear over the resized axes in float64) into ``dest``:
    each output element computes its source positions from its own index."""
    (source,) = sources
    (x,) = node.args
    attrs = node.attrs
    inner: list[str] = []
    resized = []  # axes whose samples are interpolated (linear)
    for d, (n_in, n_out, scale) in enumerate(zip(x.type.shape, attrs["sizes"], attrs["scales"])):
        lines, interpolated = _sample(d, n_in, scale, attrs, n_in == n_out and scale == 1.0)
        inner += lines
        resized += [d] * interpolated
    axes = range(x.type.ndim)
    inner += _resized_element(source, dest, x.type.dtype, x.type.ndim, resized)
    return loop_nest(node.type.shape, inner, [f"o{d}" for d in axes], parallel_first(parallel))


def resize_tasks(node: Call) -> StageBody | None:
    """resize as a stage function of tasks, one per row of its result (its last axis),
    every extent read at run time: one function for every size of a structure (mode,
    coordinate mode, scales, which axes are resized, dtype, rank). None for a coordinate
    mode whose positions depend on the extents themselves (align_corners,
    half_pixel_symmetric, pytorch_half_pixel: the per-shape loops of ``resize_stage``),
    and for a 1-D one (a single row).

    >>> import nbyoc
    >>> x = nbyoc.var("x", (1, 2, 3, 4))
    >>> body = resize_tasks(nbyoc.call_op("resize", x, scales=(1.0, 1.0, 2.0, 2.0),
    ...                     sizes=(1, 2, 6, 8), mode="nearest"))
    >>> body.tasks, body.sizes.argument(), body.lines[:4]
    (12, '(1, 2, 6, 8, 3, 4)', ['q = task', 'o2 = q % z2', 'q = q // z2', 'o1 = q % z1'])
    """
    (x,) = node.args
    attrs = node.attrs
    ndim = x.type.ndim
    if attrs["coordinate_transformation_mode"] not in ("asymmetric", "half_pixel") or ndim < 2:
        return None
    sizes = Sizes()
    outs = sizes.dims(node.type.shape)
    lines = ["q = task"]
    for d in reversed(range(1, ndim - 1)):
        lines += [f"o{d} = q % {outs[d]}", f"q = q // {outs[d]}"]
    lines.append("o0 = q")
    inner, resized = [], []
    for d, (n_in, n_out, scale) in enumerate(zip(x.type.shape, attrs["sizes"], attrs["scales"])):
        same = n_in == n_out and scale == 1.0  # (a choice of code: in the text)
        sample, interpolated = _sample(d, None if same else sizes.dim(n_in), scale, attrs, same)
        (inner if d == ndim - 1 else lines).extend(sample)
        resized += [d] * interpolated
    inner += _resized_element("operand0", "result", x.type.dtype, ndim, resized)
    lines += [f"for o{ndim - 1} in range({outs[-1]}):", *("    " + line for line in inner)]
    tasks = math.prod(node.type.shape[:-1])
    return StageBody(
        lines,
        tasks,
        max(1, node.type.shape[-1] * (1 << len(resized))),
        lead=Lead.spread(node.type.shape[0], tasks),
        sizes=sizes,
        parameters=["operand0", "result"],
    )


def _sample(d: int, n_in, scale: float, attrs, same: bool) -> tuple[list[str], bool]:
    """The lines computing output position ``o<d>``'s source position ``a<d>`` (and, when
    interpolated, the next one ``b<d>`` and the fraction ``f<d>``) along axis ``d``, of
    input extent ``n_in`` (a number, or a ``Dim`` read at run time) and scale ``scale``
    (``same``: the axis is not resized); whether it is interpolated."""
    if same:
        return [f"a{d} = o{d}"], False
    n_out = attrs["sizes"][d]
    coordinates = attrs["coordinate_transformation_mode"]
    # (a Dim only for the coordinate modes that read neither extent: ``resize_tasks``)
    where = _coordinate(f"np.float64(o{d})", n_in, n_out, scale, coordinates)
    edge = f"np.float64({n_in - 1})" if isinstance(n_in, Dim) else repr(float(n_in - 1))
    if attrs["mode"] == "nearest":
        rounded = NEAREST[attrs["nearest_mode"]].format(v=where)
        return [f"a{d} = np.int64(min(max({rounded}, 0.0), {edge}))"], False
    return [  # (not ``w{d}``: the kernel's values are w0, w1, ...)
        f"at{d} = min(max({where}, 0.0), {edge})",  # outside: the edge
        f"a{d} = np.int64(np.floor(at{d}))",
        f"b{d} = min(a{d} + 1, {n_in - 1})",
        f"f{d} = at{d} - a{d}",
    ], True


def _resized_element(source: str, dest: str, dtype, ndim: int, resized: list[int]) -> list[str]:
    """The lines storing the output element at ``o0, o1, ...`` from the source positions
    (``_sample``): copied as stored, or interpolated over the ``resized`` axes."""
    out = subscript([f"o{d}" for d in range(ndim)])
    if not resized:
        return [f"{dest}[{out}] = {source}[{subscript([f'a{d}' for d in range(ndim)])}]"]
    lines = ["acc = 0.0"]
    for corner in range(1 << len(resized)):
        high = {d: bool(corner >> k & 1) for k, d in enumerate(resized)}
        weight = " * ".join(f"f{d}" if high[d] else f"(1.0 - f{d})" for d in resized)
        index = [(f"b{d}" if high[d] else f"a{d}") if d in high else f"a{d}" for d in range(ndim)]
        element = rules.load(f"{source}[{subscript(index)}]", dtype)
        lines.append(f"acc += {weight} * {rules.cast(element, 'float64')}")
    stored = rules.store(rules.cast("acc", dtype), dtype)
    return [*lines, f"{dest}[{out}] = {stored}"]
