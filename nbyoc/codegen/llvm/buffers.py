"""Scratch memory of an llvm kernel: the buffer each stored value lives in, and where
each buffer lies in the one flat *arena* of its storage dtype.

Buffers are assigned by liveness: a value takes the first buffer of its dtype whose
last value was last read before the stage that writes it, and the buffer grows to
the largest value it holds. The buffers of one storage dtype are then laid out one
after another in that dtype's arena, each at a multiple of ``ALIGN_BYTES``.

One arena per dtype, not one array per buffer: every array a Numba kernel takes as
a parameter costs compile time superlinear in their number (unboxing each adds
cleanup for all before it, and a parallel loop passes each to its outlined body):
PP-OCR's classifier had 125 scratch buffers, and its kernel took 57 s to compile
serially with them as parameters, 27 s with one arena.

This module plans; it writes no source. ``check_buffer_plan`` in the tests checks
every plan the suite makes, from the graph, independently of the liveness here.

>>> plan = plan_buffers(
...     [(0, "a", "float32", 100), (1, "b", "float32", 100), (2, "c", "float32", 10)],
...     last_use={"a": 1, "b": 2, "c": 3},
... )
>>> [plan.buffers[plan.home[v]].offset for v in "abc"]  # c reuses a's buffer
[0, 112, 0]
>>> plan.arenas
(('float32', 212),)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np

#: Every buffer starts at a multiple of this many bytes in its arena: a cache line,
#: and the widest vector (AVX-512) a stage loads.
ALIGN_BYTES = 64


@dataclass(frozen=True)
class Buffer:
    """A scratch buffer: ``elements`` values of ``dtype`` (stored as ``storage``) at
    ``offset`` elements into arena ``arena``."""

    dtype: str
    storage: str
    arena: int
    offset: int
    elements: int


@dataclass(frozen=True)
class Scratch:
    """Scratch memory a stage op takes for its own work (``ops.StageRule.scratch``: a
    recurrence's projections and per-step sums): the ``index``-th array of ``node``'s
    stage, ``elements`` values of ``dtype``. The plan places it like a value written and
    last read in that stage (its prange group), so it reuses dead values' buffers, and
    the stage allocates nothing."""

    node: Hashable
    index: int
    dtype: str
    elements: int


@dataclass(frozen=True)
class BufferPlan:
    """The arenas, as (storage dtype, elements); the buffers in them; the buffer of each
    value the plan was given (its index in ``buffers``); and, for a value computed
    straight into its slice of a concatenate's result (``placed``), that concatenate
    and the element its slice starts at in the buffer (``within``)."""

    arenas: tuple[tuple[str, int], ...]
    buffers: tuple[Buffer, ...]
    home: dict[Hashable, int]
    within: dict[Hashable, tuple[Hashable, int]] = field(default_factory=dict)

    def start(self, value: Hashable) -> int:
        """The element ``value`` starts at in its arena."""
        return self.buffers[self.home[value]].offset + self.within.get(value, (None, 0))[1]


def plan_buffers(
    values: Iterable[tuple[int, Hashable, str, int]],
    last_use: dict[Hashable, int],
    storage=lambda dtype: dtype,
) -> BufferPlan:
    """The buffer plan of ``values``, given in evaluation order as (stage index, value,
    dtype, elements); ``last_use[value]`` is the last stage that may read it (whatever
    reads it through a view, or copies it out, included); ``storage(dtype)`` is the
    dtype its arena holds it as."""
    sizes: list[int] = []
    dtypes: list[str] = []
    free_after: list[int] = []  # the last stage reading each buffer's current value
    home: dict[Hashable, int] = {}
    for stage, value, dtype, elements in values:
        chosen = next(
            (b for b, d in enumerate(dtypes) if d == dtype and free_after[b] < stage), None
        )
        if chosen is None:
            sizes.append(0)
            dtypes.append(dtype)
            free_after.append(-1)
            chosen = len(sizes) - 1
        sizes[chosen] = max(sizes[chosen], elements, 1)
        free_after[chosen] = last_use[value]
        home[value] = chosen
    return _lay_out(sizes, dtypes, home, storage)


def last_uses(order, stage_of, users, stored, views, outputs, groups) -> dict:
    """The last stage that may read each ``stored`` value (``len(groups)``: the copies
    out after the last stage). ``order``: the values, producers first; ``users``: the
    stages reading each; ``views``: the stored values that are views of their first
    operand; ``groups``: the prange group of each stage."""
    end = len(groups)
    last_use = {n: max(users.get(n, {stage_of[n]})) for n in stored}
    # Outputs are read at the end (those not written in place are copied out then);
    # set before the views pass their last uses down, so that an output which is a
    # view of a scratch buffer keeps that buffer from being reused by later stages.
    for o in outputs:
        if o in last_use:
            last_use[o] = end
    # A view keeps the buffer it looks into alive; consumers first, so a view of a
    # view passes its last use down the chain to the buffer (in producer order the
    # buffer was reused while a transpose of a reshape of it was still to be read).
    for n in reversed(order):
        if n in views:
            base = n.args[0]
            if base in last_use:
                last_use[base] = max(last_use[base], last_use[n])
    # Stages sharing a prange run chunk by chunk: a buffer read in one must not be
    # reused by another stage of the group, so its value lives to the group's end.
    group_end = {g: i for i, g in enumerate(groups)}
    for n, used in last_use.items():
        if used < end:
            last_use[n] = group_end[groups[used]]
    return last_use


def _lay_out(sizes, dtypes, home, storage) -> BufferPlan:
    """Buffers placed one after another in the arena of their storage dtype."""
    arena_of: dict[str, int] = {}
    ends: list[int] = []
    buffers = []
    for size, dtype in zip(sizes, dtypes):
        kept = storage(dtype)
        arena = arena_of.setdefault(kept, len(arena_of))
        if arena == len(ends):
            ends.append(0)
        step = max(1, ALIGN_BYTES // np.dtype(kept).itemsize)
        offset = -(-ends[arena] // step) * step
        buffers.append(Buffer(dtype, kept, arena, offset, size))
        ends[arena] = offset + size
    arenas = tuple((dtype, ends[arena]) for dtype, arena in arena_of.items())
    return BufferPlan(arenas, tuple(buffers), home)
