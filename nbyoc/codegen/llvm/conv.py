"""conv in the llvm kernel, with its epilogue (the elementwise ops after it, a bias,
an activation, a residual add) applied to each output plane while it is in cache.

Two ways, chosen per call by its sizes:

- **direct**: one task per (image, output channel) plane, in parallel; for each
  input channel of its group and each kernel tap, the plane's rows get ``w * x``
  added along the row (vectorised when the row's stride is 1). Each tap's valid
  output range is worked out from the static geometry, so the padding is never
  read or tested inside the row loop. Depthwise and small convs run this way.
- **BLAS**: per image and group, ``w (M, C*taps) @ columns (C*taps, positions)``
  through ``np.dot`` (SciPy's BLAS, threaded by itself), the columns gathered in
  parallel (im2col; a 1x1 conv with unit strides and no padding reads its input as
  they are). Taken for convs with enough channels (``uses_blas``) when SciPy is
  installed.

Float32 and float64 convs whose operands share the dtype; the rest (float16,
mixed dtypes) run on the host.
"""

from __future__ import annotations

import math

from ...ir.nodes import Call
from .gemm import blas_available
from .loops import subscript
from .stages import StageBody

#: A conv goes to BLAS when each group has at least this many output channels and
#: this many multiply-adds per output (input channels x taps), and SciPy is installed
#: (measured on PP-OCR's classifier: its 1x1 convs of 16 to 200 channels ran 2.4x
#: faster through BLAS, its 8-channel ones and depthwise ones faster direct).
BLAS_MIN_CHANNELS = 16
BLAS_MIN_DEPTH = 16


def conv_supported(call: Call) -> bool:
    """Whether llvm lowers this conv: float32 or float64, every operand of that dtype."""
    dtype = call.type.dtype
    return dtype in ("float32", "float64") and all(a.type.dtype == dtype for a in call.args)


def uses_blas(node: Call) -> bool:
    """Whether this conv runs as im2col + BLAS (see the module docstring)."""
    w = node.args[1].type.shape
    group = node.attrs["group"]
    depth = w[1] * math.prod(w[2:])
    return w[0] // group >= BLAS_MIN_CHANNELS and depth >= BLAS_MIN_DEPTH and blas_available()


class _Geometry:
    """The static sizes of one conv call, by spatial axis."""

    def __init__(self, node: Call):
        x, w = node.args[:2]
        attrs = node.attrs
        self.n, self.c = x.type.shape[:2]
        self.m, self.cg = w.type.shape[:2]
        self.group = attrs["group"]
        self.mg = self.m // self.group
        self.spatial = x.type.shape[2:]
        self.kernel = w.type.shape[2:]
        self.out = node.type.shape[2:]
        self.strides, self.dilations = attrs["strides"], attrs["dilations"]
        self.begins = attrs["pads"][: len(self.kernel)]
        self.taps = math.prod(self.kernel)
        self.positions = math.prod(self.out)

    def valid_range(self, d: int, q: str) -> list[str]:
        """Lines binding ``lo{d}``/``hi{d}``: the output positions along axis ``d`` whose
        input position for tap ``q`` lies inside the input (not in the padding)."""
        s, p, dil = self.strides[d], self.begins[d], self.dilations[d]
        return [
            f"lo{d} = max(0, -(({q} * {dil} - {p}) // {s}))",
            f"hi{d} = min({self.out[d]}, ({self.spatial[d] - 1 + p} - {q} * {dil}) // {s} + 1)",
        ]

    def position(self, d: int, o: str, q: str) -> str:
        """The input position along axis ``d`` of output ``o`` and tap ``q``."""
        s, p, dil = self.strides[d], self.begins[d], self.dilations[d]
        return f"{o} * {s} - {p} + {q} * {dil}"

    def pointwise(self) -> bool:
        """A 1x1 conv with unit strides and no padding: a product with the input as is."""
        return (
            all(k == 1 for k in self.kernel)
            and all(s == 1 for s in self.strides)
            and not any(self.begins)
            and self.out == self.spatial
        )


def conv_stage(node: Call, sources, dest: str, parallel: bool, epilogue=None) -> StageBody:
    """conv of ``sources`` (x, w and perhaps a bias) into ``dest``, as a stage function's
    body; ``epilogue``, given the names of a plane's (image, channel) indices, returns
    the lines to run on that plane once it is written."""
    if uses_blas(node):
        return _blas_conv(node, sources, dest, parallel, epilogue)
    return _direct_conv(node, sources, dest, parallel, epilogue)


def _indent(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + line for line in lines]


def _direct_conv(node, sources, dest, parallel, epilogue) -> StageBody:
    x_name, w_name, *bias = sources
    g = _Geometry(node)
    k = len(g.kernel)
    o = [f"o{d}" for d in range(k)]
    plane = f"{dest}[{subscript(['n', 'm', *o])}]"
    start = f"{bias[0]}[m]" if bias else "0.0"
    body = [f"n = task // {g.m}", f"m = task % {g.m}"]
    body += [*(f"{'    ' * d}for {o[d]} in range({g.out[d]}):" for d in range(k))]
    body += ["    " * k + f"{plane} = {start}"]
    channel = f"m // {g.mg} * {g.cg} + ci" if g.group > 1 else "ci"
    taps: list[str] = [f"for ci in range({g.cg}):", f"    c = {channel}"]
    depth = 1
    for d in range(k):
        taps += _indent(
            [f"for q{d} in range({g.kernel[d]}):", *_indent(g.valid_range(d, f"q{d}"), 1)], depth
        )
        depth += 1
    taps += _indent(
        [f"wv = {w_name}[{subscript(['m', 'ci', *(f'q{d}' for d in range(k))])}]"], depth
    )
    for d in range(k - 1):
        taps += _indent(
            [f"for o{d} in range(lo{d}, hi{d}):", f"    p{d} = {g.position(d, f'o{d}', f'q{d}')}"],
            depth,
        )
        depth += 1
    last = k - 1
    reads = [*(f"p{d}" for d in range(last)), g.position(last, f"o{last}", f"q{last}")]
    taps += _indent(
        [
            f"for o{last} in range(lo{last}, hi{last}):",
            f"    {plane} += wv * {x_name}[{subscript(['n', 'c', *reads])}]",
        ],
        depth,
    )
    body += taps
    if epilogue is not None:
        body += epilogue(["n", "m"])
    return StageBody(body, g.n * g.m, g.positions * g.cg * g.taps)


def _blas_conv(node, sources, dest, parallel, epilogue) -> StageBody:
    x_name, w_name, *bias = sources
    g = _Geometry(node)
    depth = g.cg * g.taps
    loop = "prange" if parallel else "range"
    lines = [
        f"{w_name}_g = {w_name}.reshape(({g.group}, {g.mg}, {depth}))",
        f"{dest}_g = {dest}.reshape(({g.n}, {g.group}, {g.mg}, {g.positions}))",
    ]
    if g.pointwise():
        lines.append(f"{x_name}_g = {x_name}.reshape(({g.n}, {g.group}, {g.cg}, {g.positions}))")
        product = [f"np.dot({w_name}_g[g], {x_name}_g[n, g], {dest}_g[n, g])"]
    else:
        dtype = node.type.dtype
        lines.append(f"columns = np.empty(({depth}, {g.positions}), np.{dtype})")
        product = [*_im2col(g, x_name, loop), f"np.dot({w_name}_g[g], columns, {dest}_g[n, g])"]
    per_plane = []
    if bias:
        o = [f"o{d}" for d in range(len(g.out))]
        per_plane += [f"{'    ' * d}for {o[d]} in range({g.out[d]}):" for d in range(len(o))]
        per_plane += ["    " * len(o) + f"{dest}[{subscript(['n', 'm', *o])}] += {bias[0]}[m]"]
    if epilogue is not None:
        per_plane += epilogue(["n", "m"])
    lines += [
        f"for n in range({g.n}):",
        f"    for g in range({g.group}):",
        *_indent(product, 2),
    ]
    if per_plane:
        lines += [f"    for m in {loop}({g.m}):", *_indent(per_plane, 2)]
    return StageBody(lines)


def _im2col(g: _Geometry, x_name: str, loop: str) -> list[str]:
    """Lines filling ``columns`` (channel x tap, output position) for image ``n`` and
    group ``g``, over its rows by ``loop`` (range or prange); positions in the padding
    get 0."""
    k = len(g.kernel)
    last = k - 1
    lines = [f"for r in {loop}({g.cg * g.taps}):", f"    c = g * {g.cg} + r // {g.taps}"]
    tap, taps = "r", []
    for d in reversed(range(1, k)):
        taps += [f"q{d} = {tap} % {g.kernel[d]}", f"t{d} = {tap} // {g.kernel[d]}"]
        tap = f"t{d}"
    taps.append(f"q0 = ({tap}) % {g.kernel[0]}")
    lines += _indent(taps, 1)
    lines += _indent([*g.valid_range(last, f"q{last}")], 1)
    depth = 1
    inside = []
    for d in range(k - 1):
        lines += _indent(
            [f"for o{d} in range({g.out[d]}):", f"    p{d} = {g.position(d, f'o{d}', f'q{d}')}"],
            depth,
        )
        inside.append(f"p{d} < 0 or p{d} >= {g.spatial[d]}")
        depth += 1
    row_start = " + ".join(f"o{d} * {math.prod(g.out[d + 1 :])}" for d in range(k - 1)) or "0"
    reads = [*(f"p{d}" for d in range(last)), g.position(last, f"o{last}", f"q{last}")]
    copy = [
        f"base = {row_start}",
        f"if {' or '.join(inside) if inside else 'False'}:",
        f"    for o{last} in range({g.out[last]}):",
        f"        columns[r, base + o{last}] = 0.0",
        "else:",
        f"    for o{last} in range(lo{last}):",
        f"        columns[r, base + o{last}] = 0.0",
        f"    for o{last} in range(lo{last}, hi{last}):",
        f"        columns[r, base + o{last}] = {x_name}[{subscript(['n', 'c', *reads])}]",
        f"    for o{last} in range(max(hi{last}, lo{last}), {g.out[last]}):",
        f"        columns[r, base + o{last}] = 0.0",
    ]
    return lines + _indent(copy, depth)
