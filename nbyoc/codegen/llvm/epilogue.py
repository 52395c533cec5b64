"""The loops of an epilogue: the elementwise ops after a matmul or conv, run on each
block of its result (a plane, a group of rows) while the block is in cache.

``Epilogue`` gives a producer's emitter the lines for a block in one of three ways:

- ``epilogue(fixed)``: the leading axes fixed, nested loops over the rest;
- ``epilogue(fixed, span=(lo, hi))``: positions ``[lo, hi)`` of the rest, in C order
  (a conv's block of output positions);
- ``epilogue.rows(r0, r1)``: rows ``[r0, r1)`` of a 2-D matmul's result. When the
  rows are short (``flat``, see ``emit_ops.OpEmission.flat_epilogue``), this is one flat loop
  per block of rows, vectorised at any row length, with each per-column operand (a
  bias) read from a buffer laid out like the block (``setup`` fills it once per
  call). A loop along a row of 24 float32 cannot fill AVX-512's vectors and pays its
  set-up per row: the MLP's bias + tanh over 4096 x 24 took 87 us that way, 47 us
  flat.

>>> loops = Epilogue((2, 3, 4), ["x[i0, i1, i2] = 0"])
>>> print("\\n".join(loops(["n"], ("a", "b"))))
i0 = n
for position in range(a, b):
    i1 = position // 4
    i2 = position % 4
    x[i0, i1, i2] = 0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .loops import outer
from .sizes import value


@dataclass
class FlatRows:
    """An epilogue over a 2-D matmul's rows as flat blocks: ``inner`` reads and writes
    element ``i0`` of each block's views; ``views`` maps each full array's parameter
    to the name of its block view; ``setup`` runs once per call."""

    inner: list[str]
    views: dict[str, str]
    setup: list[str]
    block_rows: int
    columns: int


@dataclass
class FlatPlanes:
    """A conv's epilogue over a span of positions of one (image, channel) plane, the
    plane walked flat: ``inner`` reads and writes ``[i0, i1, position]`` of each full
    array's plane view (``<array>_planes``, made once per call for each of
    ``reshaped``)."""

    inner: list[str]
    reshaped: list[str]


@dataclass
class Epilogue:
    """The loops running ``inner`` (indices ``i0``, ``i1``...) over blocks of ``shape``;
    ``flat``, when given, the flat form of ``rows``."""

    shape: tuple[int, ...]
    inner: list[str]
    flat: FlatRows | None = None
    planes: FlatPlanes | None = None
    setup: list[str] = field(init=False)

    def __post_init__(self):
        self.setup = list(self.flat.setup) if self.flat is not None else []
        if self.planes is not None:
            lead, plane = self.shape[:2], math.prod(self.shape[2:])
            self.setup += [
                f"{p}_planes = {p}.reshape(({lead[0]}, {lead[1]}, {plane}))"
                for p in self.planes.reshaped
            ]

    def sized(self, shape) -> Epilogue:
        """This epilogue over ``shape``: the same extents, some of them read at run time
        (``sizes.Dim``, as the stage that runs it reads its own)."""
        assert [value(d) for d in shape] == list(self.shape), "internal: another shape"
        return Epilogue(tuple(shape), self.inner, self.flat, self.planes)

    def __call__(self, fixed: list[str], span: tuple[str, str] | None = None) -> list[str]:
        shape, inner = self.shape, self.inner
        lines = [f"i{d} = {e}" for d, e in enumerate(fixed) if e != f"i{d}"]
        rest = range(len(fixed), len(shape))
        if span is None:
            lines += [
                f"{'    ' * k}for i{d} in range({outer(shape[d]) if d < rest[-1] else shape[d]}):"
                for k, d in enumerate(rest)
            ]
            return lines + ["    " * len(rest) + line for line in inner]
        if self.planes is not None and len(fixed) == 2:
            # (a per-channel operand's index names the plane's axes of extent 1)
            lines += [f"i{d} = 0" for d in range(2, len(shape)) if value(shape[d]) == 1]
            # (unsigned: Numba then drops the negative-index wrap that blocks vectors)
            lines.append(f"for position in range(np.uint64({span[0]}), np.uint64({span[1]})):")
            return lines + ["    " + line for line in self.planes.inner]
        lines.append(f"for position in range({span[0]}, {span[1]}):")
        for d in rest:
            index = f"position // {math.prod(shape[d + 1 :])}"
            if d == rest[-1]:
                index = f"position % {shape[d]}" if len(rest) > 1 else "position"
            elif d != rest[0]:
                index = f"{index} % {shape[d]}"
            lines.append(f"    i{d} = {index}")
        return lines + ["    " + line for line in inner]

    def rows(self, r0: str, r1: str) -> list[str]:
        """Lines running the epilogue on rows ``[r0, r1)`` of a 2-D result."""
        if self.flat is None:
            return [f"for r in range({r0}, {r1}):", *("    " + line for line in self(["r"]))]
        flat = self.flat
        n = flat.columns
        lines = [
            f"q = {r0}",
            f"while q < {r1}:",
            f"    count = min({flat.block_rows}, {r1} - q) * {n}",
            f"    base = q * {n}",
        ]
        for array, view in flat.views.items():
            lines.append(f"    {view} = {array}_flat[base:base + count]")
        lines += ["    for i0 in range(count):", *("        " + line for line in flat.inner)]
        return [*lines, f"    q += {flat.block_rows}"]
