"""Allocating result arrays, recycling the memory of large ones.

A fresh 64 MiB array costs about 4 ms of page faults on first touch (measured
on this project's machine, where transparent huge pages are not granted):
more than a fused kernel spends computing on it. So results of at least
``POOL_MIN_BYTES`` come from a small pool of already-touched buffers, the way
GPU frameworks' caching allocators work. A buffer goes back to the pool only
when the last array that can see it is gone: every array made from it, and
every view of those, keeps its owner alive. A result therefore never shares
memory with anything the caller still holds.

Where a pooled result starts matters too. ``malloc`` puts every large array 16
bytes past a page boundary, so a kernel's input and output rows had the same
address modulo 4096: the CPU then takes a load from the input for one that may
depend on a store just made to the output ("4K aliasing") and waits. A pooled
result starts on a 64-byte line (vector stores do not straddle two lines) half
a page away from the call's first input: softmax at 2048 x 2048, 1.15 -> 1.03
ms; log_softmax 1.17 -> 1.06 ms; the reference graph 2% (measured side by side
on the Xeon).

The call that hands a pooled result out is on every large call's path, right after
a kernel has filled the caches with its arrays, where Python code runs cold: building
the result through ``__array_interface__`` and reading the input's address through
``ndarray.ctypes`` cost 16-26 us there (softmax over 1024 x 1024: 0.24 ms through the
pool against 0.21 ms into a plain ``np.empty``). So the last result built for each
shape and dtype is kept, and while no array made from it is alive (its reference
count says so) the next call for an input at the same page offset gets a fresh view
of it, which costs about 60 ns; the input's address is read through the buffer
protocol (0.4 us).

>>> a = allocate((2, 3), np.dtype(np.float32))
>>> a.shape, a.dtype.name, a.flags.writeable
((2, 3), 'float32', True)
"""

from __future__ import annotations

import collections
import ctypes
import functools
import math
import sys
import threading

import numpy as np

from ..errors import AllocationError

#: Results at least this large are served from the pool.
POOL_MIN_BYTES = 1 << 22
#: Free buffers kept per size; more are released to the system.
POOL_DEPTH = 2
#: Results kept ready to hand out again (the most recently used shapes and offsets).
READY_DEPTH = 8
#: Bytes between a pooled result's start and its first input's, modulo a page.
PAGE, SKEW, LINE = 4096, 2048, 64

_FREE: dict[int, list[np.ndarray]] = {}
#: (shape, dtype) -> (offset, the last result built for them), of which calls get views.
_READY: collections.OrderedDict[tuple, tuple[int, np.ndarray]] = collections.OrderedDict()
#: Reentrant: dropping a result while holding it can run ``_Owner.__del__``, which takes it.
_LOCK = threading.RLock()
#: References to a ready result while ``allocate`` checks it: ``_READY``'s, the local
#: name's and ``sys.getrefcount``'s argument. Each live view of it adds one (its base).
_UNUSED_REFS = 3


class _Owner:
    """Owns a pooled buffer while arrays use it; returns it to the pool when they are gone."""

    __slots__ = ("__array_interface__", "__weakref__", "buffer")

    def __init__(self, buffer: np.ndarray, start: int, shape: tuple[int, ...], dtype):
        self.buffer = buffer
        self.__array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "data": (buffer.ctypes.data + start, False),
            "version": 3,
        }

    def __del__(self):
        if self.buffer is None:  # handed to another owner (``allocate``)
            return
        try:
            with _LOCK:
                free = _FREE.setdefault(self.buffer.nbytes, [])
                if len(free) < POOL_DEPTH:
                    free.append(self.buffer)
        except Exception:  # interpreter shutdown: nothing to keep
            pass


def is_pooled_size(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether ``allocate`` serves ``shape`` / ``dtype`` arrays from the pool (and so
    wants the call's inputs, see the module docstring)."""
    return math.prod(shape) * dtype.itemsize >= POOL_MIN_BYTES


def allocate(shape: tuple[int, ...], dtype: np.dtype, inputs=()) -> np.ndarray:
    """A new, writeable, C-contiguous array (contents undefined), like ``np.empty``;
    a pooled one starts on a 64-byte line, half a page away from the first array in
    ``inputs`` (the call's inputs), or on the half page when there is none.

    >>> x = np.empty(1 << 21, np.float32)
    >>> out = allocate(x.shape, x.dtype, (x,))
    >>> out.ctypes.data % 64, (out.ctypes.data - x.ctypes.data) % 4096 in range(1985, 2049)
    (0, True)
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < POOL_MIN_BYTES:
        return np.empty(shape, dtype)
    near = next((a for a in inputs if isinstance(a, np.ndarray)), None)
    offset = (0 if near is None else _address(near)) + SKEW
    offset = offset % PAGE // LINE * LINE
    key = (shape, dtype)
    buffer = None
    with _LOCK:
        placed, ready = _READY.get(key, (None, None))
        if ready is not None and sys.getrefcount(ready) == _UNUSED_REFS:
            _READY.move_to_end(key)
            if placed == offset:
                return ready.view()
            # Unused but placed for another input: its buffer serves this one.
            buffer, ready.base.buffer = ready.base.buffer, None
            del _READY[key]
        del ready
        size = nbytes + 2 * PAGE  # room for any offset after the first page boundary
        free = _FREE.get(size)
        if buffer is None and free:
            buffer = free.pop()
    if buffer is None:
        buffer = np.empty(size, np.uint8)
    start = -buffer.ctypes.data % PAGE + offset
    ready = np.asarray(_Owner(buffer, start, shape, dtype))
    with _LOCK:
        _READY.pop(key, None)  # (re-inserted last: the most recently used)
        _READY[key] = (offset, ready)
        while len(_READY) > READY_DEPTH:  # its buffer returns to _FREE once unused
            _READY.popitem(last=False)
    return ready.view()


def _address(array: np.ndarray) -> int:
    """The address of ``array``'s first byte: through the buffer protocol where the
    array lends a writable contiguous one (0.4 us), else ``ndarray.ctypes`` (1.1 us)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError, BufferError):
        return array.ctypes.data


def is_pooled(array: np.ndarray) -> bool:
    """True for a result ``allocate`` made from the pool that no other array can see
    (it owns its memory in effect); False for a view of one.

    >>> out = allocate((1024, 1024), np.dtype(np.float32))
    >>> is_pooled(out), is_pooled(out[1:]), is_pooled(np.empty(3))
    (True, False, False)
    """
    base = array.base
    if type(base) is not np.ndarray or type(base.base) is not _Owner:
        return False
    with _LOCK:
        kept = any(entry[1] is base for entry in _READY.values())
        # the references to ``base`` besides this array's: the local name's, the
        # argument's and _READY's (while it keeps it); any other is another array on it
        return sys.getrefcount(base) == 3 + kept


def allocate_result(shape: tuple[int, ...], dtype: np.dtype, inputs, what: str) -> np.ndarray:
    """``allocate``, raising ``AllocationError`` (a ``MemoryError``) that names ``what``
    is being allocated, its shape, dtype and size when the memory is not there.

    >>> allocate_result((1 << 40, 1 << 20), np.dtype(np.float32), (), "f: output 0")
    Traceback (most recent call last):
        ...
    nbyoc.errors.AllocationError: f: output 0, a (1099511627776, 1048576) float32 array, ...
    """
    try:
        return allocate(shape, dtype, inputs)
    except MemoryError as e:
        raise allocation_error(what, shape, dtype, e) from None


def allocation_error(what: str, shape, dtype: np.dtype, cause: BaseException) -> AllocationError:
    """The error for an array of ``shape`` and ``dtype`` that could not be allocated."""
    nbytes = math.prod(shape) * dtype.itemsize
    return AllocationError(
        f"{what}, a {tuple(shape)} {dtype.name} array, needs {readable_bytes(nbytes)} "
        f"({nbytes} bytes) and could not be allocated ({type(cause).__name__}: {cause}); "
        f"free memory, or compute it in smaller pieces (e.g. nbyoc.dask.apply over blocks)"
    )


def readable_bytes(n: int) -> str:
    """``n`` bytes in binary units, one decimal.

    >>> readable_bytes(1536), readable_bytes(4 << 40)
    ('1.5 KiB', '4.0 TiB')
    """
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    value, unit = float(n), 0
    while value >= 1024 and unit < len(units) - 1:
        value, unit = value / 1024, unit + 1
    return f"{n} bytes" if unit == 0 else f"{value:.1f} {units[unit]}"


def allocator(shape: tuple[int, ...], dtype: np.dtype):
    """The cheapest function that allocates ``shape`` / ``dtype`` arrays: of no
    arguments for small ones (``np.empty`` bound by ``functools.partial``, a C call
    with no Python frame of its own: 306 ns against a lambda's 421 ns per 10x10 array,
    measured side by side here), of the call's inputs where ``is_pooled_size``."""
    if not is_pooled_size(shape, dtype):
        return functools.partial(np.empty, shape, dtype)
    return functools.partial(allocate, shape, dtype)


def allocators(specs) -> list[tuple[object, bool]]:
    """(``allocator``, whether it takes the call's inputs) for each (shape, dtype) of
    ``specs``: a call allocates its results as ``new(inputs) if pooled else new()``.

    >>> [pooled for _, pooled in allocators([((2,), np.dtype(np.int8))])]
    [False]
    """
    return [(allocator(shape, dtype), is_pooled_size(shape, dtype)) for shape, dtype in specs]
