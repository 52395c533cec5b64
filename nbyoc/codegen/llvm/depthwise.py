"""Depthwise 2-D convs in the llvm kernel: each output channel reads one input channel
(``group`` = input channels, output channels a multiple of them; or one input channel
in all), with the conv's epilogue run on each chunk of rows while it is in cache.

One task per image, block of input channels and block of output rows. A task
copies the input rows a chunk of output rows reads into a buffer of *phases* (the
padding written as zeros, each stride's phases apart: ``window_rows``' layout, so
that every tap reads contiguously), then computes each output channel of that input
channel from it with ``runtime.llvm.window_rows``: every tap of a vector of outputs
summed in registers, stored once, straight into the output (``ROWS`` rows at a
time, sharing the input vectors they both read). A narrow map (``flat_rows``) is
computed over the buffer's padded rows instead, flat, and its columns copied out:
a row of 7 outputs would fill 7 of a vector's 16 lanes.

Why not the direct conv (``conv._direct_conv``), which ran them before: it added
each row of taps into a plane-sized accumulator (a load and a store of it per tap
row, 16% of the FMA peak on a 112x112 plane), copied the plane out, and ran the
epilogue over the whole plane after. Measured on the 2-core Zen 4 (AVX-512), a
whole call of Conv + bias + Relu of MobileNetV2 (nbyoc's old and new kernel and ONNX
Runtime side by side in one process, medians of 300 calls, machine loaded by other
work, us): 32 channels 112x112 3x3: 317 -> 177 (ONNX Runtime 176); 144 channels
56x56 3x3 stride 2: 255 -> 198 (119); 960 channels 7x7 3x3: 210 -> 109 (67). What
is left is mostly the copy of the input (144 x 56 rows dealt into phases at ~5 ns a
row) and, on 7x7 maps, the work per channel (copy, conv, copy out, epilogue: ~90 ns
a channel on one core).

Sizes are read at run time (``sizes.Dim``); the window, strides, dilations and pads
are written into the code, and so is the form (flat or row by row).
"""

from __future__ import annotations

from ...ir.nodes import Call
from ...runtime.llvm.target import deal_row_name, window_rows_name
from ...runtime.llvm.window_rows import DEAL_STRIDES
from .sizes import ceil_div, value
from .stages import Lead, StageBody

#: Output rows one call of ``window_rows`` computes: four rows of a 3x3 window read 6
#: input rows where one at a time reads 12. One 112x112 plane, one core: 4.2, 2.7,
#: 2.3 and 2.0 us for 1, 2, 3 and 4 rows (4 rows: 112 GFLOP/s, the core's FMA peak
#: measured at 118); the 32-channel layer above, whole calls: 233, 206, 184, 179 us.
ROWS = 4
#: The most bytes of a task's buffer of phases: a chunk of output rows reads this much
#: input, which then stays in the L1 cache (32 KiB) from the copy to the last output
#: channel, beside the chunk of output the epilogue reads back. (Chosen, not tuned.)
BUFFER_BYTES = 16 << 10
#: Tasks a conv aims at (images x channel blocks x row blocks): enough for both threads
#: with uneven ones left over, few enough that a task's set-up is amortised (a 7x7 map
#: of 960 channels: 30 channels a task). (Chosen, not tuned.)
TASKS = 32


def runs_depthwise(node: Call) -> bool:
    """Whether this conv runs here: 2-D, each output channel reading one input channel.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (1, 8, 12, 12))
    >>> runs_depthwise(nbyoc.conv(x, nbyoc.var("w", (16, 1, 3, 3)), group=8))
    True
    >>> runs_depthwise(nbyoc.conv(x, nbyoc.var("w", (8, 2, 3, 3)), group=4))
    False
    """
    w = node.args[1].type.shape
    return len(w) == 4 and w[1] == 1


#: The vector size ``flat_rows`` counts lanes by, on every machine.
FORM_VECTOR_BYTES = 64


def flat_rows(out_width: int, padded_width: int, dtype: str) -> bool:
    """Whether a map's rows are computed flat over the buffer's padded rows: when that
    fills more lanes than row by row does (a row of ``out_width`` outputs takes whole
    vectors; flat, each row costs ``padded_width`` positions). On the layers above the
    two forms measured level (28 and 7 outputs a row: 187 against 184 us, 108 against
    108, rows 4 at a time), so the choice is by the lanes they fill.

    The lanes are a 64-byte vector's whatever the machine's: the form is written into
    the code, and a rule that moved with the machine would split one structure's sizes
    between two stage functions on some machines and not others (on 32-byte vectors the
    other form may fill a few more lanes; the two measured level anyway).

    >>> flat_rows(7, 9, "float32"), flat_rows(112, 114, "float32")
    (True, False)
    """
    lanes = FORM_VECTOR_BYTES // (8 if dtype == "float64" else 4)
    return padded_width < -(-out_width // lanes) * lanes


def depthwise_conv(node: Call, g, sources, dest: str, epilogue) -> StageBody:
    """The conv of ``sources`` (x, w and perhaps a bias) into ``dest`` as a stage
    function's body (``conv._Geometry`` ``g``, its sizes read at run time), with
    ``epilogue`` run on each chunk of rows of each output plane."""
    x_name, w_name, *bias = sources
    dtype = node.type.dtype
    (k0, k1), (s0, s1), (d0, d1) = g.kernel, g.strides, g.dilations
    (h, w), (oh, ow) = g.spatial, g.out
    taps = k0 * k1
    itemsize = 8 if dtype == "float64" else 4
    # The buffer: s0 * s1 phases, each ``chunk + reach0`` rows of ``width`` columns
    # (phase (a0, a1), row r, column j holds the padded input at row r * s0 + a0 of
    # the chunk, column j * s1 + a1).
    reach0, reach1 = ceil_div((k0 - 1) * d0, s0), ceil_div((k1 - 1) * d1, s1)
    width = ow + reach1
    flat = flat_rows(value(ow), value(width), dtype)
    fit = BUFFER_BYTES // (s0 * s1 * value(width) * itemsize) - value(reach0)
    chunk = max(ROWS, fit)
    images, channels = value(g.n), value(g.c)
    channel_blocks = min(channels, max(1, TASKS // images))
    per_task = ceil_div(channels, channel_blocks)
    channel_blocks = ceil_div(channels, per_task)
    row_blocks = min(value(oh), max(1, ceil_div(TASKS, images * channel_blocks)))
    rows_per_task = ceil_div(value(oh), row_blocks)
    row_blocks = ceil_div(value(oh), rows_per_task)
    chunk = min(chunk, rows_per_task)
    blocks = g.dim(channel_blocks * row_blocks)
    row_blocks, per_task = g.dim(row_blocks), g.dim(per_task)
    rows_per_task, chunk = g.dim(rows_per_task), g.dim(chunk)
    phase_rows = chunk + reach0
    plane = phase_rows * width  # (one phase's elements)
    setup = [
        f"{w_name}_flat = {w_name}.reshape({g.m * taps})",
        # (flat, indexed by offsets: a reshape per plane cost more than a 7x7 plane's conv)
        f"xf = {x_name}.reshape({g.n * g.c * h * w})",
        f"yf = {dest}.reshape({g.n * g.m * oh * ow})",
        # (zeros: the padding columns are never written, and stay zero)
        f"buffer = np.zeros({s0 * s1} * {plane}, np.{dtype})",
        *(epilogue.setup if epilogue is not None else []),
    ]
    if flat:
        setup.append(f"wide = np.empty({chunk} * {width}, np.{dtype})")
    body = [
        f"n = task // {blocks}",
        f"b = task % {blocks}",
        f"r0 = b % {row_blocks} * {rows_per_task}",
        f"r1 = min({oh}, r0 + {rows_per_task})",
        f"c0 = b // {row_blocks} * {per_task}",
        f"for c in range(c0, min({g.c}, c0 + {per_task})):",
        f"    x0 = (n * {g.c} + c) * {h * w}",
        f"    for o0 in range(r0, r1, {chunk}):",
        f"        o1 = min(r1, o0 + {chunk})",
    ]
    fill, imports = _fill(g, dtype, plane, width, reach0)
    body += ["        " + line for line in fill]
    start = f"{bias[0]}[m]" if bias else f"np.{dtype}(0.0)"
    names = {r: window_rows_name(dtype, g.kernel, g.strides, g.dilations, r) for r in (1, ROWS)}
    per_channel = [
        f"for m in range(c * {g.mg}, (c + 1) * {g.mg}):",
        f"    y0 = (n * {g.m} + m) * {oh * ow}",
        f"    wm = m * {taps}",
    ]
    args = f"buffer, (o - o0) * {width}, {width}, {plane}, {w_name}_flat, wm, {start}, {ow}"
    if flat:
        names = {1: names[1]}
        span = f"(o1 - o0 - 1) * {width} + {ow}"
        per_channel += [
            f"    {names[1]}(wide, 0, 0, buffer, 0, {width}, {plane}, {w_name}_flat, wm, "
            f"{start}, {span})",
            "    for o in range(o0, o1):",
            f"        at = np.uint64((o - o0) * {width})",
            f"        to = np.uint64(y0 + o * {ow})",
            f"        for u in range(np.uint64({ow})):",
            "            yf[to + u] = wide[at + u]",
        ]
    else:
        per_channel += [
            "    o = o0",
            f"    while o + {ROWS} <= o1:",
            f"        {names[ROWS]}(yf, y0 + o * {ow}, {ow}, {args})",
            f"        o += {ROWS}",
            "    while o < o1:",
            f"        {names[1]}(yf, y0 + o * {ow}, {ow}, {args})",
            "        o += 1",
        ]
    if epilogue is not None:
        per_channel += [
            "    " + line for line in epilogue(["n", "m"], (f"o0 * {ow}", f"o1 * {ow}"))
        ]
    body += ["        " + line for line in per_channel]
    tasks = images * value(blocks)
    work = value(rows_per_task * ow * per_task * g.mg) * taps
    imports |= set(names.values())
    return StageBody(body, tasks, work, setup, imports, Lead(images, 1, value(blocks)))


def _fill(g, dtype: str, plane, width, reach0) -> tuple[list[str], set[str]]:
    """Lines copying the input rows that output rows ``[o0, o1)`` read, from ``xf``
    (the plane at ``x0``), into the buffer's phases, zeros for rows in the padding;
    and the intrinsics they call (``runtime.llvm.window_rows``' deal of a row into
    its phases, for strides of 1 and 2). Only the columns inside the input are
    written: the padding columns stay the zeros the buffer was made with."""
    (s0, s1), (p0, p1), (h, w) = g.strides, g.begins, g.spatial
    # Input column k goes to column (k + p1) // s1 of phase (k + p1) % s1; the columns
    # past those the outputs read go nowhere.
    count = f"max(0, min({w}, {s1 * width} - {p1}))"
    lines = []
    for a0 in range(s0):
        row = f"{a0 * s1} * {plane} + r * {width}"
        lines += [
            f"for r in range(o1 - o0 + {reach0}):",
            f"    i = (o0 + r) * {s0} + {a0 - p0}",  # the input row
            f"    if i < 0 or i >= {h}:",
            f"        for a in range({s1}):",
            # (unsigned: Numba wraps a signed index that may be negative, which stops
            # LLVM vectorising the loop)
            f"            to = np.uint64({row} + a * {plane})",
            f"            for j in range(np.uint64({width})):",
            "                buffer[to + j] = 0.0",
            "    else:",
        ]
        if s1 in DEAL_STRIDES:
            targets = [f"{row} + {(k + p1) % s1} * {plane} + {(k + p1) // s1}" for k in range(s1)]
            deal = deal_row_name(dtype, s1)
            lines.append(f"        {deal}(buffer, {', '.join(targets)}, xf, x0 + i * {w}, {count})")
        else:  # (larger strides: rare, a loop)
            lines += [
                f"        for k in range({count}):",
                f"            buffer[{row} + (k + {p1}) % {s1} * {plane} + (k + {p1}) // {s1}]"
                f" = xf[x0 + i * {w} + k]",
            ]
    names = {deal_row_name(dtype, s1)} if s1 in DEAL_STRIDES else set()
    return lines, names
