"""Operands computed straight into their slice of a concatenate's result
(``schedule.concatenated_in_place``): which are placed, that the numbers are the
host's (every placed kernel's buffer plan is also checked by ``tests/buffer_plan.py``),
and that the concatenate copies nothing for them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.llvm.schedule import schedule

from ..helpers import assert_close_to_host, examples

PARALLEL = {"llvm": {"parallel_threshold": 1}}


def _placed(func) -> dict:
    """The plan's placed values of ``func``'s kernel, as {element offset: op name}."""
    plan = schedule(func, fuse=True, threshold=1).plan
    return {at: value.op.name for value, (_, at) in plan.within.items()}


def _c2f_block(channels: int = 8, size: int = 6):
    """A YOLO C2f block's shape of graph: a conv split in two halves, two convs on the
    second, and the four concatenated along the channels, then a 1x1 conv."""
    rng = np.random.default_rng(3)
    x = nbyoc.var("x", (1, channels, size, size))

    def conv(v, out, k):
        w = nbyoc.const(rng.standard_normal((out, v.type.shape[1], k, k)).astype(np.float32))
        y = nbyoc.conv(v, w, pads=(k // 2,) * 4)
        return y * nbyoc.sigmoid(y)

    first = conv(x, 2 * channels, 1)
    low = nbyoc.slice(first, starts=(0,), ends=(channels,), axes=(1,))
    high = nbyoc.slice(first, starts=(channels,), ends=(2 * channels,), axes=(1,))
    m1 = conv(high, channels, 3)
    m2 = conv(m1, channels, 3)
    joined = nbyoc.concatenate([low, high, m1, m2], axis=1)
    return nbyoc.function([x], conv(joined, channels, 1))


def test_a_c2f_blocks_convs_write_their_slices_of_the_concatenate():
    func = _c2f_block()
    # the first conv's output (split in two halves, both concatenated in order) at 0;
    # m1 after its 16 channels of 36 positions; m2 after m1
    assert _placed(func) == {0: "multiply", 16 * 36: "multiply", 24 * 36: "multiply"}
    fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
    x = np.random.default_rng(0).standard_normal((1, 8, 6, 6)).astype(np.float32)
    assert_close_to_host(fn, func, [x], rtol=1e-4, atol=1e-4)


def test_the_concatenate_copies_only_the_operands_not_placed():
    x = nbyoc.var("x", (1, 3, 64))
    a, b = nbyoc.exp(x), nbyoc.sqrt(nbyoc.abs(x))
    func = nbyoc.function([x], nbyoc.concatenate([a, x, b], axis=1) * 2.0)
    assert _placed(func) == {0: "exp", 6 * 64: "sqrt"}
    fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
    source = fn.get_source()
    # one copy, of x (an input, not computed here), and no part copy of exp or sqrt
    assert source.count("profile: concatenate") <= 1
    data = np.random.default_rng(1).standard_normal((1, 3, 64)).astype(np.float32)
    assert_close_to_host(fn, func, [data])


@pytest.mark.parametrize("halves", ["in order", "swapped", "one half", "a gap", "strided"])
def test_a_value_is_placed_only_where_its_slices_cover_it_in_order(halves):
    """The slices of one value, concatenated: the value itself goes to the run's place
    only when they are its whole, in order, at unit steps; else they are copied."""
    x = nbyoc.var("x", (1, 6, 10))
    whole = nbyoc.exp(x)
    cut = {
        "in order": [(0, 3, 1), (3, 6, 1)],
        "swapped": [(3, 6, 1), (0, 3, 1)],
        "one half": [(0, 3, 1)],
        "a gap": [(0, 2, 1), (3, 6, 1)],
        "strided": [(0, 6, 2), (1, 6, 2)],
    }[halves]
    parts = [nbyoc.slice(whole, starts=(a,), ends=(b,), axes=(1,), steps=(s,)) for a, b, s in cut]
    joined = nbyoc.concatenate([nbyoc.sin(x), *parts, nbyoc.cos(x)], axis=1)
    func = nbyoc.function([x], joined * 2.0)
    placed = _placed(func)
    expected = {0: "sin", 6 * 10: "exp"} if halves == "in order" else {0: "sin"}
    expected[(6 + sum(len(range(a, b, s)) for a, b, s in cut)) * 10] = "cos"
    assert placed == expected
    fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
    data = np.random.default_rng(5).standard_normal((1, 6, 10)).astype(np.float32)
    assert_close_to_host(fn, func, [data])


@pytest.mark.parametrize(
    "case",
    ["batch of two", "read twice", "result is the output", "operand is an output"],
)
def test_operands_stay_where_placing_them_would_be_wrong(case):
    batch = 2 if case == "batch of two" else 1
    x = nbyoc.var("x", (batch, 4, 16))
    a = nbyoc.exp(x)
    b = nbyoc.tanh(x)
    parts = [a, a, b] if case == "read twice" else [a, b]
    joined = nbyoc.concatenate(parts, axis=1)
    if case == "result is the output":
        outputs = [joined]
    elif case == "operand is an output":
        outputs = [joined + 1.0, a]
    else:
        outputs = [joined + 1.0]
    func = nbyoc.function([x], outputs)
    placed = _placed(func)
    if case in ("batch of two", "result is the output"):
        assert placed == {}  # (slices not contiguous; the result is the caller's array)
    elif case == "read twice":
        assert placed == {2 * 4 * 16: "tanh"}
    else:  # an output kept in scratch and copied out at the end may still be placed
        assert set(placed.values()) <= {"exp", "tanh"}
    fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
    data = np.random.default_rng(2).standard_normal((batch, 4, 16)).astype(np.float32)
    assert_close_to_host(fn, func, [data])


def test_a_placed_operand_read_after_the_concatenate_keeps_its_value():
    """The operand lives on in the concatenate's memory: reading it later, after other
    values have come and gone, reads what was computed."""
    x = nbyoc.var("x", (1, 8, 32))
    a = nbyoc.exp(x)
    joined = nbyoc.concatenate([a, nbyoc.sin(x)], axis=1)
    later = nbyoc.sum(joined * 3.0, axis=1, keepdims=True)
    func = nbyoc.function([x], nbyoc.cos(later) + nbyoc.reshape(nbyoc.sum(a, axis=1), (1, 1, 32)))
    assert "exp" in _placed(func).values()
    fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
    data = np.random.default_rng(4).standard_normal((1, 8, 32)).astype(np.float32)
    assert_close_to_host(fn, func, [data], rtol=1e-4, atol=1e-4)


@settings(max_examples=examples(30, 8), deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=2, max_size=5),
    axis=st.integers(0, 2),
    nested=st.booleans(),
    split=st.booleans(),
    seed=st.integers(0, 99),
)
def test_concatenates_of_computed_operands_match_the_host(sizes, axis, nested, split, seed):
    """Random concatenates along any axis (placed only where the slices are contiguous),
    of computed operands, inputs, (``nested``) an inner concatenate, and (``split``)
    the two halves of a computed value."""
    shape = [1, 3, 4]
    x = nbyoc.var("x", tuple(shape))
    parts = []
    for k, size in enumerate(sizes):
        part_shape = list(shape)
        part_shape[axis] = size
        source = nbyoc.broadcast_to(nbyoc.sum(x, axis=axis, keepdims=True), tuple(part_shape))
        parts.append(x if size == shape[axis] and k % 3 == 2 else nbyoc.exp(source * (0.1 * k)))
    if nested:
        parts[0] = nbyoc.concatenate([parts[0], nbyoc.tanh(parts[0])], axis=axis)
    last = parts[-1]
    if split and last.type.shape[axis] >= 2:
        half = last.type.shape[axis] // 2
        bounds = [(0, half), (half, last.type.shape[axis])]
        parts[-1:] = [nbyoc.slice(last, starts=(a,), ends=(b,), axes=(axis,)) for a, b in bounds]
    func = nbyoc.function([x], nbyoc.concatenate(parts, axis=axis) + 1.0)
    fn = nbyoc.compile(func, backend="llvm", options=PARALLEL)
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    assert_close_to_host(fn, func, [data], rtol=1e-5, atol=1e-5)
