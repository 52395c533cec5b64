"""glibc's malloc told once, as the llvm kernels first load, to keep blocks of up to
32 MiB in its heap: the state it reaches by itself, but only after something freed a
block that large.

A kernel's stages allocate their working arrays per call (a wide conv's phase planes
and wide output rows: about 1 MiB a task). glibc serves a block at or above its
*mmap threshold* (128 KiB at the start) with a fresh ``mmap``, and returns it to the
system when freed, so every call page-faults it in again. It raises the threshold to
a freed block's size, but a block of the same size is still mapped afresh (the test is
``size >= threshold``), so a process whose largest such block was a conv's planes paid
for them at every call: on this project's 2-core VM (AMD EPYC, firecracker) 8,444
page faults a call made the first 32 -> 32 3x3 conv over 900 x 161 of a process
take 44 ms against 28 ms once anything larger had been freed, and a text-orientation
classifier ran 3.42 ms a call against 2.78 ms.

:func:`tune_malloc` sets the threshold where glibc's own raising stops (32 MiB on
64-bit, ``DEFAULT_MMAP_THRESHOLD_MAX``) and the heap's trim threshold to twice that,
as glibc sets it beside a raised threshold. It does nothing where the user set
``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` (glibc read those), where
``NBYOC_MALLOC_TUNING=0``, or where the C library is not glibc.

>>> tune_malloc() in (True, False)
True
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

#: glibc's ``mallopt`` parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks below this many bytes come from the heap (glibc's own largest threshold).
MMAP_THRESHOLD = 32 << 20
#: The free memory at the heap's top that glibc keeps rather than returns.
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
#: ``NBYOC_MALLOC_TUNING=0`` leaves malloc as it is.
ENV = "NBYOC_MALLOC_TUNING"
_USER_CHOICES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_LOCK = threading.Lock()
_tuned: bool | None = None


def tune_malloc() -> bool:
    """Set glibc's mmap and trim thresholds (once per process; see the module
    docstring); whether they are set as this module sets them.

    >>> tune_malloc() == tune_malloc()
    True
    """
    global _tuned
    with _LOCK:
        if _tuned is None:
            _tuned = _tune()
        return _tuned


def _tune() -> bool:
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "off", "no"):
        return False
    if any(name in os.environ for name in _USER_CHOICES):
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # (mallopt returns 1 on success)
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and (
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    )
