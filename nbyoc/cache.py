"""The on-disk cache: where compiled artefacts live, and how they are written.

One directory, ``$NBYOC_CACHE_DIR`` or ``<user cache dir>/nbyoc`` (XDG on
Linux). ``NBYOC_CACHE=0`` turns the cache off: artefacts then go to a private
temporary directory removed when the process exits. Entries are keyed by
content and versions, and written atomically (a temporary file, then
``os.replace``), so concurrent writers never expose a half-written file.

Whoever can write in the cache can make this process run code (a compiled
library is loaded, Numba unpickles its cache), so nbyoc uses a cache directory
only if it is private (``check_private``): owned by the current user, not
writable by group or others, and with no parent directory anyone may write
without the sticky bit. It creates the directory and its subdirectories mode
0700. Each file it loads code from must be private as well, and is loaded only
if its digest is the one nbyoc recorded when it wrote it (``recorded``).

>>> entry_path("csource", "abc", ".so").name
'abc.so'
>>> sorted(info())
['bytes', 'directory', 'enabled', 'entries']
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .errors import CacheSecurityError, ConfigurationError

_PRIVATE: Path | None = None
#: Directories found private in this process (checked once each).
_CHECKED: set[str] = set()
#: What ``release`` calls: each returns how many in-memory kernels it let go.
_RELEASERS: list = []
#: Kernels kept in memory (most recently used) though no executable uses them, by default.
KERNELS_KEPT = 64


def enabled() -> bool:
    """False when ``NBYOC_CACHE=0`` (or ``false``/``off``/``no``)."""
    return os.environ.get("NBYOC_CACHE", "1").strip().lower() not in ("0", "false", "off", "no")


def cache_dir() -> Path:
    """The cache directory (created mode 0700 if missing, refused if not private, see
    ``check_private``); a private temporary one when the cache is disabled."""
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
    private_directory(path, root=True)
    return path


def entry_path(kind: str, key: str, suffix: str) -> Path:
    """Where the entry ``key`` of ``kind`` (e.g. "csource") lives."""
    folder = cache_dir() / kind
    private_directory(folder)
    return folder / f"{key}{suffix}"


def private_directory(path: Path, root: bool = False) -> None:
    """Create ``path`` (mode 0700) if missing, and check that it is private (once per
    process); ``root``: the cache directory itself, which may be a symbolic link and
    whose parents are checked too."""
    if str(path) in _CHECKED:
        return
    with contextlib.suppress(FileExistsError):  # not a directory: check_private says so
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_private(path, directory=True, follow=root)
    if root:
        for parent in Path(os.path.realpath(path)).parents:
            _check_parent(parent, path)
    _CHECKED.add(str(path))


def check_private(path: Path, directory: bool = False, follow: bool = False) -> None:
    """Raise ``CacheSecurityError`` unless ``path`` is a directory (``directory``) or a
    regular file owned by the current user and not writable by group or others, and
    (unless ``follow``) not a symbolic link. POSIX only: elsewhere nothing is checked."""
    if not hasattr(os, "geteuid"):
        return
    info = os.stat(path) if follow else os.lstat(path)
    kind = "directory" if directory else "file"
    what = f"{'nbyoc cache directory' if directory else 'nbyoc cache file'} {path}"
    elsewhere = "or set NBYOC_CACHE_DIR to a directory only you can write"
    if stat.S_ISLNK(info.st_mode):
        raise CacheSecurityError(
            f"{what} is a symbolic link, which nbyoc never makes there, so it will not load "
            f"code through it. Fix: delete it (rm {path}), {elsewhere}"
        )
    if (stat.S_ISDIR if directory else stat.S_ISREG)(info.st_mode) is False:
        raise CacheSecurityError(f"{what} is not a {kind}. Fix: delete it, {elsewhere}")
    me = os.geteuid()
    if info.st_uid != me:
        raise CacheSecurityError(
            f"{what} is owned by {_user(info.st_uid)}, and you are {_user(me)}, so nbyoc "
            f"will not load code from it: its owner could make this process run anything. "
            f"Fix: if you trust its content, chown {_name(me)} {path}; else delete it, "
            f"{elsewhere}"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "anyone" if info.st_mode & stat.S_IWOTH else "its group"
        raise CacheSecurityError(
            f"{what} can be written by {who} (mode {stat.S_IMODE(info.st_mode):o}), so nbyoc "
            f"will not load code from it: whoever can write there could plant code that runs "
            f"in this process. Fix: chmod go-w {path} and delete anything in it you did not "
            f"put there, {elsewhere}"
        )


def _check_parent(parent: Path, cache: Path) -> None:
    """A parent anyone may write without the sticky bit lets anyone replace the cache."""
    info = os.stat(parent)
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise CacheSecurityError(
            f"{parent}, a parent of the nbyoc cache directory {cache}, can be written by "
            f"anyone and has no sticky bit, so anyone could replace the cache with their own "
            f"code. Fix: chmod o-w {parent} (or chmod +t), or set NBYOC_CACHE_DIR to a "
            f"directory only you can write"
        )


def _user(uid: int) -> str:
    name = _name(uid)
    return f"uid {uid}" if name == str(uid) else f"{name} (uid {uid})"


def _name(uid: int) -> str:
    """The user name of ``uid``, or the number when it has none."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


# -- digests of what nbyoc wrote --------------------------------------------------


def file_digest(path: Path) -> str:
    """The BLAKE2b digest of a file's bytes, in hex."""
    digest = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def digest_path(path: Path) -> Path:
    """Where the digest nbyoc recorded for ``path`` is kept (beside it, in the cache)."""
    return path.with_name(path.name + ".blake2b")


def record(path: Path, digest: str | None = None) -> None:
    """Record the digest of ``path`` (a file nbyoc just wrote), or ``digest`` (of the
    bytes it wrote there)."""
    atomic_write(digest_path(path), (digest or file_digest(path)).encode())


def recorded(path: Path) -> bool:
    """Whether ``path`` exists and holds what nbyoc recorded: both it and its record are
    private files (else ``CacheSecurityError``), and its digest is the recorded one. A
    file without a record, or with another digest, is not (the caller rebuilds it).

    >>> path = entry_path("csource", "doc-example", ".txt")
    >>> atomic_write(path, b"data"); record(path)
    >>> recorded(path)
    True
    >>> path.write_bytes(b"other") and recorded(path)
    False
    """
    record_file = digest_path(path)
    if not path.exists() or not record_file.exists():
        return False
    check_private(path)
    check_private(record_file)
    return record_file.read_bytes().decode(errors="replace") == file_digest(path)


# -- managing the cache ----------------------------------------------------------------

#: What counts as one cache entry, per kind of artefact (other files are its companions:
#: the C source beside a library, Numba's machine code beside a kernel module, digests).
_ENTRY_SUFFIX = {"kernels": ".py", "csource": ".so"}


def info() -> dict[str, Any]:
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
            inside = str(folder) + os.sep
            _CHECKED.difference_update(
                {p for p in _CHECKED if p == str(folder) or p.startswith(inside)}
            )
    return freed


def prune(older_than: float) -> dict[str, int]:
    """Delete the cache entries not written or read for ``older_than`` seconds (as the
    file system keeps access times); return {"entries": removed, "bytes": freed}. An
    entry goes whole, with its companions (sources, machine code, Numba's index, digest:
    every file whose name starts with its key), and only when every one of them is that
    old. Kernels already loaded in this process keep working.

    >>> prune(older_than=10 * 365 * 86400)["entries"] >= 0
    True
    """
    if not isinstance(older_than, (int, float)) or older_than < 0:
        raise ConfigurationError(f"older_than must be seconds >= 0, got {older_than!r}")
    cutoff = time.time() - older_than
    removed = freed = 0
    root = cache_dir()
    for kind in _ENTRY_SUFFIX:
        groups: dict[str, list[Path]] = {}
        for path in (root / kind).rglob("*") if (root / kind).exists() else ():
            if path.is_file():
                groups.setdefault(path.name.split(".", 1)[0], []).append(path)
        for files in groups.values():
            stats = [f.stat() for f in files]
            if max(max(s.st_atime, s.st_mtime) for s in stats) >= cutoff:
                continue
            for f, st in zip(files, stats):
                with contextlib.suppress(FileNotFoundError):
                    f.unlink()
                    freed += st.st_size
            removed += any(f.name.endswith(_ENTRY_SUFFIX[kind]) for f in files)
    return {"entries": removed, "bytes": freed}


def kernels_kept() -> int:
    """How many compiled kernels no executable uses stay in memory, the most recently
    used ones: ``$NBYOC_KERNELS_KEPT``, else ``KERNELS_KEPT`` (64). Beyond that, and on
    ``release()``, nbyoc lets the others go.

    >>> kernels_kept() >= 0
    True
    """
    value = os.environ.get("NBYOC_KERNELS_KEPT", "").strip()
    if not value:
        return KERNELS_KEPT
    if not value.isdigit():
        raise ConfigurationError(
            f"NBYOC_KERNELS_KEPT must be a number of kernels (>= 0), got {value!r}"
        )
    return int(value)


def release() -> int:
    """Let go of the compiled kernels this process holds but no executable (or other live
    object) uses any more; return how many. Executables keep working, and a kernel
    needed again is loaded back from the disk cache. Every thread's scratch pool
    (``nbyoc.runtime.scratch``) goes too; the next call allocates again.

    What this frees is nbyoc's and Numba's Python-side objects of each kernel (about a
    fifth of its memory); the machine code itself stays mapped until the process ends,
    because Numba never removes code from its LLVM JIT (see ``nbyoc.runtime.llvm.kernels``).

    >>> import nbyoc
    >>> x = nbyoc.var("x", (3,))
    >>> fn = nbyoc.compile(nbyoc.function([x], x * 7.0 - 1.0))
    >>> del fn
    >>> release() >= 1
    True
    """
    import gc

    gc.collect()  # executables that were only kept by reference cycles
    return sum(release_unused() for release_unused in _RELEASERS)


def on_release(release_unused) -> None:
    """Register a function ``release`` calls (a runtime's hook; returns a count)."""
    _RELEASERS.append(release_unused)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one
    (created mode 0600)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
