"""The input rows a block of a tiled conv's output rows reads, split into stride phases,
so that every tap of a strided conv reads one contiguous run of one phase plane, as
every tap of a unit-stride conv reads its padded input (``conv._wide_tiled_conv``).

Along an axis of stride ``s`` and dilation ``dil``, output ``o`` and tap ``q`` read the
padded input at ``o * s + q * dil``: phase ``(q * dil) % s`` (the residue) at phase
position ``o + (q * dil) // s``. A phase plane holds, along every axis, the padded
input's positions of one residue, ``j * s + phase`` at ``j``; laid out flat with a
pitch of ``out + reach`` positions along each axis after the first (``reach``, the
phase positions a tap reads past the output's last), output ``o`` of tap ``q`` is
then at ``flat(o) + offset(q)`` of its phase's plane. Over a block of output rows
computed at the plane's pitch (the positions past the output's width computed and
dropped), each tap's row of the column matrix is one contiguous run of a plane.

Only the phases up to the last some tap reads are kept (a 3x3 stride-2 conv reads all
four of 2 x 2; a 1x1 stride-2 conv, or one of dilation 2, one). At stride 1
this is the padded input itself, one phase.

A block's phase rows are relative to its first output row: the block of output rows
``[row0, row1)`` reads phase rows ``row0 .. row1 + reach - 1`` of every phase.

>>> planes = PhasePlanes((3, 3), (2, 2), (1, 1), (1, 1), (900, 161), (450, 81))
>>> planes.counts, planes.reach, planes.phases
((2, 2), (1, 1), 4)
>>> planes.extents(10), planes.pitches(), planes.slack()
((11, 82), (82, 1), 1)
>>> planes.tap(0, "q0"), planes.tap_offset(["q0", "q1"])
('(q0 * 1) % 2', '(q0 * 1) // 2 * 82 + (q1 * 1) // 2 * 1')
"""

from __future__ import annotations

import math


def _indent(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + line for line in lines]


class PhasePlanes:
    """The stride phases of one conv's input: its window ``kernel``, ``strides``,
    ``dilations`` and leading pads ``begins`` (numbers: the structure), and its
    input's ``spatial`` and output's ``out`` extents (numbers or ``sizes.Dim``)."""

    def __init__(self, kernel, strides, dilations, begins, spatial, out):
        self.kernel, self.strides, self.dilations = kernel, strides, dilations
        self.begins, self.spatial, self.out = begins, spatial, out
        spans = [(k - 1) * dil for k, dil in zip(kernel, dilations)]
        # (phases 0 up to the last a tap reads: a dilation of 2 at stride 2 reads one)
        self.counts = tuple(
            max((q * dil) % s for q in range(k)) + 1
            for k, s, dil in zip(kernel, strides, dilations)
        )
        self.reach = tuple(span // s for s, span in zip(strides, spans))
        self.phases = math.prod(self.counts)

    def extents(self, rows) -> tuple:
        """A block's phase plane's extents for ``rows`` output rows: along the first axis
        the rows its taps read, along the others the output's extent and the reach."""
        first = rows + self.reach[0]
        return (first, *(o + r for o, r in zip(self.out[1:], self.reach[1:])))

    def pitches(self) -> tuple:
        """The flat distance between neighbours along each axis of a phase plane (the
        first axis's: a wide row's length)."""
        extents = self.extents(0)
        return tuple(math.prod(extents[d + 1 :]) for d in range(len(extents)))

    def slack(self):
        """How far past its last row a tap of the block's last wide row reads."""
        return sum(r * p for r, p in zip(self.reach[1:], self.pitches()[1:]))

    def size(self, rows):
        """One phase plane's length for ``rows`` output rows: its extents and the slack."""
        return math.prod(self.extents(rows)) + self.slack()

    def tap(self, d: int, q: str) -> str:
        """The phase along axis ``d`` of tap ``q`` (a name in the code)."""
        return f"({q} * {self.dilations[d]}) % {self.strides[d]}"

    def tap_phase(self, taps: list[str]) -> str:
        """The flat index among the kept phases of the tap ``taps`` (names, one per axis)."""
        return self.flat_phase([self.tap(d, q) for d, q in enumerate(taps)])

    def tap_offset(self, taps: list[str]) -> str:
        """The flat offset within its phase plane at which tap ``taps`` reads output 0."""
        pitches = self.pitches()
        return " + ".join(
            f"({q} * {self.dilations[d]}) // {self.strides[d]} * {pitches[d]}"
            for d, q in enumerate(taps)
        )

    def copy(self, plane: str, x: str, lead: list[str]) -> list[str]:
        """Lines copying input channel ``lead`` (its image and channel indices) of ``x``
        into ``plane`` (phase, flat position), the phase planes of the block of output
        rows ``[row0, row1)`` (names bound in the code). Each run along the last axis is
        cut to the input (copied) and the padding either side (zeroed: a thread's planes
        are reused by its next block, whose padding may lie where this block's input
        did); a run whose position along another axis is padding is zeroed whole. The
        phases along the last axis are written together, from one pass over the input
        row (``_row_runs``)."""
        k = len(self.kernel)
        last = k - 1
        pitches = self.pitches()
        lines: list[str] = []
        depth = 0
        for d in range(last):
            lines += _indent([f"for ph{d} in range({self.counts[d]}):"], depth)
            depth += 1
        first = self.flat_phase([f"ph{d}" for d in range(last)])
        lines += _indent(
            [
                f"phase_plane{p} = {plane}[({first}) * {self.counts[last]} + {p}]"
                for p in range(self.counts[last])
            ],
            depth,
        )
        # The positions along the axes before the last: phase rows of the block, then
        # whole phase extents. ``i{d}``, the input position (negative or past it: padding).
        inside = []
        base = []
        for d in range(last):
            count = "row1 - row0 + " + str(self.reach[0]) if d == 0 else str(self.extents(0)[d])
            lines += _indent([f"for j{d} in range({count}):"], depth)
            depth += 1
            start = f"(row0 + j{d})" if d == 0 else f"j{d}"
            lines += _indent(
                [f"i{d} = {start} * {self.strides[d]} + ph{d} - {self.begins[d]}"], depth
            )
            inside.append(f"i{d} >= 0 and i{d} < {self.spatial[d]}")
            base.append(f"j{d} * {pitches[d]}")
        extent = f"row1 - row0 + {self.reach[0]}" if k == 1 else str(self.extents(0)[last])
        at = " + ".join(base) or "0"
        run = [f"at = {at}", *self._row_runs(x, lead, extent)]
        if inside:
            zero = [
                f"    phase_plane{p}[at : at + {extent}] = 0.0" for p in range(self.counts[last])
            ]
            run = [
                f"if {' and '.join(inside)}:",
                *_indent(run, 1),
                "else:",
                f"    at = {at}",
                *zero,
            ]
        return lines + _indent(run, depth)

    def _row_runs(self, x: str, lead: list[str], extent: str) -> list[str]:
        """Lines filling positions ``at .. at + extent`` of each last-axis phase plane
        (``phase_plane{p}``) from one input row (``lead`` and ``i{d}``, the positions
        along the other axes): phase ``p``'s positions ``[run0_p, run1_p)`` are inside
        the input, the rest padding (zeroed). Where every phase is inside (``[both0,
        both1)``) one loop writes them all, reading the row once, in order; the few
        positions where only some are inside are copied phase by phase.

        Measured (loaded, one thread, CPU time, medians): the copy of the audio CNN's
        strided conv (32 x 900 x 161 into 2 x 2 phases, 41 blocks of rows) took 5.7 ms
        of the stage's 21 ms as one loop per phase with signed indices, 3.2-3.6 as
        the phases of a row in one loop with unsigned ones, 8.7 as one loop per phase
        with unsigned ones (beside a stage without the copy, in one process; the same
        order of the three in a copy alone with its sizes written in)."""
        k = len(self.kernel)
        last = k - 1
        s, b, n = self.strides[last], self.begins[last], self.spatial[last]
        origin = "row0" if k == 1 else "0"  # (with one axis, runs are the block's rows)
        phases = range(self.counts[last])
        row = ", ".join([*lead, *(f"i{d}" for d in range(last))])
        lines = [f"input_row = {x}[{row}]"]
        for p in phases:
            # (``b - p + s - 1`` >= 0: the phase is below the stride, so these are ceilings)
            lines += [
                f"run0_{p} = min({extent}, max(0, ({b} - {p} + {s - 1}) // {s} - {origin}))",
                f"run1_{p} = max(run0_{p}, min({extent}, "
                f"({n} + {b} - {p} + {s - 1}) // {s} - {origin}))",
                f"phase_plane{p}[at : at + run0_{p}] = 0.0",
                f"phase_plane{p}[at + run1_{p} : at + {extent}] = 0.0",
            ]

        def most(names):
            return names[0] if len(names) == 1 else f"max({', '.join(names)})"

        def least(names):
            return names[0] if len(names) == 1 else f"min({', '.join(names)})"

        lines += [
            f"both0 = {most([f'run0_{p}' for p in phases])}",
            f"both1 = max(both0, {least([f'run1_{p}' for p in phases])})",
        ]
        if len(phases) > 1:
            for p in phases:
                # (a phase may end before another starts: a row of one position)
                for lo, hi in ((f"run0_{p}", f"min(both0, run1_{p})"), ("both1", f"run1_{p}")):
                    lines += [
                        f"for u in range({lo}, {hi}):",
                        f"    phase_plane{p}[at + u] = input_row[({origin} + u) * {s} + {p} - {b}]",
                    ]
        # (unsigned offsets up to an opaque bound, as ``conv._wide_tiled_conv`` keeps its
        # rows: Numba wraps negative signed indices, which kept this loop scalar)
        step = f" * np.uint64({s})" if s != 1 else ""
        lines += [
            f"first = np.uint64(({origin} + both0) * {s} - {b})",
            "target = np.uint64(at + both0)",
            "for u in range(np.uint64(opaque(both1 - both0))):",
            *(
                f"    phase_plane{p}[target + u] = input_row[first + u{step}"
                + (f" + np.uint64({p})]" if p else "]")
                for p in phases
            ),
        ]
        return lines

    def flat_phase(self, phases: list[str]) -> str:
        """The flat index among the kept phases of the phases ``phases`` (one per axis)."""
        index = "0"
        for d, a in enumerate(phases):
            index = f"({index}) * {self.counts[d]} + {a}"
        return index
