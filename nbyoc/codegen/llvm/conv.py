"""conv in the llvm kernel, with its epilogue (the elementwise ops after it, a bias,
an activation, a residual add) applied to each block of output while it is in cache.

Two ways, chosen per call by its sizes:

- **direct**: one task per (image, output channel) plane, in parallel; each input
  channel of its group is copied into zero-padded stride phases (``phases``), and
  each row of kernel taps is then one call of a tap row (``runtime.llvm.tap_rows``,
  vector registers summing the row's taps, a masked tail) over the plane's flat
  positions. Every size is read at run time: one function serves every shape of its
  structure. Depthwise and small convs run this way.
- **tiles**: per image and group, ``w (M, C*taps) @ columns (C*taps, positions)``
  by ``nbyoc.runtime.llvm.tiles``, the columns gathered first (im2col; a 1x1 conv with
  unit strides and no padding reads its input as it is; other convs of strides up to
  ``WRITTEN_STEP`` copy the input once into zero-padded stride phases, compute over
  rows of the phases' width, and never form the columns: each channel and tap's row
  of them is a contiguous run of a phase plane, which indirect tiles read in place,
  ``_wide_tiled_conv``; larger strides, and strided 1x1 convs, gather per output row,
  ``_im2col``). One task per image, group,
  block of output channels and block of output positions: an image is cut into blocks
  of positions when there are fewer images than ``TASKS``, and a small map's output
  channels into blocks when its positions give the threads too few tasks
  (``_channel_block``), so a single image still uses every thread. Taken for convs
  with enough channels (``uses_tiles``).

A tiled conv of constant weights on a small map with a deep product computes its
output transposed, with its output channels along the tiles' vector lanes and its
weights packed into panels once, at lowering (``channels_on_lanes``). The packed,
blocked product of large matmuls (``gemm_blocks``, its operands copied at every call)
is not used: on the conv's own product shapes the tiles reading the operands in place
ran at 90% of the FMA peak (one thread, 512 x 4608 @ 4608 x 63, the 7 x 7 512-channel
conv's, 106 GFLOP/s in place, 71 blocked; 64 x 576 @ 576 x 232, a 56 x 56 64-channel
conv's block, 105 and 75): what such convs lose is elsewhere (columns computed and
dropped, the gather).

Float32 and float64 convs whose operands share the dtype; the rest (float16,
mixed dtypes) run on the host.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.nodes import Call, Constant
from ...runtime.llvm.target import tap_row_name, tile_name, tile_shape, worker_threads
from .depthwise import depthwise_conv, runs_depthwise
from .gemm import tile_product
from .gemm_blocks import K_PART, tail_rows
from .loops import outer, subscript, tap_outputs
from .phase_planes import PhasePlanes
from .phases import Phases
from .sizes import Sizes, ceil_div, value
from .stages import Lead, StageBody

#: A conv runs as tiles when each group has at least this many output channels and
#: this many multiply-adds per output (input channels x taps) (measured on PP-OCR's
#: classifier: its 1x1 convs of 16 to 200 channels ran 2.4x faster as a matrix
#: product, its 8-channel ones and depthwise ones faster direct) ...
TILE_MIN_CHANNELS = 16
TILE_MIN_DEPTH = 16
#: ... or, for a unit-stride conv wider than 1x1 (which runs over wide rows, see
#: ``_wide_tiled_conv``), this many output channels (the CNN model's 3x3 convs of 8
#: channels: 2.1x and 2.5x faster than direct).
WIDE_MIN_CHANNELS = 4
#: Tasks a tiled conv aims at (images x groups x position blocks), and the fewest
#: tile columns a block of positions holds.
TASKS = 16
MIN_BLOCK_TILES = 4
#: The most bytes a gathered conv's block of columns (``_tiled_conv``), or a wide conv's
#: block of phase planes and wide output rows (``_wide_tiled_conv``), takes: they then
#: stay in a core's L2 between the copy that writes them and the tiles that read them.
COLUMNS_BYTES = 1 << 20
#: A tiled conv splits its output channels into blocks until it has this many tasks
#: per worker thread (``_channel_block``): two, so that blocks of positions of unequal
#: sizes still share out evenly (ResNet-50's 1x1 1024 -> 256 conv on 14 x 14: blocks
#: of 4 and 3 tiles of columns; on 2 threads 0.71 ms as 2 tasks, 0.65 ms as 4).
CHANNEL_TASKS_PER_THREAD = 2
#: A tiled conv of constant weights on a map of at most this many output positions,
#: summing at least this many products per output (input channels x taps), computes
#: its output transposed, its channels along the vector lanes (``channels_on_lanes``).
#: Measured (2-core AMD EPYC, AVX-512, the other core busy with other work; one thread,
#: both ways compiled in one process and called in turn, medians; channels on columns
#: as before / on the lanes), on 7 x 7 maps: 3x3 512 -> 512 2.88 / 2.71 ms, 1x1
#: 2048 -> 512 1.35 / 1.11, 3x3 stride 2 256 -> 512 (from 14 x 14) 1.61 / 1.36; but
#: 1x1 512 -> 2048 (depth 512) even (1.27 / 1.25 in one run, 1.44 / 1.56 in another);
#: on 2 threads, against the columns way in channel blocks (``_channel_block``), 3x3
#: 512 -> 512 1.68 / 1.42 ms, 1x1 2048 -> 512 0.71 / 0.59, 3x3 stride 2 1.20 / 0.75;
#: on 14 x 14 maps mixed (1x1 1024 -> 256 1.19 / 0.98, but 1x1 256 -> 1024
#: 1.14 / 1.57, 3x3 128 0.71 / 0.82), on 16 x 16 slower (3x3 64: 0.26 / 0.33). (A
#: shallow product's time goes to the copy of ``products`` into the output's planes
#: and to C, read and written once per block of K; 196 positions fill 7 panels of 32
#: columns to 88%, 49 positions 2 panels to 77%.) A map of fewer positions than a
#: tile's columns takes the lanes at any depth: the columns way computes a whole tile
#: for them (one thread, loaded, constant weights, with bias and ReLU, columns / lanes:
#: a squeeze-excitation's 1x1 convs on a 1 x 1 map 480 -> 120 35 / 5.0 us, 120 -> 480
#: 37 / 5.8 us; MobileNetV3's 1x1 512 -> 1280 head 379 / 41 us; 256 -> 256 on 2 x 2
#: 40 / 8.5 us, on 4 x 4 47 / 35 us).
LANES_MAX_POSITIONS = 64
LANES_MIN_DEPTH = 1024
#: A conv of at least this many multiply-adds runs its tasks in parallel however small
#: its output (``StageRule.parallel_work``; by its output's size alone, ResNet-18's
#: 512-channel 3x3 conv on a 7x7 map, 25088 outputs, ran on one thread). Measured
#: (loaded, 2-core AMD EPYC, serial / parallel side by side, ReLU after): 3x3 convs on
#: 7x7 and 8x8 maps of 32 channels (0.6 M multiply-adds) 24 / 45 us, 64 channels
#: (1.8 M) 86 / 136 us, 128 channels (7.2 M) 202 / 147 us, 256 channels (29 M) 724 /
#: 473 us; waking the second thread cost tens of microseconds there.
PARALLEL_MIN_WORK = 1 << 22
#: The largest stride or dilation a tiled conv's gather has written into its code:
#: 1 and 2 (most convs; LLVM vectorises a copy of step 1 or 2), larger ones read at
#: run time, so that convs differing only in them share a stage function (an audio
#: model's constant-Q filter bank is 1 x 256 windows at hops of 2 to 256: eight stage
#: functions of 0.5 s each before).
WRITTEN_STEP = 2


def conv_supported(call: Call) -> bool:
    """Whether llvm lowers this conv: float32 or float64, every operand of that dtype."""
    dtype = call.type.dtype
    return dtype in ("float32", "float64") and all(a.type.dtype == dtype for a in call.args)


def uses_tiles(node: Call) -> bool:
    """Whether this conv runs as im2col + tiles (see the module docstring)."""
    w = node.args[1].type.shape
    group = node.attrs["group"]
    depth = w[1] * math.prod(w[2:])
    g = _Geometry(node, None)
    unit = all(s == 1 for s in g.strides)
    least = WIDE_MIN_CHANNELS if unit and _runs_wide(g) else TILE_MIN_CHANNELS
    return w[0] // group >= least and depth >= TILE_MIN_DEPTH


def channels_on_lanes(node: Call) -> bool:
    """Whether this tiled conv computes its output transposed, its output channels along
    the tiles' vector lanes (``_lanes_conv``): a small map (at most
    ``LANES_MAX_POSITIONS`` positions), a deep product (``LANES_MIN_DEPTH``) or fewer
    positions than a tile's columns, groups of a panel of output channels or more, and
    constant weights (packed once, at lowering: ``conv_packs``)."""
    w = node.args[1]
    if not isinstance(w, Constant) or not uses_tiles(node):
        return False
    cols = tile_shape(node.type.dtype)[1]
    positions = math.prod(node.type.shape[2:])
    depth = math.prod(w.type.shape[1:])
    return (
        positions <= LANES_MAX_POSITIONS
        and (depth >= LANES_MIN_DEPTH or positions < cols)
        and w.type.shape[0] // node.attrs["group"] >= cols
    )


def conv_packs(call: Call, index: int) -> np.ndarray | None:
    """What the stage takes in place of operand ``index`` when it is a constant
    (``StageRule.packs``): for a conv with its channels on the lanes
    (``channels_on_lanes``), its weights transposed, (group, input channels x taps,
    output channels of the group) cut into panels of the tile's columns, (group,
    panel, input channels x taps, tile columns), zero past the last channel: each
    panel one contiguous block, as ``gemm_blocks`` packs B per call. (Read in place,
    the rows of a 512-channel conv's transposed weights lie 2 KiB apart and fall in two
    L1 sets: 8.4 ms against 2.8 ms, one thread.) None otherwise.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (1, 1024, 4, 4))
    >>> w = nbyoc.const(np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024, 1, 1))
    >>> packed = conv_packs(nbyoc.conv(x, w), 1)
    >>> cols = tile_shape("float32")[1]
    >>> packed.shape == (1, -(-64 // cols), 1024, cols), packed[0, 0, 1, :3].tolist()
    (True, [1.0, 1025.0, 2049.0])
    """
    if index != 1 or not channels_on_lanes(call):
        return None
    w = np.asarray(call.args[1].data)
    group, cols = call.attrs["group"], tile_shape(call.type.dtype)[1]
    rows = w.reshape(group, w.shape[0] // group, -1)
    depth, panels = rows.shape[2], -(-rows.shape[1] // cols)
    packed = np.zeros((group, panels, depth, cols), w.dtype)
    for p in range(panels):
        chunk = rows[:, p * cols : (p + 1) * cols]
        packed[:, p, :, : chunk.shape[1]] = chunk.transpose(0, 2, 1)
    return packed


def _runs_wide(g: _Geometry) -> bool:
    """Whether a tiled conv runs over wide rows (``_wide_tiled_conv``): not a pointwise
    one (its input is its columns), and of strides written into the code
    (``WRITTEN_STEP``: the phases are the code's structure). A 1x1 conv of stride 2
    gathers its columns (``_im2col``): one phase, a copy of it and a copy of that into
    the columns, where the gather copies once.

    Strided convs over stride phases against gathered columns (loaded 2-core AMD EPYC,
    AVX-512, both compiled in one process and called in turn, in rotating order, with
    ONNX Runtime, 31 calls each, medians, wall ms; ``bench/strided_side_by_side.py``;
    the process had about one core, its CPU time within 1% of the wall time): the
    audio CNN's 3x3/2 32 -> 64 on 900 x 161 26.2 -> 19.4 (ORT 26.1); ResNet's 7x7/2
    stem 4.22 -> 2.82 (ORT 2.35); MobileNetV2's 3x3/2 stem 0.62 -> 0.41 (ORT 0.31);
    ResNet-18's 3x3/2 64 -> 128 on 56 x 56 1.69 -> 1.44 (ORT 1.10). On one thread,
    the audio conv's stage spent 13 of its 22 ms in the product (104 GFLOP/s, the
    FMA peak's 90%) and 6 in the copy into phases, then 3.6 with the phases of a row
    copied together (``phase_planes``)."""
    if g.pointwise() or any(s > WRITTEN_STEP for s in g.strides):
        return False
    return all(s == 1 for s in g.strides) or any(k > 1 for k in g.kernel)


class _Geometry:
    """The sizes of one conv call, by spatial axis. With ``sizes``, the images, channels
    and spatial extents are read at run time (``sizes.Dim``): the code is the same for
    every conv of one structure. The structure, written into the code: the kernel's
    window, strides, dilations and pads (LLVM unrolls the tap loops of the im2col
    gather, and each tap's valid range then folds; a direct conv's tap row is built
    for its window's last axis), whether it is grouped, and the rank and dtype."""

    def __init__(self, node: Call, sizes: Sizes | None = None):
        x, w = node.args[:2]
        attrs = node.attrs

        def dims(values):
            return tuple(values) if sizes is None else sizes.dims(values)

        group = attrs["group"]
        self.n, self.cg, self.mg = dims(
            (x.type.shape[0], w.type.shape[1], w.type.shape[0] // group)
        )
        # (grouped or not is structure; how many groups a size: depthwise convs of 32
        # and of 88 channels are one function)
        self.group = group if group == 1 else dims((group,))[0]
        self.c, self.m = self.cg * self.group, self.mg * self.group
        self.spatial = dims(x.type.shape[2:])
        self.kernel = w.type.shape[2:]
        self.out = dims(node.type.shape[2:])
        self.strides, self.dilations = attrs["strides"], attrs["dilations"]
        self.begins = attrs["pads"][: len(self.kernel)]
        self.ends = attrs["pads"][len(self.kernel) :]
        self.taps = math.prod(self.kernel)
        self.positions = math.prod(self.out)
        self.sizes = sizes

    def read_steps(self) -> None:
        """Read the strides and dilations above ``WRITTEN_STEP`` at run time (the tiled
        conv's gather, ``_im2col``: it only indexes the input with them)."""
        if self.sizes is not None:
            self.strides, self.dilations = (
                tuple(v if v <= WRITTEN_STEP else self.sizes.dim(v) for v in values)
                for values in (self.strides, self.dilations)
            )

    def valid_range(self, d: int, q: str) -> list[str]:
        """Lines binding ``lo{d}``/``hi{d}``: the output positions along axis ``d`` whose
        input position for tap ``q`` lies inside the input (not in the padding)."""
        s, p, dil = self.strides[d], self.begins[d], self.dilations[d]
        return tap_outputs((f"lo{d}", f"hi{d}"), q, self.out[d], self.spatial[d] - 1 + p, s, p, dil)

    def position(self, d: int, o: str, q: str) -> str:
        """The input position along axis ``d`` of output ``o`` and tap ``q``."""
        s, p, dil = self.strides[d], self.begins[d], self.dilations[d]
        return f"{o} * {s} - {p} + {q} * {dil}"

    def pointwise(self) -> bool:
        """A 1x1 conv with unit strides and no padding: a product with the input as is
        (the output's extents are then the input's, whatever they are)."""
        return (
            all(k == 1 for k in self.kernel)
            # (by value: a stride above WRITTEN_STEP is read at run time, ``read_steps``)
            and all(value(s) == 1 for s in self.strides)
            and not any(self.begins)
            and not any(self.ends)
        )

    def dim(self, value: int):
        """A size the code reads at run time, chosen here from the others (a block)."""
        return value if self.sizes is None else self.sizes.dim(value)


def conv_stage(node: Call, sources, dest: str, parallel: bool, epilogue=None) -> StageBody:
    """conv of ``sources`` (x, w and perhaps a bias) into ``dest``, as a stage function's
    body; ``epilogue``, given the names of a plane's (image, channel) indices, returns
    the lines to run on that plane once it is written."""
    direct = not uses_tiles(node)
    g = _Geometry(node, Sizes())
    if epilogue is not None:
        epilogue = epilogue.sized((g.n, g.m, *g.out))
    if direct and runs_depthwise(node):
        body = depthwise_conv(node, g, sources, dest, epilogue)
    elif direct:
        body = _direct_conv(node, g, sources, dest, epilogue)
    elif channels_on_lanes(node):
        body = _lanes_conv(node, g, sources, dest, epilogue, parallel)
    elif _runs_wide(g):
        body = _wide_tiled_conv(node, g, sources, dest, epilogue, parallel)
    else:
        body = _tiled_conv(node, g, sources, dest, epilogue, parallel)
    body.sizes = g.sizes
    return body


def row_stride(width) -> int:
    """The row length of the gathered columns of ``width`` positions: the power of two
    at or above it, written into the code. The tiles then read rows a constant distance
    apart: read at run time it cost 10-20% (single thread, a 3x3 stride-2 conv of
    2 x 32 x 56 x 56: 1.28 ms against 1.06 ms with the width written in, 1.01 ms with
    this), while a power of two keeps the code shared across sizes. (Not for the wide
    rows of ``_wide_tiled_conv``: their widths are thousands, and rows a power of two
    apart fall in the same cache sets: a 16 x 24 x 96 conv ran 20% slower.)"""
    # (by comparisons, not bit_length: a symbolic width's template keeps each as a guard,
    # so it serves every width of the same power of two)
    width, bits = value(width), 0
    while width > 1 << bits:
        bits += 1
    return 1 << bits


def _indent(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + line for line in lines]


def _direct_conv(node, g: _Geometry, sources, dest, epilogue) -> StageBody:
    """One task per (image, output channel) plane, its sizes read at run time: each input
    channel of its group is copied into stride phases (``phases``; a 1x1 conv of unit
    strides reads it as it is), and each row of taps is one call of a tap row
    (``runtime.llvm.tap_rows``) over the plane's flat positions."""
    x_name, w_name, *bias = sources
    dtype = node.type.dtype
    k = len(g.kernel)
    weights = f"{w_name}_flat"
    setup = [
        f"{weights} = {w_name}.reshape({g.m * g.cg * g.taps})",
        *(epilogue.setup if epilogue is not None else []),
    ]
    body = [f"n = task // {g.m}", f"m = task % {g.m}"]
    channel = f"m // {g.mg} * {g.cg} + ci" if value(g.group) > 1 else "ci"
    # (a row of taps along the last axis: its weights from w[m, ci, q0, ..., 0])
    row = " + ".join(
        [f"(m * {g.cg} + ci) * {g.taps}"]
        + [f"q{d} * {math.prod(g.kernel[d + 1 :])}" for d in range(k - 1)]
    )
    start = f"{bias[0]}[m]" if bias else "0.0"
    if g.pointwise():  # (the output plane is the accumulator, the input the phase)
        intrinsic = tap_row_name(dtype, 1, 1, 1)
        intrinsics = {intrinsic}
        body += [
            f"acc = {dest}[n, m].reshape({g.positions})",
            "for t in range(acc.shape[0]):",
            f"    acc[t] = {start}",
            f"for ci in range({outer(g.cg)}):",
            f"    xf = {x_name}[n, {channel}].reshape({g.positions})",
            f"    {intrinsic}(acc, 0, xf, 0, {weights}, m * {g.cg} + ci, {g.positions})",
        ]
    else:
        phases = Phases(g.kernel, g.strides, g.dilations, g.begins, g.spatial, g.out)
        setup += phases.setup(dtype)
        body += ["for t in range(acc.shape[0]):", f"    acc[t] = {start}"]
        body += [f"for ci in range({outer(g.cg)}):", f"    c = {channel}"]
        body += _indent(phases.copy(x_name, ["n", "c"]), 1)
        taps, intrinsics = phases.taps(dtype, weights, row)
        body += _indent(taps, 1)
        body += phases.rows(dest, ["n", "m"])
    if epilogue is not None:
        body += epilogue(["n", "m"])
    n, m, work = value(g.n), value(g.m), value(g.positions * g.cg) * g.taps
    return StageBody(body, n * m, work, setup, intrinsics, lead=Lead(n, 1, m))


def _position_block(g: _Geometry, cols: int, depth_bytes: int) -> int:
    """Output positions per task: a whole image when its groups give TASKS tasks, else
    a multiple of the tile's columns (at least MIN_BLOCK_TILES of them), and for a
    gathered conv no more than fit ``COLUMNS_BYTES`` at ``depth_bytes`` a column (a
    3x3 stride-2 conv of 64 channels over 900 x 161 gathered 9 MB per task). Not counting
    the images keeps the block, and with it the row length of the gathered columns
    written into the code (``row_stride``), the same at every batch size: counting them,
    a batch of 2 made a new stage function of each tiled conv (0.5 to 1.3 s each), and
    then ran the same work in fewer, larger tasks."""
    positions = value(g.positions)
    blocks = -(-TASKS // value(g.group))
    tiles = -(-positions // cols)
    most = tiles if g.pointwise() else max(1, COLUMNS_BYTES // (cols * depth_bytes))
    if blocks <= 1 and tiles <= most:
        return positions
    return cols * max(MIN_BLOCK_TILES, min(most, -(-tiles // blocks)))


def _tiled_conv(node, g: _Geometry, sources, dest, epilogue, parallel: bool) -> StageBody:
    x_name, w_name, *bias = sources
    dtype = node.type.dtype
    g.read_steps()
    depth = g.cg * g.taps
    itemsize = 8 if dtype == "float64" else 4
    block = min(
        value(g.positions), _position_block(g, tile_shape(dtype)[1], value(depth) * itemsize)
    )
    blocks = -(-value(g.positions) // block)
    channels = _channel_block(g, value(g.n * g.group) * blocks, dtype, parallel)
    blocks, block = g.dim(blocks), g.dim(block)
    setup = [
        f"{w_name}_g = {w_name}.reshape(({g.group}, {g.mg}, {depth}))",
        f"{dest}_g = {dest}.reshape(({g.n}, {g.group}, {g.mg}, {g.positions}))",
    ]
    body = [
        f"b = task % {blocks}",
        *_channel_lines(g, channels, f"task // {blocks}"),
        f"g = q % {g.group}",
        f"n = q // {g.group}",
        f"p0 = b * {block}",
        f"p1 = min({g.positions}, p0 + {block})",
        f"out_block = {dest}_g[n, g][:, p0:p1]",
    ]
    if g.pointwise():  # the input's rows are the columns
        setup.append(f"{x_name}_g = {x_name}.reshape(({g.n}, {g.group}, {g.cg}, {g.positions}))")
        columns = f"{x_name}_g[n, g][:, p0:p1]"
    else:
        setup.append(f"columns = np.empty(({depth}, {row_stride(block)}), np.{dtype})")
        body += _im2col(g, x_name)
        columns = "columns"
    arrays = (f"{w_name}_g[g]", columns, "out_block")
    lines, imports = tile_product(dtype, arrays, (g.mg, depth, "p1 - p0"), "m0", "m1")
    body += lines
    planes = [f"for m in range(g * {g.mg} + m0, g * {g.mg} + m1):"]
    if bias:
        flat = f"{dest}_g[n, g, m - g * {g.mg}]"
        planes += [
            "    for position in range(np.uint64(p0), np.uint64(p1)):",
            f"        {flat}[position] += {bias[0]}[m]",
        ]
    if epilogue is not None:
        planes += ["    " + line for line in epilogue(["n", "m"], ("p0", "p1"))]
    if len(planes) > 1:
        body += planes
    tasks = value(g.n * g.group * blocks * channels.blocks)
    setup += epilogue.setup if epilogue is not None else []
    lead = Lead(value(g.n), 1, tasks // value(g.n))
    return StageBody(body, tasks, value(block * depth * channels.rows), setup, imports, lead)


def _wide_tiled_conv(node, g: _Geometry, sources, dest, epilogue, parallel: bool) -> StageBody:
    """A conv as tiles over *wide* rows: the input rows a block of output rows reads are
    copied, per channel, into zero-padded stride phases (``phase_planes``: at unit
    strides one phase, the padded input; the block's own planes, reused by the thread's
    next task), and an output position ``o`` and tap ``q`` then read the tap's phase
    plane at ``flat(o) + offset(q)``, with ``flat`` the index in the plane. Computing
    the output over rows of the plane's pitch (the columns past the output's width are
    computed and dropped) makes each tap's row of the column matrix one contiguous run
    of a plane, which the tiles read where it lies (``tile_*_rows``, at ``offsets``)
    instead of one short copy per output row: on the CNN model's 3x3 convs of 16 x 16
    and 8 x 8 images the im2col was most of the conv's time, and a strided conv's
    im2col read its input with a stride per tap and row (``_im2col``; measured against
    it at ``_runs_wide``). Copying those runs into a column matrix first (this
    function's way until 2026-11-29) cost a 128 -> 64 3x3 conv over 900 x 161 352 ms
    against 261 ms read in place, and an 8-channel 3 x 39 window 14.1 against 6.9 ms
    (one thread, loaded).

    Blocks of output rows (the first spatial axis) are the tasks beside images and
    groups; the dropped columns cost ``pitch / width`` more multiply-adds."""
    x_name, w_name, *bias = sources
    dtype = node.type.dtype
    k = len(g.kernel)
    depth = g.cg * g.taps
    planes = PhasePlanes(g.kernel, g.strides, g.dilations, g.begins, g.spatial, g.out)
    stride = planes.pitches()
    itemsize = 8 if dtype == "float64" else 4
    threads = worker_threads() if parallel else 1
    rows = _wide_block_rows(g, planes, itemsize, tile_shape(dtype)[1], threads)
    blocks = -(-value(g.out[0]) // rows)
    channels = _channel_block(g, value(g.n * g.group) * blocks, dtype, parallel)
    blocks, rows = g.dim(blocks), g.dim(rows)
    inner = math.prod(g.out[1:])  # output positions per row of the first axis
    setup = [
        f"{w_name}_g = {w_name}.reshape(({g.group}, {g.mg}, {depth}))",
        f"{dest}_g = {dest}.reshape(({g.n}, {g.group}, {g.mg}, {g.positions}))",
        # The phase rows one block reads, per channel (``phase_planes``: each task writes
        # every position its kept outputs read, the padding's zeros included; a column
        # past the output's width, computed and dropped, may read an earlier task's).
        f"plane = np.zeros(({g.cg}, {planes.phases}, {planes.size(rows)}), np.{dtype})",
        "plane_flat = plane.reshape(-1)",
        f"wide = np.empty(({g.mg}, {rows * stride[0]}), np.{dtype})",
        # Row r of the column matrix, for channel ci and a tap, is the run of ``span``
        # values from the tap's offset in the channel's phase plane: the tiles read it
        # there (``offsets``), never copied into a matrix of its own.
        f"offsets = np.empty({depth}, np.int64)",
        f"for ci in range({outer(g.cg)}):",
    ]
    taps = [f"q{d}" for d in range(k)]
    tap_index = "ci"
    for d in range(k):
        setup += _indent([f"for q{d} in range({g.kernel[d]}):"], d + 1)
        tap_index = f"({tap_index}) * {g.kernel[d]} + q{d}"
    phase_start = f"(ci * {planes.phases} + {planes.tap_phase(taps)}) * {planes.size(rows)}"
    setup += _indent([f"offsets[{tap_index}] = {phase_start} + {planes.tap_offset(taps)}"], k + 1)
    body = [
        f"b = task % {blocks}",
        *_channel_lines(g, channels, f"task // {blocks}"),
        f"g = q % {g.group}",
        f"n = q // {g.group}",
        f"row0 = b * {rows}",
        f"row1 = min({g.out[0]}, row0 + {rows})",
        "span = (row1 - row0) * " + str(stride[0]),
        f"for ci in range({outer(g.cg)}):",
        f"    c = g * {g.cg} + ci",
        "    plane_c = plane[ci]",
        *_indent(planes.copy("plane_c", x_name, ["n", "c"]), 1),
    ]
    arrays = (f"{w_name}_g[g]", "plane_flat", "wide")
    sizes = (g.mg, depth, "span")
    lines, imports = tile_product(dtype, arrays, sizes, "m0", "m1", offsets="offsets")
    body += lines
    # Keep the output's columns of the wide rows, adding the bias. The innermost loop
    # runs over unsigned offsets (Numba wraps negative signed indices, which blocks
    # vectors) up to an opaque bound: with a constant one of 16, LLVM unrolled it into
    # scalar copies (the CNN's first conv spent 100 of its 215 us here; now 15).
    last = k - 1
    lo, hi = ("row0", "row1") if k == 1 else ("0", str(g.out[last]))
    source = [f"(o0 - row0) * {stride[0]}", *(f"o{d} * {stride[d]}" for d in range(1, k))]
    target = [f"o{d} * {math.prod(g.out[d + 1 :])}" for d in range(k)]
    source_base = " + ".join(source[:last]) or "0"
    target_base = " + ".join([*target[:last], lo])
    add = f" + {bias[0]}[g * {g.mg} + m]" if bias else ""
    keep = ["for m in range(m0, m1):", "    for o0 in range(row0, row1):"]
    for d in range(1, k - 1):
        keep.append("    " * (d + 1) + f"for o{d} in range({g.out[d]}):")
    keep += _indent(
        [
            f"source = np.uint64({source_base})",
            f"target = np.uint64({target_base})",
            f"for u in range(np.uint64(opaque({hi} - {lo}))):",
            f"    kept = wide[m, source + u * np.uint64({stride[last]})]{add}",
            f"    {dest}_g[n, g, m, target + u] = kept",
        ],
        max(2, k),
    )
    if k == 1:  # one loop over the row block's positions, not one per position
        keep = [keep[0], *(line[4:] for line in keep[2:])]
    body += keep
    if epilogue is not None:
        body += [
            f"p0 = row0 * {inner}",
            f"p1 = row1 * {inner}",
            f"for m in range(g * {g.mg} + m0, g * {g.mg} + m1):",
            *("    " + line for line in epilogue(["n", "m"], ("p0", "p1"))),
        ]
    tasks = value(g.n * g.group * blocks * channels.blocks)
    setup += epilogue.setup if epilogue is not None else []
    lead = Lead(value(g.n), 1, tasks // value(g.n))
    work = value(rows * stride[0] * depth * channels.rows)
    return StageBody(body, tasks, work, setup, imports, lead)


def _lanes_conv(node, g: _Geometry, sources, dest, epilogue, parallel: bool) -> StageBody:
    """A small map's conv with its output channels along the tiles' vector lanes:
    ``products (positions, M) = columns.T (positions, C*taps) @ wT (C*taps, M)``, the
    weights transposed once at lowering (``conv_packs``), the columns gathered as for
    ``_tiled_conv`` and read transposed (a tile reads its A with any strides: one K
    step's rows are consecutive positions, one cache line), then ``products`` copied
    into the output's planes with the bias. Positions are the tiles' rows, 12 at a time,
    where the other ways make them columns, 32 at a time: a 7 x 7 map's 49 positions
    were 64 columns (63 wide ones), 77% of them used, and are 4 tiles of rows and a
    tile of one row. Tasks: per image and group, blocks of whole tiles of positions,
    the last taking the rest (``_lanes_block``); each reads all the group's weights."""
    x_name, w_name, *bias = sources
    dtype = node.type.dtype
    g.read_steps()
    depth = g.cg * g.taps
    tile_rows = tile_shape(dtype)[0]
    block = _lanes_block(value(g.positions), tile_rows, worker_threads() if parallel else 1)
    blocks = g.dim(max(1, value(g.positions) // block))
    block = g.dim(block)
    # (the last block takes the rest: up to twice the block, less a row)
    most = row_stride(2 * block - 1)
    setup = [
        f"{dest}_g = {dest}.reshape(({g.n}, {g.group}, {g.mg}, {g.positions}))",
        f"products = np.empty(({most}, {g.mg}), np.{dtype})",
    ]
    body = [
        f"b = task % {blocks}",
        f"q = task // {blocks}",
        f"g = q % {g.group}",
        f"n = q // {g.group}",
        f"p0 = b * {block}",
        f"p1 = {g.positions} if b == {blocks} - 1 else p0 + {block}",
    ]
    if g.pointwise():  # the input's rows are the columns
        setup.append(f"{x_name}_g = {x_name}.reshape(({g.n}, {g.group}, {g.cg}, {g.positions}))")
        body.append(f"lhs = {x_name}_g[n, g][:, p0:p1].T")
    else:
        setup += [f"columns = np.empty(({depth}, {most}), np.{dtype})", "lhs = columns.T"]
        plane, gather = _plane_gather(g, x_name, dtype)
        setup += plane
        body += gather
    lines, imports = _panel_product(dtype, w_name, depth, g.mg)
    body += lines
    add = f" + {bias[0]}[g * {g.mg} + m]" if bias else ""
    body += [
        f"for m in range({outer(g.mg)}):",
        "    for r in range(p1 - p0):",
        f"        {dest}_g[n, g, m, p0 + r] = products[r, m]{add}",
    ]
    if epilogue is not None:
        body += [
            f"for m in range(g * {g.mg}, (g + 1) * {g.mg}):",
            *("    " + line for line in epilogue(["n", "m"], ("p0", "p1"))),
        ]
        setup += epilogue.setup
    tasks = value(g.n * g.group * blocks)
    lead = Lead(value(g.n), 1, tasks // value(g.n))
    return StageBody(body, tasks, value(block * depth * g.mg), setup, imports, lead)


def _plane_gather(g: _Geometry, x_name: str, dtype: str) -> tuple[list[str], list[str]]:
    """The setup lines and the lines filling ``columns`` (channel x tap, position - p0)
    for image ``n``, group ``g`` and positions ``[p0, p1)`` of a small map: the task's
    input channels are copied into zero-padded planes first (a small map's are small),
    and each row of ``columns`` (a channel and tap) is then one loop over the block's
    positions, reading the plane at the tap's offset plus the position's (``spots``,
    a table made once per call). ``_im2col`` instead cuts every output row into the
    parts left of, inside and right of the input: on a 7 x 7 map of 512 channels its
    32,000 rows of 7 values took a fifth of the conv's time."""
    k = len(g.kernel)
    padded = [n + b + e for n, b, e in zip(g.spatial, g.begins, g.ends)]
    step = [math.prod(padded[d + 1 :]) for d in range(k)]  # of the padded plane
    # (padding stays zero: each task writes only the inside)
    setup = [
        f"plane = np.zeros(({g.cg}, {math.prod(padded)}), np.{dtype})",
        f"spots = np.empty({g.positions}, np.int64)",
        f"for p in range({g.positions}):",
    ]
    current = "p"
    for d in reversed(range(k)):
        setup.append(f"    o{d} = {current} % {g.out[d]}")
        if d:
            setup.append(f"    left{d} = {current} // {g.out[d]}")
            current = f"left{d}"
    spot = " + ".join(f"o{d} * {g.strides[d] * step[d]}" for d in range(k))
    setup.append(f"    spots[p] = {spot}")
    inside = " + ".join(f"(i{d} + {g.begins[d]}) * {step[d]}" for d in range(k))
    index = ", ".join(["n", "c", *(f"i{d}" for d in range(k))])
    lines = [f"for ci in range({outer(g.cg)}):", f"    c = g * {g.cg} + ci"]
    for d in range(k):
        lines += _indent([f"for i{d} in range({g.spatial[d]}):"], d + 1)
    lines += _indent([f"plane[ci, {inside}] = {x_name}[{index}]"], k + 1)
    tap, taps = "r", []
    for d in reversed(range(1, k)):
        taps += [f"q{d} = {tap} % {g.kernel[d]}", f"t{d} = {tap} // {g.kernel[d]}"]
        tap = f"t{d}"
    taps.append(f"q0 = ({tap}) % {g.kernel[0]}")
    offset = " + ".join(f"q{d} * {g.dilations[d] * step[d]}" for d in range(k))
    lines += [
        f"for r in range({outer(g.cg * g.taps)}):",
        f"    ci = r // {g.taps}",
        *_indent(taps, 1),
        f"    at = {offset}",
        "    for j in range(p1 - p0):",
        "        columns[r, j] = plane[ci, at + spots[p0 + j]]",
    ]
    return setup, lines


def _panel_product(dtype: str, packed: str, depth, channels) -> tuple[list[str], set[str]]:
    """Lines computing ``products[:p1 - p0] = lhs @ wT`` for group ``g``, ``wT`` packed
    in ``packed`` (``conv_packs``), and the tiles they import: over K in blocks of
    ``K_PART`` (one panel's block, 32 KiB, stays in L1 while the task's tiles of rows
    pass; the block of ``lhs`` in L2), the first block storing, the others adding.
    Full panels have their column count written in (the tile's masks fold away), the
    last part panel its remainder."""
    tile_rows, cols = tile_shape(dtype)
    full, rest = channels // cols, value(channels) % cols

    def rows(valid: str, accumulate: bool) -> list[str]:
        tile = tile_name(dtype, tile_rows, cols, accumulate)
        args = f"lhs_k, r, rhs, 0, kl, out_p, r, {valid}"
        lines = ["r = 0", f"while r + {tile_rows} <= p1 - p0:", f"    {tile}({args})"]
        lines.append(f"    r += {tile_rows}")
        for count in tail_rows(tile_rows):
            tail = tile_name(dtype, count, cols, accumulate)
            lines += [f"if r + {count} <= p1 - p0:", f"    {tail}({args})", f"    r += {count}"]
        return lines

    def panel(p: str, valid: str) -> list[str]:
        return [
            f"rhs = {packed}[g, {p}, k0:k0 + kl]",
            f"out_p = products[:, {p} * {cols}:]",
            "if kb == 0:",
            *_indent(rows(valid, False), 1),
            "else:",
            *_indent(rows(valid, True), 1),
        ]

    lines = [
        f"for kb in range({ceil_div(depth, K_PART)}):",
        f"    k0 = kb * {K_PART}",
        f"    kl = min({K_PART}, {depth} - k0)",
        "    lhs_k = lhs[:, k0:k0 + kl]",
    ]
    if value(full):
        lines += [f"    for p in range({outer(full)}):", *_indent(panel("p", str(cols)), 2)]
    if rest:
        lines += _indent(panel(str(full), str(rest)), 1)
    imports = {
        tile_name(dtype, count, cols, accumulate)
        for count in (tile_rows, *tail_rows(tile_rows))
        for accumulate in (False, True)
    }
    return lines, imports


def _lanes_block(positions: int, tile_rows: int, threads: int) -> int:
    """Positions per task of a conv with its channels on the lanes (``_lanes_conv``) on
    ``threads`` threads: whole tiles of rows, one block per thread (each task reads
    all of its group's weights, so no more), the last block taking the rows left over
    (a block of them alone would leave one thread a single short tile: 49 positions on
    2 threads are 24 and 25, not 24, 24 and 1).

    >>> _lanes_block(49, 12, 2), _lanes_block(49, 12, 1), _lanes_block(8, 12, 2)
    (24, 49, 8)
    """
    tiles = max(1, positions // tile_rows)
    wanted = max(1, min(tiles, threads))
    return tile_rows * (tiles // wanted) if wanted > 1 else positions


def _wide_block_rows(
    g: _Geometry, planes: PhasePlanes, itemsize: int, cols: int, threads: int = 1
) -> int:
    """Output rows per task of a wide conv (``_wide_tiled_conv``): few enough that the
    block's phase planes (every input channel of its group) and its wide output rows
    fit in ``COLUMNS_BYTES`` and the images and groups make ``TASKS`` tasks, enough for
    ``MIN_BLOCK_TILES`` tiles of ``cols`` columns; then as many more as even out the
    ``threads``' work (``_balanced_rows``). (When the tiles read a copied column
    matrix, 9 times the planes for a 3x3 window, a 128-channel conv over 161 columns
    took blocks of one row: a sixth of its tiles were its last, 3 columns wide.)

    >>> import nbyoc
    >>> x = nbyoc.var("x", (1, 128, 900, 161))
    >>> y = nbyoc.conv(x, nbyoc.var("w", (64, 128, 3, 3)), pads=(1, 1, 1, 1))
    >>> g = _Geometry(y)
    >>> planes = PhasePlanes(g.kernel, g.strides, g.dilations, g.begins, g.spatial, g.out)
    >>> _wide_block_rows(g, planes, 4, 32)  # (128 + 64) x 163 x 4 bytes a row
    7
    """
    out0 = value(g.out[0])
    wanted = -(-TASKS // (value(g.n) * value(g.group)))
    rows = -(-out0 // wanted)
    pitch = value(planes.pitches()[0])
    # planes: channels x phases x ((rows + reach) x pitch + slack); wide rows: rows x pitch
    plane_channels = value(g.cg) * planes.phases
    fixed = plane_channels * (planes.reach[0] * pitch + value(planes.slack()))
    per_row = (plane_channels + value(g.mg)) * pitch
    most = max(1, (COLUMNS_BYTES // itemsize - fixed) // per_row)
    rows = min(out0, max(min(rows, most), -(-MIN_BLOCK_TILES * cols // pitch)))
    images = value(g.n) * value(g.group)
    return _balanced_rows(out0, rows, min(out0, max(rows, most)), pitch, cols, images, threads)


#: Block choices whose busiest thread computes at most this much more than the least
#: busy choice's count as equal, and the one of the most tasks is taken (slack for a
#: thread that falls behind): a 56 x 56 map then takes 8 blocks of 7 rows (52 tiles'
#: columns a thread) rather than 2 of 28 (51, and its planes past the L2).
BALANCE_SLACK = (103, 100)  # (as a ratio of integers: sizes may be symbols here)


def _balanced_rows(
    out0: int, least: int, most: int, pitch: int, cols: int, images: int, threads: int
) -> int:
    """Rows per block, from ``least`` to ``most``, that finish soonest on ``threads``
    threads: the fewest tile columns (``cols`` a tile, ``pitch`` a wide row) the busiest
    thread computes when the ``images`` x blocks tasks are shared out evenly, the rows
    evened out over the blocks (``BALANCE_SLACK``: near-ties go to more blocks). A small
    map's blocks were ragged: a 20-row map of pitch 22 took blocks of 6 rows (5 tiles
    each) and a last of 2, and one thread computed 10 tiles to the other's 7; in 4
    blocks of 5 each computes 8 (a 64 -> 64 3x3 conv on 20 x 20, 2 threads: 0.236 ->
    0.194 ms).

    >>> _balanced_rows(20, 6, 20, 22, 32, 1, 2)  # (see above; 2 tasks a thread)
    5
    >>> _balanced_rows(56, 4, 35, 58, 32, 1, 2)  # (see BALANCE_SLACK)
    7
    """

    def cost(rows: int) -> int:
        blocks = -(-out0 // rows)
        even = -(-out0 // blocks)
        return -(-images * blocks // threads) * -(-even * pitch // cols)

    # At least two tasks a thread where the map has rows for them: with one each, a 40 x
    # 40 map of 32 channels took 0.24 ms against 0.19 in 8 blocks (a thread that
    # wakes late finds no task left to take, and the other runs both).
    tasks_wanted = -(-2 * threads // images)
    most = min(most, max(least, out0 // tasks_wanted))
    candidates = range(least, most + 1)
    fewest = min(cost(rows) for rows in candidates)
    slack, whole = BALANCE_SLACK
    best = next(rows for rows in candidates if cost(rows) * whole <= fewest * slack)
    return -(-out0 // -(-out0 // best))  # (as equal as they go, in as many blocks)


class _ChannelBlock:
    """A tiled conv's output channels per task (``rows``) and the blocks of them a group's
    channels make (``blocks``), both read at run time."""

    def __init__(self, g: _Geometry, rows: int):
        self.blocks = g.dim(-(-value(g.mg) // rows))
        self.rows = g.dim(rows)


def _channel_block(g: _Geometry, tasks: int, dtype: str, parallel: bool) -> _ChannelBlock:
    """How a tiled conv's tasks share its output channels, given the ``tasks`` its images,
    groups and blocks of positions make, and whether they run ``parallel`` (if not: in
    one block). Which dimension the threads split, per conv:

    - images, when the batch gives every worker thread one (each task then has all of
      an image's positions or its blocks);
    - blocks of positions, when the map has positions enough (``_position_block``,
      ``_wide_block_rows``: at least ``MIN_BLOCK_TILES`` tiles of columns each);
    - blocks of output channels (multiples of the tile's rows), when those give fewer
      than ``CHANNEL_TASKS_PER_THREAD`` tasks per worker thread: a small map with many
      channels.

    Measured (loaded, 2-core AMD EPYC, AVX-512, medians): ResNet-18's 3x3 512 -> 512
    conv on a 7x7 map was one task (7 rows < 4 tiles of 32 columns): 2.79 ms on 2
    threads, 2.83 ms on one, 0.39x ONNX Runtime; in 4 channel blocks 1.61 ms on 2
    threads. ResNet-50's 1x1 512 -> 2048 on 7x7 likewise (1.32 ms on 2 threads, 1.28 on
    one; split, 0.74 ms). Each channel block of a gathered conv gathers its columns
    again: on the 7x7 512-channel conv, one thread, 2.83 ms in one block, 2.96 in 2,
    3.05 in 4, 3.24 in 8: hence only as many as the threads need.
    """
    mg, tile_rows = value(g.mg), tile_shape(dtype)[0]
    tiles = -(-mg // tile_rows)
    wanted = -(-CHANNEL_TASKS_PER_THREAD * worker_threads() // max(1, tasks)) if parallel else 1
    wanted = max(1, min(tiles, wanted))
    return _ChannelBlock(g, min(mg, tile_rows * -(-tiles // wanted)))


def _channel_lines(g: _Geometry, channels: _ChannelBlock, index: str) -> list[str]:
    """Lines binding the block of its group's output channels ``[m0, m1)`` of the task
    whose index among the images, groups and channel blocks is ``index``, and ``q``, its
    (image, group). The channel blocks are outside the position blocks: a thread's
    consecutive tasks then take one block of channels at all positions, so that two
    threads share a 14 x 14 map of two blocks of 4 and 3 tiles of columns evenly."""
    return [
        f"m0 = ({index}) % {channels.blocks} * {channels.rows}",
        f"m1 = min({g.mg}, m0 + {channels.rows})",
        f"q = ({index}) // {channels.blocks}",
    ]


def _im2col(g: _Geometry, x_name: str) -> list[str]:
    """Lines filling ``columns`` (channel x tap, position - p0) for image ``n``, group
    ``g`` and the output positions ``[p0, p1)``; positions in the padding get 0. Each
    output row is cut to the block, then into the part left of the input (zeros), the
    part inside (copies) and the part right of it (zeros): no test per element."""
    k = len(g.kernel)
    last = k - 1
    width = g.out[last]
    lines = [f"for r in range({outer(g.cg * g.taps)}):", f"    c = g * {g.cg} + r // {g.taps}"]
    tap, taps = "r", []
    for d in reversed(range(1, k)):
        taps += [f"q{d} = {tap} % {g.kernel[d]}", f"t{d} = {tap} // {g.kernel[d]}"]
        tap = f"t{d}"
    taps.append(f"q0 = ({tap}) % {g.kernel[0]}")
    lines += _indent([*taps, *g.valid_range(last, f"q{last}")], 1)
    row = [f"base = row * {width}"]
    current = "row"
    for d in reversed(range(k - 1)):  # the output row's leading positions
        row.append(f"o{d} = {current} % {g.out[d]}" if d else f"o{d} = {current}")
        if d:
            row.append(f"row{d} = {current} // {g.out[d]}")
            current = f"row{d}"
    # ``at{d}``, the input position: ``p0`` and ``p1`` are the block's bounds.
    row += [f"at{d} = {g.position(d, f'o{d}', f'q{d}')}" for d in range(k - 1)]
    outside = " or ".join(f"at{d} < 0 or at{d} >= {g.spatial[d]}" for d in range(k - 1))
    reads = [*(f"at{d}" for d in range(last)), g.position(last, f"o{last}", f"q{last}")]
    to = f"columns[r, base - p0 + o{last}]"
    row += [
        "s = max(p0 - base, 0)",
        f"e = min(p1 - base, {width})",
        f"zeros = e if {outside or 'False'} else min(e, max(s, lo{last}))",
        f"copies = max(zeros, min(e, hi{last}))",
        f"for o{last} in range(s, zeros):",
        f"    {to} = 0.0",
        f"for o{last} in range(zeros, copies):",
        f"    {to} = {x_name}[{subscript(['n', 'c', *reads])}]",
        f"for o{last} in range(copies, e):",
        f"    {to} = 0.0",
    ]
    lines += _indent([f"for row in range(p0 // {width}, (p1 - 1) // {width} + 1):"], 1)
    return lines + _indent(row, 2)
