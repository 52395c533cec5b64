"""A window op's input as stride *phases*, so that each row of its window's taps is one
flat call over the output plane (the direct convs: ``conv``).

Along an axis of stride ``s``, pad ``p`` and dilation ``dil``, output ``o`` and tap
``q`` read the input at ``o * s - p + q * dil``; in the padded input that is
``o * s + q * dil``, whose residue ``(q * dil) % s`` and quotient ``o + (q * dil) //
s`` depend on ``o`` only through the quotient. So along every axis but the last the
input is copied into ``s`` phases, phase ``a`` holding at row ``r`` the input at ``r *
s + a - p`` (zero where that is padding); along the last, rows are copied as they are
into padded rows ``s`` times the output's width, read every ``s``-th element. Laid
out flat with the phases' pitch, the taps along the last axis are then one call of
a tap row (``runtime.llvm.tap_rows``) over the plane's positions, ``acc[t] += sum_q
w[q] * phase[a][t * s + q * dil + offset]``, restricted to the output rows whose tap
row lies in the input and cut into blocks that stay in the L1 cache. The sizes are
read at run time, so one function serves every shape of a structure (window,
strides, dilations, pads: numbers in the code).

The accumulator has the phases' pitch: a row's positions past the output's end are
computed and never read (``rows`` copies the plane out). The phases are zeroed once
per call: every task writes the same positions, so the padding stays zero.

Measured against the direct form with the extents written in that this replaced
(2-core AVX-512 VM, two threads, conv + bias + relu, us): depthwise 3x3 over 12x160
42 against 55, 56x56 stride 2 31 against 76, 112x112 179 against 233, 7x7 41
against 40; depthwise 5x5 over 2x96 52 against 56; 64 channels of 40x40 into 2, 3x3
73 against 351; an image's first conv (3 channels, 3x3 stride 2) 66 against 63.
The same phases with LLVM's own loop over each tap (its trip count unknown) ran 1.4x
slower than the direct form on small planes: the tap row's masked tail is what
makes sizes read at run time cost nothing.
"""

from __future__ import annotations

import itertools
import math

from ...runtime.llvm.target import tap_row_name
from .loops import outer


def _indent(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + line for line in lines]


#: Flat positions per block of the taps' loops: each tap runs over one block of the
#: accumulator at a time, so that the block (8 KiB of float32) stays in the L1 cache
#: for all the taps (a 112x112 plane's accumulator alone is 49 KiB).
BLOCK = 2048
#: The most taps one tap row sums: its code is a vector FMA per tap, written out, and a
#: row of 256 taps (a 1 x 256 conv of stride 2, an audio model's filter bank) took
#: 1 s to compile; rows of 16 load and store the accumulator once per 16 FMAs.
ROW_TAPS = 16


class Phases:
    """The phases of one window op: its window ``kernel``, ``strides``, ``dilations``
    and leading pads ``begins`` (numbers, the structure), and its input's ``spatial``
    and output's ``out`` extents (numbers or ``sizes.Dim``). Phases are taken along
    every axis but the last; along the last, the copy is the padded row as it is, and a
    tap reads every ``stride``-th element of it (a contiguous copy; the tap row loads a
    stride of 2 as whole vectors and shuffles).

    >>> p = Phases((3, 3), (2, 2), (1, 1), (1, 1), (9, 8), (5, 4))
    >>> p.count, p.extents, p.span, p.plane
    (2, [6, 5], 24, 60)
    """

    def __init__(self, kernel, strides, dilations, begins, spatial, out):
        self.kernel, self.strides, self.dilations = tuple(kernel), tuple(strides), tuple(dilations)
        self.begins, self.spatial, self.out = tuple(begins), tuple(spatial), tuple(out)
        k = self.rank = len(self.kernel)
        last = k - 1
        s, dil = self.strides, self.dilations
        # each axis's extent in flat positions (in phase positions but the last, which
        # is in outputs: the row is ``stride`` times longer), so far as the taps reach
        self.extents = [self.out[d] + (self.kernel[d] - 1) * dil[d] // s[d] for d in range(last)]
        self.extents.append(self.out[last] + -(-(self.kernel[last] - 1) * dil[last] // s[last]))
        #: Each axis's pitch in flat positions, and in the phase's elements.
        self.pitches = [math.prod(self.extents[d + 1 :]) for d in range(k)]
        self.element_pitches = [p * s[last] for p in self.pitches[:last]] + [1]
        self.plane = math.prod(self.extents) * s[last]
        #: The flat positions from the first output to the last.
        self.span = sum((self.out[d] - 1) * self.pitches[d] for d in range(k)) + 1
        self.count = math.prod(s[:last])

    def setup(self, dtype: str) -> list[str]:
        """Lines making ``phase`` (zeros) and the accumulator ``acc``, of ``dtype``."""
        return [
            # (a stride's whole vectors read one element past a row's last: ``tap_rows``)
            f"phase = np.zeros(({self.count}, {self.plane + self.strides[-1]}), np.{dtype})",
            f"acc = np.empty({self.span}, np.{dtype})",
        ]

    def copy(self, x_name: str, plane: list[str]) -> list[str]:
        """Lines copying the input plane ``x_name[plane...]`` into ``phase``. The bounds
        of each phase's part inside the input are numbers where only the structure
        decides them. Indices are flat and unsigned: Numba wraps a signed index that
        may be negative, which stops LLVM vectorising, and a slice per row cost more
        than a small plane's copy."""
        k = self.rank
        last = k - 1
        x_pitches = [math.prod(self.spatial[d + 1 :]) for d in range(k)]
        lines = [f"xf = {x_name}[{', '.join(plane)}].reshape({math.prod(self.spatial)})"]
        # (the row's elements that fit: the taps never read past the row's end)
        row = self.extents[last] * self.strides[last]
        width = f"max(min({self.spatial[last]}, {row - self.begins[last]}), 0)"
        for a in itertools.product(*(range(s) for s in self.strides[:last])):
            index = sum(a[d] * math.prod(self.strides[d + 1 : last]) for d in range(last))
            lines.append(f"dst = phase[{index}]")
            for d in range(last):
                s, p = self.strides[d], self.begins[d]
                lo = max(0, -((a[d] - p) // s))  # the first r whose r * s + a - p >= 0
                hi = f"min({self.extents[d]}, ({self.spatial[d] - 1 + p - a[d]}) // {s} + 1)"
                lines += _indent([f"for r{d} in range({lo}, {hi}):"], d)
            to = " + ".join(
                [
                    *(f"r{d} * {self.element_pitches[d]}" for d in range(last)),
                    str(self.begins[last]),
                ]
            )
            reads = [f"(r{d} * {self.strides[d]} + {a[d] - self.begins[d]}) * {x_pitches[d]}"
                     for d in range(last)]  # fmt: skip
            at = " + ".join(reads or ["0"])
            lines += _indent(
                [
                    f"b = np.uint64({to})",
                    f"i = np.uint64({at})",
                    f"for r in range(np.uint64({width})):",
                    "    dst[b + r] = xf[i + r]",
                ],
                last,
            )
        return lines

    def taps(self, dtype: str, weights: str, row: str) -> tuple[list[str], set[str]]:
        """Lines adding the window's taps to ``acc`` block by block, and the names of the
        tap rows (``runtime.llvm.tap_rows``) they call: for each tap of the axes before
        the last (``q0, q1, ...``), the row of taps along the last axis, whose weights
        are ``weights[row ...]`` (``row`` an expression of those taps), over the
        positions whose tap row lies in the input (along the first axis: a small
        plane's padded rows are much of it, a 5x5 window over 2 rows: 60% of the taps).
        A row longer than ``ROW_TAPS`` runs as rows of that many taps and one of the
        rest."""
        k = self.rank
        last = k - 1
        s, dil = self.strides, self.dilations
        phase = " + ".join(
            [f"((q{d} * {dil[d]}) % {s[d]}) * {math.prod(s[d + 1 : last])}" for d in range(last)]
            or ["0"]
        )
        offset = " + ".join(
            f"(q{d} * {dil[d]}) // {s[d]} * {self.element_pitches[d]}" for d in range(last)
        )
        lines = [
            f"for t0 in range(0, {self.span}, {BLOCK}):",
            f"    t1 = min({self.span}, t0 + {BLOCK})",
        ]
        loops = [f"{'    ' * d}for q{d} in range({self.kernel[d]}):" for d in range(last)]
        if last:
            p0, rest = self.begins[0], self.span - (self.out[0] - 1) * self.pitches[0]
            end = self.spatial[0] - 1 + p0
            loops[1:1] = [
                f"    lo = max(0, -((q0 * {dil[0]} - {p0}) // {s[0]}))",
                f"    hi = min({self.out[0]}, ({end} - q0 * {dil[0]}) // {s[0]} + 1)",
                f"    u0 = max(t0, lo * {self.pitches[0]})",
                f"    u1 = min(t1, (hi - 1) * {self.pitches[0]} + {rest})",
            ]
        else:
            lines += ["    u0, u1 = t0, t1"]
        lines += _indent(loops, 1)
        at = f"{offset} + u0 * {s[last]}" if last else f"u0 * {s[last]}"
        taps = self.kernel[last]
        whole = taps // ROW_TAPS if taps > ROW_TAPS else 0  # rows of ROW_TAPS taps
        names = set()

        def call(count: int, first) -> str:
            """A row of ``count`` taps from tap ``first`` (a number or a name)."""
            name = tap_row_name(dtype, count, s[last], dil[last])
            names.add(name)
            x_at = f"{at} + {first} * {dil[last]}" if first else at
            w_at = f"{row} + {first}" if first else row
            return f"{name}(acc, u0, phase[{phase}], {x_at}, {weights}, {w_at}, max(u1 - u0, 0))"

        calls = []
        if whole:  # (a loop over them: one copy of the row's code)
            calls = [
                f"for qr in range(0, {whole * ROW_TAPS}, {ROW_TAPS}):",
                "    " + call(ROW_TAPS, "qr"),
            ]
        if taps > whole * ROW_TAPS:
            calls.append(call(taps - whole * ROW_TAPS, whole * ROW_TAPS))
        return lines + _indent(calls, last + 1), names

    def rows(self, dest: str, plane: list[str]) -> list[str]:
        """Lines storing the output plane ``dest[plane...]`` from ``acc``, row by row."""
        k = self.rank
        last = k - 1
        out_pitches = [math.prod(self.out[d + 1 :]) for d in range(k)]
        lines = [f"out_flat = {dest}[{', '.join(plane)}].reshape({math.prod(self.out)})"]
        lines += [f"{'    ' * d}for o{d} in range({outer(self.out[d])}):" for d in range(last)]
        start = " + ".join([f"o{d} * {self.pitches[d]}" for d in range(last)] or ["0"])
        written = " + ".join([f"o{d} * {out_pitches[d]}" for d in range(last)] or ["0"])
        lines += _indent(
            [
                f"r = np.uint64({start})",
                f"w = np.uint64({written})",
                f"for o{last} in range(np.uint64({self.out[last]})):",
                f"    out_flat[w + o{last}] = acc[r + o{last}]",
            ],
            last,
        )
        return lines
