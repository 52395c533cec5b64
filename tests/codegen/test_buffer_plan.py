"""The buffer-plan checker (tests/buffer_plan.py) against plans known to be wrong, and
the llvm lowering's plans against it (every kernel the suite lowers is checked too:
tests/conftest.py installs it)."""

import dataclasses

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.llvm import buffers, lower
from nbyoc.codegen.llvm import schedule as scheduling

from ..buffer_plan import BufferPlanError, check_buffer_plan
from ..helpers import output_view_graph


def _output_view_graph():
    return output_view_graph().with_attrs(global_symbol="k")


def _last_uses_before_the_fix(order, stage_of, users, stored, views, outputs, groups):
    """The lowering's liveness as it was before issue 36's fix: the views passed their
    last uses down to their buffers *before* the outputs were marked as read at the
    end, so a buffer seen only through an output view was free after its last stage."""
    end = len(groups)
    last_use = {n: max(users.get(n, {stage_of[n]})) for n in stored}
    for n in reversed(order):
        if n in views and n.args[0] in last_use:
            last_use[n.args[0]] = max(last_use[n.args[0]], last_use[n])
    for o in outputs:
        if o in last_use:
            last_use[o] = end
    group_end = {g: i for i, g in enumerate(groups)}
    return {n: group_end[groups[u]] if u < end else u for n, u in last_use.items()}


@pytest.fixture
def fix_reverted(monkeypatch):
    """The lowering with the liveness before the fix, and without the suite's own check
    of every plan (which would refuse it first)."""
    plan = lower.schedule
    monkeypatch.setattr(lower, "schedule", getattr(plan, "__wrapped__", plan))
    monkeypatch.setattr(scheduling, "last_uses", _last_uses_before_the_fix)


def test_the_plan_of_the_repro_passes_the_checker():
    f = _output_view_graph()
    check_buffer_plan(f, lower.lower(f).schedule)


def test_the_checker_catches_the_output_view_bug_with_the_fix_reverted(fix_reverted):
    f = _output_view_graph()
    with pytest.raises(BufferPlanError, match="is written over"):
        check_buffer_plan(f, lower.lower(f).schedule)


def test_the_reverted_plan_computes_wrong_numbers(fix_reverted):
    # What the checker refuses is a real miscompile, not a false alarm.
    f = _output_view_graph()
    data = np.random.default_rng(1).standard_normal((1, 4, 32, 32)).astype(np.float32)
    want = nbyoc.compile(f, backend="host")(data)
    # (a threshold of its own: not the correct kernel, compiled for the same graph by
    # another test of this process, from memory)
    options = {"llvm": {"parallel_threshold": (1 << 15) + 1}}
    got = nbyoc.compile(f, backend="llvm", options=options)(data)
    assert not np.array_equal(got[0], want[0])


def _plan_of(f):
    return lower.lower(f.with_attrs(global_symbol="k")).schedule


def test_the_checker_refuses_a_value_written_over_a_live_one():
    x = nbyoc.var("x", (16, 16))
    a = x @ x
    b = a @ a  # a is still read below, while b is written
    f = nbyoc.function([x], nbyoc.sum(b @ a, axis=0))
    schedule = _plan_of(f)
    check_buffer_plan(f.with_attrs(global_symbol="k"), schedule)
    # every scratch value moved to the first buffer: something alive gets overwritten
    plan = schedule.plan
    assert len(plan.buffers) >= 2
    home = dict.fromkeys(plan.home, 0)
    biggest = max(b.elements for b in plan.buffers)
    first = buffers.Buffer(plan.buffers[0].dtype, plan.buffers[0].storage, 0, 0, biggest)
    bad = buffers.BufferPlan(((plan.arenas[0][0], biggest),), (first,), home)
    with pytest.raises(BufferPlanError):
        check_buffer_plan(f.with_attrs(global_symbol="k"), dataclasses.replace(schedule, plan=bad))


def test_the_checker_refuses_a_value_outside_its_arena():
    x = nbyoc.var("x", (8, 8))
    f = nbyoc.function([x], nbyoc.sum(nbyoc.exp(x) @ x, axis=0)).with_attrs(global_symbol="k")
    schedule = lower.lower(f).schedule
    plan = schedule.plan
    assert plan.buffers, "this graph keeps its product in scratch"
    short = buffers.BufferPlan(((plan.arenas[0][0], 1),), plan.buffers, plan.home)
    with pytest.raises(BufferPlanError, match="past its arena"):
        check_buffer_plan(f, dataclasses.replace(schedule, plan=short))


def test_buffers_share_one_arena_per_dtype_each_aligned():
    x = nbyoc.var("x", (33, 17))
    n = nbyoc.var("n", (33, 17), "int32")
    a = nbyoc.exp(x) @ nbyoc.transpose(x)
    b = nbyoc.sum(a, axis=1) + nbyoc.sum(n, axis=1).astype("float32")
    f = nbyoc.function([x, n], [b, a @ a]).with_attrs(global_symbol="k")
    lowered = lower.lower(f)
    plan = lowered.schedule.plan
    assert len(lowered.scratch) == len({b.storage for b in plan.buffers})
    for buffer in plan.buffers:
        assert buffer.offset * np.dtype(buffer.storage).itemsize % buffers.ALIGN_BYTES == 0
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((33, 17)).astype(np.float32),
            rng.integers(-5, 5, (33, 17)).astype(np.int32)]  # fmt: skip
    want = nbyoc.compile(f, backend="host")(*args)
    got = nbyoc.compile(f, backend="llvm")(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-3)
