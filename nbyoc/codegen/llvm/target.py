"""What the llvm lowering needs to know about the CPU it compiles for: the width of
its float vectors, and from that the shape of the register tiles its matrix products
are cut into (``nbyoc.runtime.tiles`` builds them).

Read from llvmlite's view of the host, and only when a kernel is lowered: importing
this module imports neither Numba nor llvmlite.

>>> tile_name("float32", 6, 32)
'tile_float32_6x32'
>>> rows, cols = tile_shape("float32")
>>> rows, cols % vector_lanes("float32")
(6, 0)
"""

from __future__ import annotations

import functools
import glob
import os
import platform

#: Rows of A a tile takes: with two vectors of B per row, 12 accumulators + 2 B
#: vectors + 1 broadcast fit AVX2's 16 registers.
TILE_ROWS = 6
#: Vectors of B (and C) per row of a tile.
TILE_VECTORS = 2
#: Bits per value of the dtypes tiles exist for.
BITS = {"float32": 32, "float64": 64}


@functools.cache
def vector_bits() -> int:
    """The width of this CPU's float vectors: 512 with AVX-512, 256 with AVX, else 128
    (SSE, NEON; also when Numba is told to compile for another CPU, ``NUMBA_CPU_NAME``,
    since its features are then not the host's)."""
    if os.environ.get("NUMBA_CPU_NAME", "host") != "host":
        return 128
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return 128
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return 512
    return 256 if features.get("avx") else 128


def worker_threads() -> int:
    """The threads Numba's parallel loops run on (``NUMBA_NUM_THREADS``: the CPUs, unless
    the user chose), read without starting them."""
    from numba.core import config

    return max(1, config.NUMBA_NUM_THREADS)


#: The last-level cache assumed where the system does not say (bytes).
DEFAULT_LLC_BYTES = 32 << 20
#: ``NBYOC_STREAM_MIN_BYTES``: overrides ``stream_min_bytes`` (bytes; 0 streams every
#: row group, a huge number none).
STREAM_ENV = "NBYOC_STREAM_MIN_BYTES"


@functools.cache
def last_level_cache_bytes() -> int:
    """The size of this CPU's last-level cache: from Linux's sysfs, else the C library."""
    sizes = {}
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(f"{index}/level") as level, open(f"{index}/size") as size:
                text = size.read().strip()
                shift = {"K": 10, "M": 20}.get(text[-1:], 0)
                sizes[int(level.read())] = int(text[:-1] if shift else text) << shift
        except (OSError, ValueError):
            continue
    if sizes:
        return sizes[max(sizes)]
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError):
            size = 0
        if size > 0:
            return size
    return DEFAULT_LLC_BYTES


def stream_min_bytes() -> int:
    """The bytes a row group's arrays must reach for it to write its rows with
    streaming stores (``nbyoc.runtime.stream``): glibc's rule for its own ``memcpy``,
    three quarters of one thread's share of the last-level cache (99 MiB on this
    project's 2-core Xeon with 260 MiB). ``NBYOC_STREAM_MIN_BYTES`` overrides it.

    >>> stream_min_bytes() > 0
    True
    """
    override = os.environ.get(STREAM_ENV)
    if override is not None:
        try:
            value = int(override)
        except ValueError:
            value = -1
        if value < 0:
            raise ValueError(f"{STREAM_ENV} must be a number of bytes (>= 0), got {override!r}")
        return value
    return last_level_cache_bytes() * 3 // 4 // worker_threads()


def vector_lanes(dtype: str) -> int:
    """Values of ``dtype`` in one vector on this CPU."""
    return vector_bits() // BITS[dtype]


def tile_shape(dtype: str) -> tuple[int, int]:
    """(rows, columns) of this machine's tile for ``dtype``."""
    return TILE_ROWS, TILE_VECTORS * vector_lanes(dtype)


def tile_name(dtype: str, rows: int, cols: int, accumulate: bool = False) -> str:
    """The name a kernel imports the tile of ``rows`` x ``cols`` ``dtype`` values by
    (``accumulate``: the tile that adds its product to C instead of storing it)."""
    return f"tile_{dtype}_{rows}x{cols}" + ("_acc" if accumulate else "")


def tiles_supported(dtype: str) -> bool:
    """Whether tiles exist for ``dtype`` (float32 and float64)."""
    return dtype in BITS
