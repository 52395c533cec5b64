"""What a Dask worker runs: block functions shipped as data, compiled once per process.

A task of ``nbyoc.dask.apply`` calls ``run_block(payload, *blocks)``. The payload is
data only: the JSON text of each block function (``nbyoc.ir.serialize``, with its
constants as arrays), keyed by the shapes of the blocks it takes, plus the backend and
compile options. A worker reads it with nbyoc's own loader (no code from the payload
is ever executed), compiles it with ``nbyoc.compile`` at the first block of that shape,
and keeps the result in a per-process cache: every later block of the shape runs the
compiled function at once. Workers that share a file system also share nbyoc's disk
cache, so a worker started later (or restarted after a crash) finds the kernels there.

Tree reductions combine partial results with ``combine``: the reduction (sum, max, min
or prod) over the given axes, compiled per shape of what it combines.

>>> import numpy as np, nbyoc
>>> from nbyoc.ir.serialize import to_json
>>> x = nbyoc.var("x", (2, 3))
>>> arrays = []                                  # to_json puts the constants here
>>> text = to_json(nbyoc.function([x], x * 2.0), arrays)
>>> payload = make_payload({((2, 3),): (text, arrays)}, "llvm", {})
>>> run_block(payload, np.ones((2, 3), np.float32)).tolist()
[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
>>> combine("max", "llvm", np.array([[1.0, 5.0], [4.0, 2.0]], np.float32), axis=(0,)).tolist()
[[4.0, 5.0]]
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

import numpy as np

from ..errors import LoadError, NbyocError

#: How many compiled block functions a process keeps (least recently used go first).
CACHE_SIZE = 256
_FORMAT = "nbyoc-dask-block"
_cache: OrderedDict[tuple, object] = OrderedDict()
_lock = threading.Lock()
#: Held while compiling, so that two threads of a worker wanting one function compile it
#: once (the second finds it in the cache).
_compiling = threading.RLock()
#: How many functions this process has compiled for block tasks (block functions and
#: combines): what ``nbyoc.dask`` users and tests read to see the cache at work.
compiles = {"block": 0, "combine": 0}


def make_payload(functions: dict, backend, options: dict) -> dict:
    """The data a block task receives: ``functions`` maps the tuple of its blocks' shapes
    to the block function's JSON text and its constants (``to_json(f, constants)``);
    ``backend`` and ``options`` as ``nbyoc.compile`` takes them."""
    digest = hashlib.sha256(
        json.dumps(
            [repr(list(functions)), [text for text, _ in functions.values()], repr(backend),
             repr(sorted(options.items()))]
        ).encode()
    )  # fmt: skip
    for _, arrays in functions.values():
        for array in arrays:
            digest.update(np.ascontiguousarray(array).tobytes())
    return {
        "format": _FORMAT,
        "digest": digest.hexdigest(),
        "functions": dict(functions),
        "backend": backend,
        "options": dict(options),
    }


#: The key of a payload's size-generic block function, which takes blocks of any length.
GENERIC = "generic"


def run_block(payload: dict, *blocks):
    """Run the payload's block function for these blocks' shapes on them."""
    arrays = [np.asarray(b) for b in blocks]
    key = tuple(a.shape for a in arrays)
    return compiled(payload, key)(*arrays)


def compiled(payload: dict, key: tuple):
    """The compiled block function of ``payload`` for blocks of shapes ``key`` (from
    this process's cache, or loaded and compiled now)."""
    if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
        raise LoadError("not an nbyoc.dask block payload")
    if GENERIC in payload["functions"]:
        key = GENERIC  # (one function with symbolic sizes takes every block)
    entry = (payload["digest"], key)
    found = _cached(entry)
    if found is not None:
        return found
    with _compiling:
        found = _cached(entry)
        return found if found is not None else _compile_block(payload, key, entry)


def _compile_block(payload, key, entry):
    try:
        text, arrays = payload["functions"][key]
    except KeyError:
        shapes = ", ".join(map(str, payload["functions"]))
        raise NbyocError(
            f"nbyoc.dask: no block function for blocks of shapes {key}; the payload has "
            f"{shapes} (were the input arrays rechunked after apply()?)"
        ) from None
    from ..compiler import compile as nbyoc_compile
    from ..ir.serialize import from_json

    executable = nbyoc_compile(
        from_json(text, list(arrays)), payload["backend"], **payload["options"]
    )
    compiles["block"] += 1
    return _keep(entry, executable)


def combine(op: str, backend, partials, axis, keepdims=True, options=None):
    """``op`` (sum, max, min, prod) of ``partials`` over ``axis``, lengths kept as 1: one
    step of a tree reduction (Dask's ``reduction`` calls it with ``axis`` and
    ``keepdims``; the partials always keep their axes)."""
    from ..compiler import compile as nbyoc_compile
    from ..ir.builder import call_op, function, var

    partials = np.asarray(partials)
    axis = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    entry = ("combine", op, backend, partials.shape, partials.dtype.str, axis)
    executable = _cached(entry)
    if executable is None:
        with _compiling:
            executable = _cached(entry)
            if executable is None:
                p = var("partials", partials.shape, partials.dtype)
                func = function([p], call_op(op, p, axis=axis, keepdims=True))
                executable = _keep(entry, nbyoc_compile(func, backend, **(options or {})))
                compiles["combine"] += 1
    return executable(partials)


def _cached(entry):
    with _lock:
        found = _cache.get(entry)
        if found is not None:
            _cache.move_to_end(entry)
        return found


def _keep(entry, executable):
    with _lock:
        _cache[entry] = executable
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return executable


def unchanged(partials, axis=None, keepdims=True):
    """Dask's ``reduction`` first maps a function over the blocks: ours already hold
    partial results, so it returns them as they are."""
    return partials
