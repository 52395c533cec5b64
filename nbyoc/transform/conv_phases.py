"""The phases of a transposed convolution: which weight taps land on which output
positions, as plain data (``plan_phases``), for ``legalize_conv_transpose``.

Along one axis, ``conv_transpose`` sends input ``j`` through tap ``t`` to the uncropped
output position ``q = s * j + d * t`` (stride ``s``, dilation ``d``); the output keeps
``o = q - pad_begin`` for ``0 <= o < length``. Split the kept output by its phase
``o % s``: output ``o = s * m + phase`` collects exactly the taps with
``d * t = q (mod s)``, each from input ``j = m + c - (d * t - r) / s`` (where
``q = s * (m + c) + r``). The taps of one phase are every ``s / gcd(d, s)``-th tap, and
the inputs they read every ``d / gcd(d, s)``-th input: so each phase is an ordinary
convolution (cross-correlation) of the input with those taps in reverse order, at
dilation ``d / gcd(d, s)``, its row ``m`` reading from input ``m + begin`` on. A phase
no tap lands on is empty (the bias alone). Along several axes the phases are the
products of each axis's phases, and the sub-kernel the product of their taps.

Every phase has ``rows = ceil(length / s)`` rows per axis (the interleaved result is
cropped to ``length``), so the phases of one sub-kernel shape can be one conv over the
rows all of them read, each phase a window of it shifted by its own ``begin``.

>>> axis = plan_axis(size=5, kernel=4, stride=2, dilation=1, pad_begin=1, length=10)
>>> axis.rows, [(p.taps, p.begin) for p in axis.phases]
(5, [((1, 3), -1), ((0, 2), 0)])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import product


@dataclass(frozen=True)
class AxisPhase:
    """One phase along one axis: the weight ``taps`` landing on it (ascending, every
    ``step``-th), and the input index row 0 of its conv starts reading at (``begin``:
    the sub-kernel's first tap, the last weight tap, reads input ``m + begin``)."""

    taps: tuple[int, ...]
    begin: int


@dataclass(frozen=True)
class Axis:
    """One spatial axis: the input ``size``, the stride, the tap ``step`` within a phase,
    the phase convs' ``dilation``, the ``rows`` each phase makes and the cropped output
    ``length``; ``phases[r]`` is output phase ``r``, None when it is empty."""

    size: int
    stride: int
    step: int
    dilation: int
    rows: int
    length: int
    phases: tuple[AxisPhase | None, ...]

    def last_read(self, phase: AxisPhase, rows: int) -> int:
        """The last input index ``rows`` rows of ``phase``'s conv read."""
        return phase.begin + rows - 1 + (len(phase.taps) - 1) * self.dilation


def plan_axis(size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
              length: int) -> Axis:  # fmt: skip
    """The phases of one axis (see the module docstring). A phase whose rows read no
    input in range is empty too: it is the bias alone, as a phase without taps."""
    rows = -(-length // stride)
    common = math.gcd(dilation, stride)
    axis = Axis(size, stride, stride // common, dilation // common, rows, length, ())
    phases = []
    for phase in range(stride):
        c, r = divmod(phase + pad_begin, stride)
        taps = tuple(t for t in range(kernel) if (dilation * t - r) % stride == 0)
        found = AxisPhase(taps, c - (dilation * taps[-1] - r) // stride) if taps else None
        if found is not None and (found.begin >= size or axis.last_read(found, rows) < 0):
            found = None  # (its rows read only padding)
        phases.append(found)
    return replace(axis, phases=tuple(phases))


@dataclass(frozen=True)
class PhaseConv:
    """One conv computing the ``members`` (phase tuples, row-major order) that share a
    sub-kernel shape: over the input window ``starts``..``ends`` padded by ``pads``
    (begins then ends), it makes ``out_rows`` rows per axis; member ``i`` is the window
    of ``rows`` rows from ``offsets[i]`` on."""

    kernel: tuple[int, ...]
    members: tuple[tuple[int, ...], ...]
    offsets: tuple[tuple[int, ...], ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    pads: tuple[int, ...]
    out_rows: tuple[int, ...]


@dataclass(frozen=True)
class PhasePlan:
    """The phases of a transposed convolution: its ``axes``, the ``convs`` computing the
    non-empty phases (each phase in one of them), and every phase in row-major order."""

    axes: tuple[Axis, ...]
    convs: tuple[PhaseConv, ...]

    @property
    def phases(self) -> list[tuple[int, ...]]:
        return list(product(*(range(a.stride) for a in self.axes)))

    @property
    def count(self) -> int:
        return math.prod(a.stride for a in self.axes)

    def taps(self, member: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        """The weight taps of phase ``member``, per axis."""
        return tuple(a.phases[r].taps for a, r in zip(self.axes, member))


def plan_phases(sizes, kernel, strides, dilations, pads, lengths) -> PhasePlan:
    """The phase plan of a transposed convolution over spatial ``sizes`` with ``kernel``
    (its spatial shape), ``strides``, ``dilations``, ``pads`` (begins then ends) and
    output ``lengths`` (all ints).

    >>> plan = plan_phases((80, 80), (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), (160, 160))
    >>> [(c.kernel, len(c.members), c.pads) for c in plan.convs]  # four 1x1 convs in one
    [((1, 1), 4, (0, 0, 0, 0))]
    """
    k = len(sizes)
    axes = tuple(
        plan_axis(sizes[i], kernel[i], strides[i], dilations[i], pads[i], lengths[i])
        for i in range(k)
    )
    by_kernel: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for member in product(*(range(a.stride) for a in axes)):
        found = [a.phases[r] for a, r in zip(axes, member)]
        if all(p is not None for p in found):
            by_kernel.setdefault(tuple(len(p.taps) for p in found), []).append(member)
    return PhasePlan(axes, tuple(_conv(axes, shape, m) for shape, m in by_kernel.items()))


def _conv(axes: tuple[Axis, ...], kernel: tuple[int, ...], members) -> PhaseConv:
    low = [min(a.phases[m[i]].begin for m in members) for i, a in enumerate(axes)]
    high = [max(a.phases[m[i]].begin for m in members) for i, a in enumerate(axes)]
    out_rows = [a.rows + hi - lo for a, lo, hi in zip(axes, low, high)]
    starts, ends, begins, finals = [], [], [], []
    for a, lo, rows, taps in zip(axes, low, out_rows, kernel):
        last = lo + rows - 1 + (taps - 1) * a.dilation  # the last input index read
        starts.append(max(0, lo))
        ends.append(min(a.size, last + 1))
        begins.append(max(0, -lo))
        finals.append(max(0, last - (a.size - 1)))
    offsets = tuple(
        tuple(a.phases[m[i]].begin - lo for i, (a, lo) in enumerate(zip(axes, low)))
        for m in members
    )
    return PhaseConv(kernel, tuple(members), offsets, tuple(starts), tuple(ends),
                     tuple(begins + finals), tuple(out_rows))  # fmt: skip
