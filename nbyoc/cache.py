"""The on-disk cache: where compiled artefacts live, and how they are written.

One directory, ``$NBYOC_CACHE_DIR`` or ``<user cache dir>/nbyoc`` (XDG on
Linux). ``NBYOC_CACHE=0`` turns the cache off: artefacts then go to a private
temporary directory removed when the process exits. Entries are keyed by
content and versions, and written atomically (a temporary file, then
``os.replace``), so concurrent writers never expose a half-written file.

>>> entry_path("csource", "abc", ".so").name
'abc.so'
>>> sorted(info())
['bytes', 'directory', 'enabled', 'entries']
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

_PRIVATE: Path | None = None


def enabled() -> bool:
    """False when ``NBYOC_CACHE=0`` (or ``false``/``off``/``no``)."""
    return os.environ.get("NBYOC_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def cache_dir() -> Path:
    """The cache directory (created if missing); a private temporary one when disabled."""
    global _PRIVATE
    if not enabled():
        if _PRIVATE is None:
            _PRIVATE = Path(tempfile.mkdtemp(prefix="nbyoc-nocache-"))
            atexit.register(shutil.rmtree, _PRIVATE, ignore_errors=True)
        return _PRIVATE
    configured = os.environ.get("NBYOC_CACHE_DIR")
    if configured:
        path = Path(configured).expanduser()
    elif sys.platform == "darwin":
        path = Path.home() / "Library" / "Caches" / "nbyoc"
    else:
        path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nbyoc"
    path.mkdir(parents=True, exist_ok=True)
    return path


def entry_path(kind: str, key: str, suffix: str) -> Path:
    """Where the entry ``key`` of ``kind`` (e.g. "csource") lives."""
    folder = cache_dir() / kind
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{key}{suffix}"


#: What counts as one cache entry, per kind of artefact (other files are its companions:
#: the C source beside a library, Numba's machine code beside a kernel module).
_ENTRY_SUFFIX = {"kernels": ".py", "csource": ".so"}


def info() -> dict:
    """The cache directory, whether caching is on, its entry count and its size in bytes."""
    root = cache_dir()
    entries = sum(
        1 for kind, suffix in _ENTRY_SUFFIX.items() for _ in (root / kind).glob(f"*{suffix}")
    )
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return {"directory": str(root), "enabled": enabled(), "entries": entries, "bytes": size}


def clear() -> int:
    """Delete every cached artefact; return the bytes freed. Kernels already loaded in
    this process keep working (they are in memory); the next process recompiles.

    >>> clear() >= 0
    True
    """
    root = cache_dir()
    freed = 0
    for kind in _ENTRY_SUFFIX:
        folder = root / kind
        if folder.exists():
            freed += sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            shutil.rmtree(folder, ignore_errors=True)
    return freed


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
