"""Stages of different kinds sharing one prange over a leading axis (``plan_groups``):
the parallel loops a kernel runs, and that results stay right when a stage reads
what the group computed elsewhere than at the leading elements it writes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc

from ..helpers import assert_close_to_host, parallel_runs


def normal(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def weight(shape, seed):
    return nbyoc.const(normal(shape, seed) / np.float32(np.sqrt(shape[0])))


def parallel_loops(fn) -> int:
    return parallel_runs(fn.get_source())


def check(params, out, seed=0, rtol=1e-4, atol=1e-5):
    f = nbyoc.function(params, out)
    fn = nbyoc.compile(f, backend="llvm")
    inputs = [normal(p.type.shape, seed + k) for k, p in enumerate(params)]
    assert_close_to_host(fn, f, inputs, rtol=rtol, atol=atol)
    return fn


def test_an_mlp_runs_in_one_parallel_loop_over_its_rows():
    x = nbyoc.var("x", (4096, 16), "float32")
    h = nbyoc.relu(x @ weight((16, 32), 1) + weight((32,), 2))
    h = nbyoc.tanh(h @ weight((32, 24), 3) + weight((24,), 4))
    y = nbyoc.softmax(h @ weight((24, 10), 5) + weight((10,), 6), axis=-1)
    fn = check([x], y)
    assert parallel_loops(fn) == 1  # was four: one per matmul and the softmax


def test_convs_and_activations_run_image_by_image_in_one_parallel_loop():
    x = nbyoc.var("x", (8, 8, 24, 24), "float32")
    h = nbyoc.relu(nbyoc.conv(x, weight((16, 8, 3, 3), 1), pads=[1, 1, 1, 1]))
    h = nbyoc.hard_swish(nbyoc.conv(h, weight((16, 1, 3, 3), 2), pads=[1, 1, 1, 1], group=16))
    y = nbyoc.sigmoid(nbyoc.conv(h, weight((8, 16, 1, 1), 3))) * x
    fn = check([x], y)
    assert parallel_loops(fn) == 1


@pytest.mark.parametrize("images", [2, 3])
def test_chained_convs_of_one_shape_share_the_prange_image_by_image_not_task_by_task(images):
    """Two 3x3 convs of one shape have the same tasks (blocks of rows). Chunked task by
    task, the second read rows of the first's output that another chunk had not written
    yet (a real detector at batch 2: off by 250 against ONNX Runtime, on every earlier
    main). A windowed stage shares a prange only leading element by leading element."""
    x = nbyoc.var("x", (images, 16, 80, 80), "float32")
    h = nbyoc.conv(x, weight((16, 16, 3, 3), 1), weight((16,), 2), pads=[1, 1, 1, 1])
    h = h * nbyoc.sigmoid(h)
    y = nbyoc.conv(h, weight((16, 16, 3, 3), 3), weight((16,), 4), pads=[1, 1, 1, 1])
    fn = check([x], y)
    assert parallel_loops(fn) == 1


@settings(max_examples=6, deadline=None)
@given(
    rows=st.integers(2100, 4700),
    widths=st.lists(st.sampled_from([3, 16, 40, 130, 300]), min_size=2, max_size=4),
    seed=st.integers(0, 100),
)
def test_chained_matmuls_of_any_row_tiling_match_numpy(rows, widths, seed):
    """Each matmul tiles rows by its depth: tiles that do not nest must not share a
    chunk (a stage would read rows another chunk writes)."""
    x = nbyoc.var("x", (rows, widths[0]), "float32")
    h = x
    for k, (k_in, k_out) in enumerate(itertools.pairwise(widths)):
        h = nbyoc.tanh(h @ weight((k_in, k_out), seed + k))
    check([x], nbyoc.log_softmax(h, axis=-1), seed, atol=1e-4)


def test_a_value_of_the_group_read_as_a_matmuls_right_operand_ends_the_group():
    a = nbyoc.var("a", (256, 256), "float32")
    g = nbyoc.relu(a @ weight((256, 256), 1))
    fn = check([a], nbyoc.tanh(a @ g), atol=1e-4)
    assert parallel_loops(fn) == 2


@pytest.mark.parametrize(
    "tail",
    [
        # read across the rows: a mean over the leading axis, a row sliced out of it
        lambda h: h - nbyoc.mean(h, axis=0, keepdims=True),
        lambda h: h * nbyoc.slice(h, [0, 0], [1, 64]),
        # read transposed
        lambda h: nbyoc.transpose(h, (1, 0)) @ weight((1024, 1024), 9),
    ],
    ids=["mean over rows", "a row broadcast", "transposed"],
)
def test_values_read_at_other_leading_elements_are_ready_when_read(tail):
    x = nbyoc.var("x", (1024, 64), "float32")
    h = nbyoc.relu(x @ weight((64, 64), 1) + weight((64,), 2))
    fn = check([x], tail(h), atol=1e-4)
    assert parallel_loops(fn) >= 2
