"""An llvm kernel's buffer plan, checked from the graph alone.

The lowering plans scratch memory by liveness (``nbyoc.codegen.llvm.buffers``);
this checker works out, by itself, when each value is written and when it may
still be read, and refuses a plan that puts two values whose lives overlap in
overlapping memory. It shares nothing with the lowering's own liveness: it is
given only the graph, the stage each op runs in, the prange group of each stage
and the buffer of each value.

When a value lives, for the checker:

- it is written in its stage, and read in the stage of every op that takes it
  (a row group, a fused nest and its producer count as one stage);
- a view (reshape, transpose, slice) is its operand's memory: whatever reads the
  view reads the operand then;
- an output is read after the last stage, when the kernel copies it out (an
  output that is a view of a scratch value keeps that value to the end);
- the stages of one prange group run chunk by chunk on every thread at once, so
  a value written or read in a group lives from the group's first stage to its
  last;
- a stage op's own scratch array (``Scratch``: a recurrence's projections and
  states) lives in its op's stage, its group's span;
- a value computed straight into its slice of a concatenate's result (the plan's
  ``within``) is that slice's data: it must sit exactly at its slice (or, for a value
  the concatenate reads as slices, where its slices land), which the checker works
  out from the graph, and only it may share those bytes with the concatenate.

``install()`` (called by the test session's set-up) checks every kernel the suite
lowers; ``check_buffer_plan`` checks one.
"""

from __future__ import annotations

from nbyoc.codegen.llvm.buffers import Scratch
from nbyoc.ir.nodes import Call, Tuple
from nbyoc.ir.traversal import post_order

VIEWS = ("reshape", "transpose", "slice")


class BufferPlanError(AssertionError):
    """A buffer plan lets a write clobber a value that may still be read."""


def check_buffer_plan(func, schedule) -> None:
    """Raise ``BufferPlanError`` if ``schedule`` (``Lowered.schedule`` of ``func``'s
    kernel) lets a value be overwritten while it, a view of it, or an output still to
    be copied from it can be read; or puts a value outside its buffer or arena."""
    if schedule is None:
        return
    outputs = list(func.body.fields) if isinstance(func.body, Tuple) else [func.body]
    nodes = [n for n in post_order(outputs) if isinstance(n, Call)]
    stage_of = schedule.stage_of
    end = len(schedule.groups)
    first, last = _group_spans(schedule.groups)

    def span(stage: int) -> tuple[int, int]:
        if stage >= end:  # the copies out, after every stage
            return end, end
        group = schedule.groups[stage]
        return first[group], last[group]

    def memory_of(node):
        """The value whose memory ``node`` is (itself, or what its views look into)."""
        while isinstance(node, Call) and node.op.name in VIEWS and node not in schedule.plan.home:
            node = node.args[0]
        return node

    lives: dict = {}  # value (or a stage's scratch) -> [first, last] stage it is alive in
    for node in nodes:
        if node in schedule.plan.home:
            lives[node] = list(span(stage_of[node]))
    for key in schedule.plan.home:
        if isinstance(key, Scratch):
            lives[key] = list(span(stage_of[key.node]))
    for node in nodes:
        for operand in node.args:
            base = memory_of(operand)
            if base in lives:
                lives[base][1] = max(lives[base][1], span(stage_of[node])[1])
    for output in outputs:
        base = memory_of(output)
        if base in lives:
            lives[base][1] = end
    _check_places(schedule.plan, lives)
    _check_overlaps(schedule.plan, lives)


def _group_spans(groups: list[int]) -> tuple[dict[int, int], dict[int, int]]:
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for stage, group in enumerate(groups):
        first.setdefault(group, stage)
        last[group] = stage
    return first, last


def _size(value) -> int:
    return value.elements if isinstance(value, Scratch) else value.type.size


def _dtype(value) -> str:
    return value.dtype if isinstance(value, Scratch) else value.type.dtype


def _extent(plan, value) -> tuple[int, int, int]:
    """(arena, first element, end element) of ``value`` in its arena (a value computed in
    its slice of a concatenate's result starts that far into the buffer)."""
    buffer = plan.buffers[plan.home[value]]
    start = buffer.offset + plan.within.get(value, (None, 0))[1]
    return buffer.arena, start, start + max(_size(value), 1)


def _slice_start(concatenate, value) -> int:
    """Where ``value`` must start in ``concatenate``'s result, from the graph: at its
    operand's slice (the operands before it along the axis, times the elements after
    the axis), or, for a value the concatenate reads as slices along its axis, where
    each such slice's own part of the value lands there (they must agree)."""
    axis, before, starts = concatenate.attrs["axis"], 0, set()
    inner = 1
    for size in concatenate.type.shape[axis + 1 :]:
        inner *= size
    for a in concatenate.args:
        if a is value:
            return before * inner
        if isinstance(a, Call) and a.op.name == "slice" and a.args[0] is value:
            first, steps = a.attrs["starts"], a.attrs["steps"]
            others = [d for d in range(a.type.ndim) if d != axis]
            if any(steps[d] != 1 for d in range(a.type.ndim)) or any(
                a.type.shape[d] != value.type.shape[d] for d in others
            ):
                raise BufferPlanError(f"{value!r} is read by {concatenate!r} other than whole")
            starts.add((before - first[axis]) * inner)
        before += a.type.shape[axis]
    if len(starts) != 1:
        raise BufferPlanError(f"{value!r} has no one place in {concatenate!r} ({starts})")
    return starts.pop()


def _check_places(plan, lives) -> None:
    for value, (holder, at) in plan.within.items():
        leading = 1
        for size in holder.type.shape[: holder.attrs["axis"]]:
            leading *= size
        if leading != 1 or at != _slice_start(holder, value):
            raise BufferPlanError(f"{value!r} is not placed at its slice of {holder!r}")
        if plan.home[value] != plan.home[holder]:
            raise BufferPlanError(f"{value!r} is not in the buffer of {holder!r}")
    for value in lives:
        buffer = plan.buffers[plan.home[value]]
        arena, start, stop = _extent(plan, value)
        if start < buffer.offset or stop > buffer.offset + buffer.elements:
            raise BufferPlanError(f"{value!r} does not fit its buffer ({buffer})")
        if stop > plan.arenas[arena][1]:
            raise BufferPlanError(f"{value!r} ends past its arena {plan.arenas[arena]}")
        if buffer.dtype != _dtype(value):
            raise BufferPlanError(f"{value!r} is kept in a {buffer.dtype} buffer")


def _check_overlaps(plan, lives) -> None:
    """No two values alive at once share a byte: sorted by start, each arena's values
    are compared with every one whose life has not ended."""
    events = sorted(lives, key=lambda v: (lives[v][0], _extent(plan, v)))
    alive: list = []
    for value in events:
        born = lives[value][0]
        alive = [other for other in alive if lives[other][1] >= born]
        arena, start, stop = _extent(plan, value)
        for other in alive:
            other_arena, other_start, other_stop = _extent(plan, other)
            # (a value computed in its slice of a concatenate is that slice's data)
            if plan.within.get(value, (None,))[0] is other:
                continue
            if plan.within.get(other, (None,))[0] is value:
                continue
            if other_arena == arena and start < other_stop and other_start < stop:
                raise BufferPlanError(
                    f"{value!r} (alive in stages {lives[value]}) is written over "
                    f"{other!r} (alive in stages {lives[other]}) in arena {arena}"
                )
        alive.append(value)


def install() -> None:
    """Check the buffer plan of every kernel lowered from now on in this process (the
    plan ``lower`` gets from its first phase, before it emits anything from it)."""
    from nbyoc.codegen.llvm import lower as lowering

    plan = lowering.schedule
    if getattr(plan, "checks_buffers", False):
        return

    def checked(func, *args, **kwargs):
        made = plan(func, *args, **kwargs)
        check_buffer_plan(func, made)
        return made

    checked.checks_buffers = True
    checked.__wrapped__ = plan
    lowering.schedule = checked
