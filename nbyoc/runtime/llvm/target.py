"""What the llvm lowering needs to know about the CPU it compiles for: the width of
its float vectors, and from that the shape of the register tiles its matrix products
are cut into (``nbyoc.runtime.llvm.tiles`` builds them).

Read from llvmlite's view of the host, and only when a kernel is lowered: importing
this module imports neither Numba nor llvmlite.

>>> tile_name("float32", 6, 32)
'tile_float32_6x32'
>>> rows, cols = tile_shape("float32")
>>> rows in (6, 12), cols % vector_lanes("float32")
(True, 0)
"""

from __future__ import annotations

import functools
import glob
import os
import platform

#: Rows of A a tile takes, by the vector registers the CPU has: with two vectors of B
#: per row, 12 accumulators + 2 B vectors + 1 broadcast fit AVX2's (and SSE's, NEON's
#: counted as 16) 16 registers; 24 + 2 + 1 fit AVX-512's 32. Twice the rows halve the
#: loads of B per multiply-add, which a product whose packed panels of B stream from
#: L2 is bound by (``codegen.llvm.gemm``): on this project's AMD EPYC (Zen 4, one
#: 512-bit FMA a cycle) every shape from 6x2 to 14x2 ran at its peak from L1
#: (116 GFLOP/s float32); 14 rows (31 registers) leave LLVM no spare one.
TILE_ROWS = {16: 6, 32: 12}
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
#: row group and every stage that may stream (``writes_streaming``), a huge number none).
STREAM_ENV = "NBYOC_STREAM_MIN_BYTES"


@functools.cache
def last_level_cache_bytes() -> int:
    """The size of this CPU's last-level cache: from Linux's sysfs, else the C library."""
    sizes = {}
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(f"{index}/level") as level, open(f"{index}/size") as size:
                sizes[int(level.read())] = _bytes(size.read().strip())
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
    streaming stores (``nbyoc.runtime.llvm.stream``): glibc's rule for its own ``memcpy``,
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


#: A stage reading at least this many times the bytes it writes is read-heavy
#: (``writes_streaming``).
READ_HEAVY_RATIO = 2


def writes_streaming(read_bytes: int, written_bytes: int, heavy: bool = False) -> bool:
    """Whether a flat stage that reads ``read_bytes`` and writes ``written_bytes`` (> 0)
    of whole arrays stores its results with streaming stores; ``heavy``: it computes
    an op of tens of instructions per element (``rules.ScalarRule.heavy``). Against
    ``stream_min_bytes()``, the two together must reach:

    ==============  ===========================  ==========================
    the stage       reads >= 2x what it writes   reads less
    ==============  ===========================  ==========================
    light ops       half of it                   all of it
    heavy ops       all of it                    never
    ==============  ===========================  ==========================

    Why: an ordinary store first reads its line (read for ownership). On this
    project's Xeon a stage whose arrays sit in the last-level cache is bound by such
    line reads, and streaming stores go to memory beside them, so a light stage
    reading two or four arrays per result gains from half the threshold, even
    followed by NumPy's sum of its result (which then reads it from memory). A
    stage of heavy ops is bound by its arithmetic; its streaming stores, written a
    block at a time, stall it instead, unless its inputs come from memory too.
    Measured side by side, streaming time over ordinary (alone / with the sum after):

    =====================  ===========  ===============
    stage, footprint       alone        with the sum
    =====================  ===========  ===============
    ``((a+b)-c)*d`` 20 MiB  0.98         1.12
    ``((a+b)-c)*d`` 60 MiB  0.87         0.96
    ``((a+b)-c)*d`` 80 MiB  0.89         0.94
    ``a*b + a`` 48 MiB      0.79         0.95
    ``a*b + a`` 96 MiB      0.78         0.89
    ``a/b + c`` 64 MiB      0.84
    ``tanh(a*b+c)`` 64 MiB  1.25
    ``tanh(a*b+c)`` 256 MiB 0.94
    ``tanh(a)*a`` 32 MiB    1.51         1.25
    ``tanh(a)*a`` 128 MiB   1.30
    ``tanh(a)*a`` 256 MiB   1.17
    GELU 128 MiB            1.10
    ``a*2+1`` 128 MiB       0.69
    =====================  ===========  ===============

    Row groups keep ``stream_min_bytes()`` whatever they read: ``softmax(a + b)``
    streamed from half of it was 1.06-1.08x slower.

    >>> threshold = stream_min_bytes()
    >>> writes_streaming(threshold, 1), writes_streaming(threshold, threshold, heavy=True)
    (True, False)
    """
    read_heavy = read_bytes >= READ_HEAVY_RATIO * written_bytes
    if heavy and not read_heavy:
        return False
    threshold = stream_min_bytes()
    if read_heavy and not heavy:
        threshold //= 2
    return read_bytes + written_bytes >= threshold


def vector_lanes(dtype: str) -> int:
    """Values of ``dtype`` in one vector on this CPU."""
    return vector_bits() // BITS[dtype]


def vector_registers() -> int:
    """The float vector registers this CPU has: 32 with AVX-512, else 16."""
    return 32 if vector_bits() >= 512 else 16


def tile_shape(dtype: str) -> tuple[int, int]:
    """(rows, columns) of this machine's tile for ``dtype``: 12 x 2 vectors with
    AVX-512's 32 registers, 6 x 2 vectors with 16."""
    return TILE_ROWS[vector_registers()], TILE_VECTORS * vector_lanes(dtype)


@functools.cache
def cache_bytes(level: int, default: int) -> int:
    """The size of one core's data cache of ``level`` (1, 2...) from Linux's sysfs, else
    ``default``.

    >>> cache_bytes(2, 1 << 20) > 0
    True
    """
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(f"{index}/level") as found, open(f"{index}/type") as kind:
                if int(found.read()) != level or kind.read().strip() == "Instruction":
                    continue
            with open(f"{index}/size") as size:
                return _bytes(size.read().strip())
        except (OSError, ValueError):
            continue
    return default


def _bytes(text: str) -> int:
    """Bytes of a sysfs cache size ("1024K", "32M", "512")."""
    shift = {"K": 10, "M": 20}.get(text[-1:], 0)
    return int(text[:-1] if shift else text) << shift


@functools.cache
def machine_signature() -> str:
    """What the machine code compiled here depends on beyond nbyoc's source: the CPU
    LLVM compiles for and its features (Numba's own cache keys on them too). Two CPUs
    of one vector width (an AMD EPYC and an Intel Xeon, both AVX-512) get the same
    kernel source but not the same instructions."""
    name = os.environ.get("NUMBA_CPU_NAME", "host")
    features = os.environ.get("NUMBA_CPU_FEATURES", "")
    if name == "host":
        import llvmlite.binding as llvm

        name = llvm.get_host_cpu_name()
        features = features or llvm.get_host_cpu_features().flatten()
    return f"{name}:{features}"


def tile_name(
    dtype: str,
    rows: int,
    cols: int,
    accumulate: bool = False,
    indirect: bool = False,
    stream: bool = False,
) -> str:
    """The name a kernel imports the tile of ``rows`` x ``cols`` ``dtype`` values by
    (``accumulate``: the tile that adds its product to C instead of storing it;
    ``indirect``: the tile reading B's rows at offsets; ``stream``: the tile
    prefetching B's rows ahead, for a product that reads B once: ``runtime.llvm.tiles``).

    >>> tile_name("float32", 12, 32, stream=True)
    'tile_float32_12x32_stream'
    """
    return (
        f"tile_{dtype}_{rows}x{cols}"
        + ("_acc" if accumulate else "")
        + ("_rows" if indirect else "")
        + ("_stream" if stream else "")
    )


def tap_row_name(dtype: str, taps: int, stride: int, dilation: int) -> str:
    """The name a kernel imports the row of ``taps`` taps of ``dtype`` values, ``stride``
    and ``dilation`` apart, by (``nbyoc.runtime.llvm.tap_rows``).

    >>> tap_row_name("float32", 3, 2, 1)
    'tap_row_float32_k3_s2_d1'
    """
    return f"tap_row_{dtype}_k{taps}_s{stride}_d{dilation}"


def window_rows_name(dtype: str, kernel, strides, dilations, rows: int) -> str:
    """The name a kernel imports the rows of a 2-D window's output by: ``rows`` rows of
    the ``kernel`` window of ``strides`` and ``dilations`` over ``dtype`` values
    (``nbyoc.runtime.llvm.window_rows``).

    >>> window_rows_name("float32", (3, 3), (2, 2), (1, 1), 2)
    'window_rows_float32_k3x3_s2x2_d1x1_r2'
    """
    (k0, k1), (s0, s1), (d0, d1) = kernel, strides, dilations
    return f"window_rows_{dtype}_k{k0}x{k1}_s{s0}x{s1}_d{d0}x{d1}_r{rows}"


def deal_row_name(dtype: str, stride: int) -> str:
    """The name a kernel imports the deal of a row into ``stride`` phases by
    (``nbyoc.runtime.llvm.window_rows``).

    >>> deal_row_name("float64", 2)
    'deal_row_float64_s2'
    """
    return f"deal_row_{dtype}_s{stride}"


def tiles_supported(dtype: str) -> bool:
    """Whether tiles exist for ``dtype`` (float32 and float64)."""
    return dtype in BITS
