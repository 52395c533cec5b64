"""Scratch arenas come from one pool per thread, shared by every kernel the thread runs:
memory follows the largest kernel, results stay right when kernels, sizes and threads
take turns in the same memory."""

import itertools
import threading

import numpy as np
import pytest

import nbyoc
import nbyoc.ir.specialize
from nbyoc.runtime import scratch

from ..tolerance import assert_within, error_bounds


def _layout_bytes(layout) -> int:
    return sum(n * np.dtype(d).itemsize + scratch.ALIGN_BYTES for d, n in layout)


def test_arenas_are_aligned_sized_and_disjoint():
    layout = (("float32", 1001), ("int64", 7), ("uint8", 3), ("float64", 64))
    arenas = scratch.arenas(layout)
    assert [(a.dtype.name, a.size) for a in arenas] == list(layout)
    assert all(a.flags.c_contiguous and a.flags.writeable for a in arenas)
    assert all(a.ctypes.data % scratch.ALIGN_BYTES == 0 for a in arenas)
    spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes) for a in arenas)
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))


def test_a_grown_pool_leaves_the_arrays_cut_before_valid():
    small = scratch.arenas((("float32", 10),))[0]
    small[:] = 7.0
    scratch.arenas((("float32", 1 << 22),))  # grows: a new buffer
    assert np.all(small == 7.0)  # (the old buffer lives while the array does)


def test_the_pool_follows_the_largest_kernel_not_the_sum():
    # A size-generic function builds one kernel per binding of its sizes, each with
    # its scratch; at twenty lengths they all take it from the same pool.
    a = nbyoc.var("a", ("n", 64))
    w = nbyoc.const(np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64))
    t = nbyoc.tanh(nbyoc.matmul(a, w)) * 2.0
    f = nbyoc.function([a], nbyoc.matmul(nbyoc.exp(t - nbyoc.max(t, axis=1, keepdims=True)), w))
    fn = nbyoc.compile(f)
    scratch.release()
    for n in range(100, 2100, 100):
        x = np.random.default_rng(n).random((n, 64), np.float32)
        (bound,) = error_bounds(nbyoc.ir.specialize.specialize(f, {"n": n}), [x])
        assert_within(fn(x), nbyoc.compile(f, "host")(x), bound, f"n={n}")
    layouts = [
        module.lowered.scratch
        for made in fn.specializations.values()
        for module in made.runtime_modules.values()
    ]
    assert len(layouts) == 20 and all(layouts)
    largest = max(map(_layout_bytes, layouts))
    assert scratch.pooled_bytes() <= largest * scratch.GROWTH + scratch.ALIGN_BYTES
    assert scratch.pooled_bytes() < sum(map(_layout_bytes, layouts)) / 4


@pytest.mark.parametrize("backend", ["llvm", "examplejson"])
def test_kernels_taking_turns_in_one_pool_and_threads_each_in_their_own(backend):
    # Two functions whose kernels both keep intermediates in scratch, called in turns
    # from four threads: every result must be its own function's on its own input.
    def chain(n):
        x = nbyoc.var("x", (n, 48))
        w = nbyoc.const(np.linspace(-1, 1, 48 * 48, dtype=np.float32).reshape(48, 48))
        return nbyoc.function([x], nbyoc.matmul(nbyoc.tanh(nbyoc.matmul(x, w)), w) * 0.5)

    functions = [chain(40), chain(300)]
    compiled = [nbyoc.compile(f, backend) for f in functions]
    failures = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for step in range(30):
            k = (seed + step) % 2
            x = rng.standard_normal((functions[k].params[0].type.shape), np.float32)
            expected = nbyoc.compile(functions[k], "host")(x)
            try:
                (bound,) = error_bounds(functions[k], [x])
                assert_within(compiled[k](x), expected, bound, f"{backend} thread {seed}")
            except AssertionError as e:
                failures.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_release_lets_go_and_the_next_call_allocates_again():
    x = nbyoc.var("x", (500, 64))
    w = nbyoc.const(np.eye(64, dtype=np.float32))
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.matmul(nbyoc.exp(x), w) + 1.0))
    a = np.random.default_rng(1).random((500, 64), np.float32)
    first = fn(a)
    nbyoc.cache.release()
    assert scratch.pooled_bytes() == 0
    np.testing.assert_array_equal(fn(a), first)
