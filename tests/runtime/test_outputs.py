"""Result allocation: the pool of large buffers, and where a pooled result starts."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import nbyoc
from nbyoc.runtime import outputs
from nbyoc.runtime.outputs import allocate, allocator, is_pooled, is_pooled_size

SHAPE = (1024, 1024)  # 4 MiB of float32: pooled
F32 = np.dtype(np.float32)


def _at(offset: int, shape=SHAPE) -> np.ndarray:
    """A float32 array starting ``offset`` bytes past a page boundary."""
    nbytes = int(np.prod(shape)) * 4
    raw = np.empty(nbytes + 2 * outputs.PAGE, np.uint8)
    start = -raw.ctypes.data % outputs.PAGE + offset
    return raw[start : start + nbytes].view(np.float32).reshape(shape)


@pytest.mark.parametrize("offset", [0, 16, 2048, 2064, 4032, 4080])
def test_a_pooled_result_starts_on_a_line_half_a_page_from_its_first_input(offset):
    """Wherever the input starts, the result starts on a 64-byte line, 2048 bytes (less
    the part of a line the input is into it) away from it modulo a page: never at the
    input's page offset, where loads from the input wait on stores to the result."""
    x = _at(offset)
    out = allocate(SHAPE, F32, (1.0, x))  # the first array among the inputs counts
    assert is_pooled(out) and out.shape == SHAPE and out.flags.c_contiguous
    assert out.ctypes.data % outputs.LINE == 0
    skew = (out.ctypes.data - x.ctypes.data) % outputs.PAGE
    assert outputs.SKEW - outputs.LINE < skew <= outputs.SKEW
    assert not np.may_share_memory(out, x)


def test_without_inputs_a_pooled_result_starts_half_a_page_in():
    out = allocate(SHAPE, F32)
    assert out.ctypes.data % outputs.PAGE == outputs.SKEW


def test_a_freed_buffer_serves_the_next_result_at_another_offset():
    """The pool keeps whole buffers: the one a result gave back serves the next result
    of the same size, placed for that call's input, and a result still alive is never
    handed out again."""
    first = allocate(SHAPE, F32, (_at(16),))
    owner = first.base.base.buffer
    del first
    gc.collect()
    second = allocate(SHAPE, F32, (_at(1024),))
    assert second.base.base.buffer is owner
    assert second.ctypes.data % outputs.PAGE == (1024 + outputs.SKEW) % outputs.PAGE
    third = allocate(SHAPE, F32, (_at(1024),))
    assert third.base.base.buffer is not owner and not np.may_share_memory(second, third)
    second[...] = 1.0
    third[...] = 2.0
    assert second.min() == 1.0 and third.max() == 2.0  # and nothing beyond them was hit


def test_a_result_no_array_uses_is_handed_out_again_as_a_new_array():
    """While no array made from the last result is alive, the next call for an input
    at the same page offset gets a new array over the same memory; while a view of it,
    or a view of that view, is alive, it gets other memory."""
    x = _at(16)
    first = allocate(SHAPE, F32, (x,))
    address = first.ctypes.data
    del first
    again = allocate(SHAPE, F32, (x,))
    assert again.ctypes.data == address and is_pooled(again)
    view = again[2:][::2]
    assert not is_pooled(view) and not is_pooled(again)  # two arrays see that memory
    del again
    other = allocate(SHAPE, F32, (x,))
    assert not np.may_share_memory(other, view) and is_pooled(other)
    del view
    gc.collect()
    last = allocate(SHAPE, F32, (x,))
    assert not np.may_share_memory(last, other)


def test_a_changed_result_is_not_handed_out_changed():
    """A caller may change a result's shape, dtype or flags in place before dropping
    it: the next call still gets a fresh, writeable array of the right kind."""
    x = _at(16)
    first = allocate(SHAPE, F32, (x,))
    first.shape = (-1,)
    first.dtype = np.int32
    first.flags.writeable = False
    del first
    again = allocate(SHAPE, F32, (x,))
    assert again.shape == SHAPE and again.dtype == F32 and again.flags.writeable
    again[...] = 3.0


def test_results_kept_ready_are_bounded():
    """At most READY_DEPTH shapes keep a result ready; the rest give their buffers back."""
    shapes = [(1024, 1024 + k) for k in range(outputs.READY_DEPTH + 3)]
    for shape in shapes:
        allocate(shape, F32)
    assert len(outputs._READY) <= outputs.READY_DEPTH
    assert (shapes[-1], F32) in outputs._READY and (shapes[0], F32) not in outputs._READY


def test_read_only_and_strided_inputs_still_place_the_result():
    x = _at(16)
    x.flags.writeable = False
    out = allocate(SHAPE, F32, (x,))
    assert (out.ctypes.data - x.ctypes.data) % outputs.PAGE in range(1985, 2049)
    y = _at(16, (1024, 2048))[:, ::2]
    out = allocate(SHAPE, F32, (y,))
    assert (out.ctypes.data - y.ctypes.data) % outputs.PAGE in range(1985, 2049)


def test_small_results_are_plain_arrays_from_np_empty():
    assert not is_pooled_size((10, 10), F32) and is_pooled_size(SHAPE, F32)
    new = allocator((10, 10), F32)
    a = new()
    assert type(a) is np.ndarray and a.base is None and a.shape == (10, 10)


@pytest.mark.parametrize("backend", ["llvm", "csource"])
def test_compiled_functions_place_large_results_by_their_inputs(backend):
    """A compiled function's large results (one, or two) start half a page from its
    first input, and hold the right numbers."""
    x, y = nbyoc.var("x", SHAPE), nbyoc.var("y", SHAPE)
    one = nbyoc.compile(nbyoc.function([x, y], x * y + 1.0), backend=backend)
    two = nbyoc.compile(
        nbyoc.function([x, y], nbyoc.ir.nodes.Tuple([x - y, nbyoc.exp(x)])), backend=backend
    )
    a, b = _at(16), _at(16)
    a[...] = np.linspace(-1, 1, a.size, dtype=np.float32).reshape(SHAPE)
    b[...] = 0.5
    results = [one(a, b), *two(a, b)]
    for got, want in zip(results, [a * b + 1.0, a - b, np.exp(a)]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert (got.ctypes.data - a.ctypes.data) % outputs.PAGE == outputs.SKEW - 16
