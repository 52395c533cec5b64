"""The llvm lowering's first phase: an external function's IR in, its ``Schedule`` out.
No strings: which ops run together in which *stage*, in what order; which stages share
one ``prange`` (*groups*); which values must be arrays; and where each scratch value
lives (the ``BufferPlan``, ``buffers``). ``emit`` then names and emits what this
decides, and ``tests/buffer_plan.py`` checks the plan on its own.

>>> import nbyoc
>>> x = nbyoc.var("x", (64, 64))
>>> f = nbyoc.function([x], nbyoc.softmax(nbyoc.exp(x) @ x + 1.0, axis=-1))
>>> s = schedule(f, fuse=True, threshold=1 << 15)  # the add runs in the matmul's blocks
>>> [(stage.nodes[0].op.name, stage.epilogue) for stage in s.stages], s.groups
([('exp', False), ('matmul', False), ('add', True), ('softmax', False)], [0, 1, 1, 3])
"""

from __future__ import annotations

import collections
import itertools
import math
from dataclasses import dataclass, field, replace

from ...ir.nodes import Call, Expr, Function, Tuple
from ...ir.traversal import post_order
from .buffers import BufferPlan, Scratch, last_uses
from .buffers import plan_buffers as plan_arena
from .ops import STAGE_RULES, is_function_op, runs_epilogue
from .rows import RowGroup, RowGroupPlan, row_domain
from .rules import SCALAR_RULES, storage_dtype

#: Ops that are views of their operand (no stage of work): the last part of what llvm
#: supports, beside rules.SCALAR_RULES and ops.STAGE_RULES.
VIEWS = ("reshape", "transpose", "slice")
#: A fused loop nest holds at most this many ops; a longer run of elementwise ops
#: continues in the next nest (see ``plan_stages``). LLVM's time on one loop body grows
#: faster than its length (measured: 300 transcendental-heavy ops in one loop 6.5 s,
#: 600 ops 18 s, 1000 ops 54 s), and consecutive parallel nests share one prange, so the
#: values crossing a cut stay in cache.
MAX_NEST_OPS = 64
#: Nests of at least this many ops become stage functions (``stages``); smaller ones
#: stay loops in the kernel: a function of its own costs Numba about 0.2 s to compile,
#: more than a few ops cost anywhere (the reference graph's cold compile: 1.9 s inline,
#: 2.1 s as a stage function).
FUNCTION_MIN_OPS = 8


@dataclass
class Stage:
    nodes: list[Call]
    shape: tuple[int, ...]
    nest: bool  # elementwise loop nest, or a single other op (or a row group)
    rows: RowGroup | None = None  # a row group (``rows``): reductions and their nests
    #: A nest run block by block inside the matmul or conv stage before it (``StageRule.epilogue``).
    epilogue: bool = False
    #: A nest of few ops made a stage function all the same: it runs in parallel, alone
    #: or sharing a prange with the stages around it (``plan_groups``).
    function: bool = False


@dataclass(frozen=True)
class Schedule:
    """The order a kernel computes its values in, and where it keeps them: its stages
    in order and the stage of every op; the prange group of every stage (the values read
    in a group stay until its end); the values that must be arrays (``stored``: they
    leave their stage or are outputs), those of them that are views, the outputs
    written in place (in order, each once), and the buffer plan of the scratch values,
    the scratch arrays stage ops take for their own work (``scratch``, by stage) among
    them."""

    stages: list[Stage]
    stage_of: dict[Call, int]
    groups: list[int]
    stored: frozenset[Call]
    views: frozenset[Call]
    in_place: tuple[Call, ...]
    plan: BufferPlan
    scratch: dict[int, list[Scratch]] = field(default_factory=dict)


def function_outputs(func: Function) -> list[Expr]:
    """The values ``func`` returns, in order."""
    return list(func.body.fields) if isinstance(func.body, Tuple) else [func.body]


def schedule(func: Function, fuse: bool, threshold: int) -> Schedule:
    """``func``'s schedule (see the module docstring). ``fuse=False`` gives every
    elementwise op a stage of its own; stages of at least ``threshold`` elements may
    run in parallel (``plan_groups``)."""
    outputs = function_outputs(func)
    nodes = post_order(outputs)
    stages, stage_of = plan_stages(nodes, fuse)
    users: dict[Expr, set[int]] = {}
    for node in nodes:
        if isinstance(node, Call):
            for a in node.args:
                users.setdefault(a, set()).add(stage_of[node])
    is_output = set(outputs)
    # A value must be an array if it leaves its nest, or is an output.
    stored = {
        n
        for n in stage_of
        if not (stages[stage_of[n]].nest or stages[stage_of[n]].rows)
        or n in is_output
        or any(u != stage_of[n] for u in users.get(n, ()))
    }
    views = {n for n in stored if n.op.name in VIEWS}
    groups = plan_groups(stages, threshold)
    last_use = last_uses(nodes, stage_of, users, stored, views, is_output, groups)
    in_place = tuple(dict.fromkeys(o for o in outputs if isinstance(o, Call) and o not in views))
    scratch = stage_scratch(stages)
    group_end = {g: k for k, g in enumerate(groups)}
    for index, arrays in scratch.items():  # (alive while its stage's group runs)
        last_use.update({array: group_end[groups[index]] for array in arrays})
    placed = concatenated_in_place(nodes, stored - views, set(in_place))
    plan = plan_buffers(stages, stored - views, set(in_place), last_use, scratch, placed)
    return Schedule(
        stages, stage_of, groups, frozenset(stored), frozenset(views), in_place, plan, scratch
    )


def stage_scratch(stages: list[Stage]) -> dict[int, list[Scratch]]:
    """The scratch arrays of each stage whose op takes some (``StageRule.scratch``), by
    stage index.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4, 4))
    >>> stages, _ = plan_stages([nbyoc.exp(x) @ x], fuse=True)
    >>> stage_scratch(stages)  # (a matmul's tiles need none)
    {}
    """
    found = {}
    for index, stage in enumerate(stages):
        if stage.nest or stage.rows is not None:
            continue
        node = stage.nodes[0]
        rule = STAGE_RULES.get(node.op.name)
        if rule is not None and rule.scratch is not None:
            arrays = rule.scratch(node)
            found[index] = [Scratch(node, k, d, n) for k, (d, n) in enumerate(arrays)]
    return found


def parallel_size(shape: tuple[int, ...], threshold: int) -> bool:
    """Whether a loop nest over ``shape`` is large enough to run in parallel (a 0-d
    result or a single element has no loop to share out)."""
    return bool(shape) and math.prod(shape) >= max(threshold, 2)


def plan_stages(nodes: list[Expr], fuse: bool) -> tuple[list[Stage], dict[Call, int]]:
    """Stages in evaluation order. An elementwise node joins the latest loop nest of
    its shape when everything it reads is ready by then: its producers' nest, or a
    *sibling's* (``[a + b, a - b]`` is one loop writing two outputs, and ``x * 0.5``
    joins the nest of ``tanh(x * x ...)`` instead of a pass of its own)."""
    stages: list[Stage] = []
    stage_of: dict[Call, int] = {}
    last_nest: dict[tuple[int, ...], int] = {}  # shape -> its latest nest stage
    for node in nodes:
        if not isinstance(node, Call):
            continue
        if node.op.name in SCALAR_RULES:
            shape = node.type.shape
            s = last_nest.get(shape)
            if fuse and s is not None:
                full = len(stages[s].nodes) >= MAX_NEST_OPS
                if not full and all(stage_of.get(a, -1) <= s for a in node.args):
                    stages[s].nodes.append(node)
                    stage_of[node] = s
                    continue
            stages.append(Stage([node], shape, True))
            last_nest[shape] = len(stages) - 1
        else:
            stages.append(Stage([node], node.type.shape, False))
        stage_of[node] = len(stages) - 1
    if fuse:
        stages = plan_row_groups(stages)
        stage_of = {n: k for k, stage in enumerate(stages) for n in stage.nodes}
        plan_epilogues(stages)
    return stages, stage_of


def plan_row_groups(stages: list[Stage]) -> list[Stage]:
    """``stages`` with each reduction over trailing axes merged with the elementwise
    nests around it that a row loop can run (``rows``) into one row group."""
    merged: list[Stage] = []
    index = 0
    while index < len(stages):
        stage = stages[index]
        domain = None if stage.nest else row_domain(stage.nodes[0])
        if domain is None:
            merged.append(stage)
            index += 1
            continue
        plan = RowGroupPlan(domain)
        start = len(merged)  # full-shape nests just before it feed it in the row loop
        while start > 0 and merged[start - 1].nest and merged[start - 1].shape == domain.shape:
            start -= 1
        taken = [s for s in merged[start:] if plan.accepts_nest(s.nodes, s.shape)]
        if len(taken) < len(merged) - start:  # keep the group contiguous
            plan = RowGroupPlan(domain)
            taken, start = [], len(merged)
        if not plan.accepts_reduction(stage.nodes[0]):  # e.g. a strided operand
            merged.append(stage)
            index += 1
            continue
        del merged[start:]
        taken.append(stage)
        index += 1
        while index < len(stages):
            later = stages[index]
            if later.nest:
                ok = plan.accepts_nest(later.nodes, later.shape)
            else:
                ok = plan.accepts_reduction(later.nodes[0])
            if not ok:
                break
            taken.append(later)
            index += 1
        nodes = [n for s in taken for n in s.nodes]
        group = RowGroup(domain, nodes, plan.full, plan.reductions)
        merged.append(Stage(nodes, domain.shape, False, group))
    return merged


def plan_groups(stages: list[Stage], threshold: int) -> list[int]:
    """A group number per stage; the stages of one group may run in one prange.
    Consecutive parallel stage functions of one shape share one; so do consecutive
    parallel stages over one leading axis (``lead_size``: the MLP's matmuls, their
    epilogues and its softmax, over rows; a CNN's convs and activations, image by
    image) while each reads what the group computed only at the leading elements it
    writes (``reads_by_lead``), views between them included. Every parallel loop
    wakes the worker threads, which cost 7-77 us each on this project's VM: PP-OCR's
    classifier ran 55 of them a call. Every other stage is a group of its own."""
    groups: list[int] = []
    lead: int | None = None  # the current group's leading axis, if it has one
    busy = False  # whether the current group has a stage large enough to run in parallel
    parallel_groups: set[int] = set()
    computed: set[Expr] = set()  # the values the current group computes
    for index, stage in enumerate(stages):
        after = stages[index + 1] if index + 1 < len(stages) else None
        epilogue = after if after is not None and after.epilogue else None
        size = lead_size(stage)
        # An epilogue runs inside its producer's loop: one group, so nothing either
        # reads is reused before both are done.
        joins = stage.epilogue or (
            index > 0
            and is_function_stage(stage)
            and is_function_stage(stages[index - 1])
            and stage.shape == stages[index - 1].shape
            and parallel_size(stage.shape, threshold)
        )
        wide = size is not None and parallel_size(stage_shape(stage), threshold)
        kind = stage.nodes[0].op.name
        if not joins and lead is not None:
            if stage.nest or stage.rows is not None or is_function_op(kind):
                # A stage too small to run in parallel alone (a squeeze-and-excite
                # block's 1x1 convs on (8, C, 1, 1)) runs chunk by chunk in a
                # parallel group rather than end it.
                joins = (
                    size == lead
                    and (wide or busy)
                    and reads_by_lead(stage, epilogue, computed, lead)
                )
            elif kind in VIEWS:
                joins = view_keeps_lead(stage.nodes[0], computed, lead)
        if joins:
            groups.append(groups[-1])
            busy = busy or wide
        else:
            groups.append(index)
            computed = set()
            lead, busy = size, wide
        if busy:
            parallel_groups.add(groups[-1])
        computed.update(stage.nodes)
    sizes = collections.Counter(groups)
    for stage, group in zip(stages, groups):
        if stage.nest and not stage.epilogue:
            # A parallel nest in the kernel is a prange Numba outlines and compiles per
            # shape (about 1.5 s each in a detector's kernel); as a stage function it is
            # compiled once per structure and run by a driver.
            shared = sizes[group] > 1 and group in parallel_groups
            stage.function = shared or parallel_size(stage.shape, threshold)
    return groups


def stage_shape(stage: Stage) -> tuple[int, ...]:
    """The shape a stage's work runs over (a row group's rows and columns, a matmul's
    or conv's result)."""
    if stage.rows is not None:
        return stage.rows.domain.shape
    return stage.shape if stage.nest else stage.nodes[0].type.shape


def lead_size(stage: Stage) -> int | None:
    """The size of the leading axis a stage's work may be cut along, chunk
    by chunk with the stages around it, or None. An elementwise nest, a row group
    reducing past its first axis, and a matmul or conv (``StageBody.lead``) are cut
    along their result's first axis (a batched matmul's only where its left operand
    has the same batch axes)."""
    if stage.epilogue or (stage.rows is not None and stage.rows.domain.split < 1):
        return None
    if not stage.nest and stage.rows is None:
        node = stage.nodes[0]
        if not is_function_op(node.op.name) or node.args[0].type.ndim != node.type.ndim:
            return None
        rule = STAGE_RULES[node.op.name]
        if rule.epilogue is not None and not rule.epilogue(node):
            return None  # a 1-D or integer product: plain loops, not cut by lead
    shape = stage_shape(stage)
    return shape[0] if shape and shape[0] >= 2 else None


def reads_by_lead(stage: Stage, epilogue, computed: set, lead: int) -> bool:
    """Whether ``stage`` (with its ``epilogue``) reads the values its group has
    ``computed`` only at the leading elements it writes: each such operand has the
    rank of what it is read into and the group's leading axis (NumPy's broadcasting
    aligns the trailing axes, so the first axes then pair up); a matmul's or conv's
    weights are no such value."""
    nodes = [*stage.nodes, *(epilogue.nodes if epilogue is not None else [])]
    members = set(nodes)
    if stage.rows is not None:
        rank = len(stage.rows.domain.shape)
    else:
        rank = len(stage.shape) if stage.nest else nodes[0].type.ndim
    single = not stage.nest and stage.rows is None  # a matmul, conv or pool
    for node in nodes:
        for position, a in enumerate(node.args):
            if a in members or a not in computed:
                continue
            if single and node is nodes[0] and position > 0:  # its weights
                return False
            if a.type.ndim != rank or a.type.shape[0] != lead:
                return False
    return True


def view_keeps_lead(node: Call, computed: set, lead: int) -> bool:
    """Whether a view may sit inside a group over ``lead``: it reads nothing the
    group computes, or it reshapes such a value keeping its leading axis (so the
    leading element's data stays where it was)."""
    source = node.args[0]
    if source not in computed:
        return True
    return (
        node.op.name == "reshape"
        and source.type.ndim >= 1
        and node.type.ndim >= 1
        and source.type.shape[0] == lead
        and node.type.shape[0] == lead
    )


def concatenated_in_place(nodes, materialised, in_place) -> dict[Call, tuple[Call, int]]:
    """The values computed straight into their slice of a concatenate's result, each
    with that concatenate and the element its slice starts at: the operands that are
    arrays of their own (not views, not outputs written in place, not read twice by the
    concatenate, not placed in another one or holding placed values themselves), of a
    concatenate kept in scratch whose every operand is one contiguous run of its result
    (the sizes before the axis are all 1, as in a batch-1 channel concatenate). Such an
    operand's stage writes the concatenate's memory and the concatenate copies nothing
    for it: nudenet's and ddddocr's detectors spent 1.8 and 2.4 ms a call (8% and 5%)
    copying operands into 19 and 22 concatenates.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (1, 2, 3))
    >>> a, b = nbyoc.exp(x), nbyoc.sqrt(x)
    >>> cat = nbyoc.concatenate([a, b, x], axis=1)
    >>> placed = concatenated_in_place(post_order([cat + 1.0]), {a, b, cat}, set())
    >>> [(operand.op.name, at) for operand, (_, at) in placed.items()]
    [('exp', 0), ('sqrt', 6)]
    """
    placed: dict[Call, tuple[Call, int]] = {}
    holders: set[Call] = set()
    for node in nodes:
        if not (isinstance(node, Call) and node.op.name == "concatenate"):
            continue
        shape, axis = node.type.shape, node.attrs["axis"]
        if node not in materialised or node in in_place or node in placed:
            continue
        if not all(isinstance(d, int) for d in shape) or math.prod(shape[:axis]) != 1:
            continue
        inner, offset = math.prod(shape[axis + 1 :]), 0
        counts = collections.Counter(node.args)
        sliced = _sliced_whole(node)
        for k, a in enumerate(node.args):
            # (an operand, or the value the slices from operand k on cut in order)
            whole = sliced.get(k, a)
            if (
                isinstance(whole, Call)
                and whole in materialised
                and whole not in in_place
                and whole not in placed
                and whole not in holders
                and whole.type.dtype == node.type.dtype
                and (counts[a] == 1 or whole is not a)
            ):
                placed[whole] = (node, offset * inner)
                holders.add(node)
            offset += a.type.shape[axis]
    return placed


def slice_along(view: Expr, axis: int) -> tuple[Call, int, int] | None:
    """(the sliced value, first, end) when ``view`` is a unit-step slice of a value along
    ``axis`` only, else None.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (1, 6, 4))
    >>> s = nbyoc.slice(nbyoc.exp(x), starts=(2,), ends=(5,), axes=(1,))
    >>> slice_along(s, 1)[1:]
    (2, 5)
    """
    if not (isinstance(view, Call) and view.op.name == "slice"):
        return None
    source = view.args[0]
    starts, ends, steps = view.attrs["starts"], view.attrs["ends"], view.attrs["steps"]
    for d, size in enumerate(source.type.shape):
        if steps[d] != 1 or (d != axis and (starts[d] != 0 or ends[d] != size)):
            return None
    return source, starts[axis], ends[axis]


def _sliced_whole(node: Call) -> dict[int, Call]:
    """The operands of concatenate ``node`` that begin a run of its operands slicing
    one value along its axis from first to last element, in order (a YOLO C2f block's
    split halves of a conv's output), each with that value: placed at the run's slice,
    the value's own writes put the slices where the concatenate wants them."""
    axis, runs, k = node.attrs["axis"], {}, 0
    args = node.args
    while k < len(args):
        cut = slice_along(args[k], axis)
        if cut is None or cut[1] != 0 or not all(isinstance(d, int) for d in cut[0].type.shape):
            k += 1
            continue
        source, end, j = cut[0], cut[2], k + 1
        while end < source.type.shape[axis] and j < len(args):
            following = slice_along(args[j], axis)
            if following is None or following[0] is not source or following[1] != end:
                break
            end, j = following[2], j + 1
        if end == source.type.shape[axis]:
            runs[k] = source
        k = j
    return runs


def plan_buffers(stages, materialised, in_place, last_use, scratch=None, placed=None) -> BufferPlan:
    """The buffer plan (``buffers``) of the ``materialised`` values but the outputs
    written ``in_place``, and of the stages' ``scratch`` arrays, in stage order. A
    value ``placed`` in a concatenate (``concatenated_in_place``) lives in that
    concatenate's buffer, which is then taken at the first such value's stage and kept
    until the last read of any of them."""
    placed = placed or {}
    first: dict[Call, int] = {}  # each holding concatenate's first placed value's stage
    last_use = dict(last_use)
    values = []
    for index, stage in enumerate(stages):
        for node in stage.nodes:
            if node not in materialised or node in in_place:
                continue
            if node in placed:
                holder = placed[node][0]
                first.setdefault(holder, index)
                last_use[holder] = max(last_use[holder], last_use[node])
                continue
            values.append((index, node, node.type.dtype, node.type.size))
        values += [(index, s, s.dtype, s.elements) for s in (scratch or {}).get(index, [])]
    # Each holder is written from its first placed value's stage on: planned there (a
    # stable sort keeps the order within a stage).
    values = sorted(((first.get(v[1], v[0]), *v[1:]) for v in values), key=lambda v: v[0])
    plan = plan_arena(values, last_use, storage_dtype)
    if not placed:
        return plan
    home = dict(plan.home)
    home.update({value: home[holder] for value, (holder, _) in placed.items()})
    return replace(plan, home=home, within=dict(placed))


def is_function_stage(stage: Stage) -> bool:
    """Whether a stage is emitted as a stage function: a loop nest of at least
    FUNCTION_MIN_OPS ops (fewer compile faster as loops in the kernel itself), unless
    it is an epilogue."""
    return (
        stage.nest
        and not stage.epilogue
        and (stage.function or len(stage.nodes) >= FUNCTION_MIN_OPS)
    )


def plan_epilogues(stages: list[Stage]) -> None:
    """Mark each elementwise nest right after a matmul or conv of its shape as that
    stage's epilogue: it runs on each block of the result just written (a plane, a
    row), which is still in cache, instead of in a pass of its own."""
    for stage, after in itertools.pairwise(stages):
        if stage.nest or stage.rows is not None or not after.nest or after.shape != stage.shape:
            continue
        node = stage.nodes[0]
        if runs_epilogue(node) and stage.shape:
            after.epilogue = True
