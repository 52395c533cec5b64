"""How much code this process has had to make: counted by kind, so that a test or a
benchmark tells a reuse (a new input size running on kernels already loaded) from a
compile.

>>> before = compile_counts()
>>> count("example")
>>> compile_counts()["example"] - before.get("example", 0)
1
"""

from __future__ import annotations

import threading
from collections import Counter

_COUNTS: Counter = Counter()
_LOCK = threading.Lock()


def count(kind: str, n: int = 1) -> None:
    """Add ``n`` to the count of ``kind``: ``"llvm modules"`` (kernel and stage modules
    this process compiled or loaded from the disk cache), ``"c libraries"`` (shared
    libraries the C compiler built), ``"llvm lowerings"`` (regions lowered to source: a
    new binding of symbolic sizes its region's template serves lowers none)."""
    with _LOCK:
        _COUNTS[kind] += n


def compile_counts() -> dict[str, int]:
    """A copy of the counts so far."""
    with _LOCK:
        return dict(_COUNTS)
