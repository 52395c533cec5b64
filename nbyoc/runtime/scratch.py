"""Scratch memory shared by every kernel a thread runs.

A compiled kernel takes its intermediate values in scratch *arenas* (one flat array
per storage dtype: ``codegen.llvm.buffers``) and keeps nothing in them between calls:
its outputs are arrays of their own. A thread runs one kernel at a time, so every
kernel it runs can take its arenas from the same memory: one *pool* per thread, a
buffer as large as the largest set of arenas it has been asked for, cut into aligned
arrays for each kernel's layout. Memory then follows the largest kernel, not the sum
of all of them: a size-generic executable builds one kernel per binding of its
sizes (``runtime.sizes``), and a ``jit`` function called at 64 lengths used to keep
64 sets of arenas (981 MB where one set needs 15).

The pool grows when a larger layout is asked for (to at least ``GROWTH`` times its
size, so that slowly rising sizes do not reallocate at every call), and the arrays
cut from the old buffer stay valid for as long as someone holds them.
``nbyoc.cache.release()`` lets go of every thread's pool.

>>> first = arenas((("float32", 100), ("int64", 3)))
>>> [(a.dtype.name, a.size) for a in first]
[('float32', 100), ('int64', 3)]
>>> all(a.ctypes.data % ALIGN_BYTES == 0 for a in first)
True
>>> again = arenas((("float64", 50),))  # the same memory, cut for another kernel
>>> again[0].ctypes.data == first[0].ctypes.data
True
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import cache

#: Each arena starts at a multiple of this many bytes: a cache line, and the widest
#: vector (AVX-512) a kernel loads.
ALIGN_BYTES = 64
#: A pool that must grow grows to at least this many times its size.
GROWTH = 1.25

Layout = tuple[tuple[str, int], ...]  # (storage dtype, elements) of each arena, in order


class _Pool:
    """One thread's pool: its buffer, and the arenas already cut from it, by the id of
    their layout (with the layout, held: a call finds its arenas without hashing it)."""

    __slots__ = ("__weakref__", "buffer", "cut")

    def __init__(self):
        self.buffer = np.empty(0, np.uint8)
        self.cut: dict[int, tuple[Layout, tuple[np.ndarray, ...]]] = {}

    def arenas(self, layout: Layout) -> tuple[np.ndarray, ...]:
        offsets, end = _offsets(layout)
        if end + ALIGN_BYTES > self.buffer.size:
            size = max(end + ALIGN_BYTES, int(self.buffer.size * GROWTH))
            self.buffer, self.cut = np.empty(size, np.uint8), {}
        start = -self.buffer.ctypes.data % ALIGN_BYTES
        made = tuple(
            self.buffer[start + at : start + at + n * np.dtype(dtype).itemsize].view(dtype)
            for (dtype, n), at in zip(layout, offsets)
        )
        self.cut[id(layout)] = (layout, made)
        return made


_LOCAL = threading.local()
#: Every thread's pool, so that ``release`` reaches them (a thread's goes with it).
_POOLS: weakref.WeakSet = weakref.WeakSet()
_LOCK = threading.Lock()


def arenas(layout: Layout) -> tuple[np.ndarray, ...]:
    """This thread's scratch arenas for ``layout``: one C-contiguous array of
    ``elements`` values of ``dtype`` for each (dtype, elements), each at a multiple of
    ``ALIGN_BYTES``, all in this thread's pool. What a kernel wrote there is the next
    kernel's to overwrite. (Called on every kernel call: pass the same layout object
    each time, and the arenas are found by its id.)"""
    pool = getattr(_LOCAL, "pool", None)
    if pool is None:
        pool = _LOCAL.pool = _Pool()
        with _LOCK:
            _POOLS.add(pool)
    made = pool.cut.get(id(layout))
    if made is not None and made[0] is layout:
        return made[1]
    return pool.arenas(layout)


def pooled_bytes() -> int:
    """The bytes every thread's pool holds (what scratch costs the process).

    >>> _ = arenas((("uint8", 1000),))
    >>> pooled_bytes() >= 1000
    True
    """
    with _LOCK:
        return sum(pool.buffer.size for pool in _POOLS)


def release() -> int:
    """Let go of every thread's pool (a kernel running now keeps its arenas); return the
    bytes released. The next call of a kernel allocates again."""
    with _LOCK:
        pools = list(_POOLS)
    freed = 0
    for pool in pools:
        freed += pool.buffer.size
        pool.buffer, pool.cut = np.empty(0, np.uint8), {}
    return freed


def _release_pools() -> int:
    release()
    return 0  # (``cache.release`` counts kernels)


cache.on_release(_release_pools)


def _offsets(layout: Layout) -> tuple[list[int], int]:
    """Each arena's byte offset in the pool, and the end of the last."""
    offsets, end = [], 0
    for dtype, n in layout:
        at = -(-end // ALIGN_BYTES) * ALIGN_BYTES
        offsets.append(at)
        end = at + int(n) * np.dtype(dtype).itemsize
    return offsets, end
