"""Numba's on-disk cache of nbyoc's kernels, read only as nbyoc recorded it.

Numba keeps the machine code of a module's ``cache=True`` functions beside the
module (``__pycache__``) or under ``NUMBA_CACHE_DIR``: per function an index
(``.nbi``) and data files (``.nbc``). Both are pickles, which Numba unpickles when
the module is imported (``numba.core.caching.IndexDataCacheFile``), so whoever
can write them can run code in the importing process.

So nbyoc lets Numba read only files whose bytes it recorded itself. Once a kernel
module is imported (Numba has then loaded or written its files), the digest of
each of them is recorded in ``kernels/<module>.numba``, in nbyoc's private cache
directory. Before the module is imported again, its files are compared with that
record: if there is no record, a file is not in it, or a digest differs, all of
that module's Numba files are deleted first, so Numba compiles afresh (and the
new files are recorded). The directory Numba uses must be private too (owned by
the user, not writable by group or others: ``nbyoc.cache.check_private``).

The check costs a few stat calls and hashing the module's files (tens of KiB)
per kernel loaded from the disk cache.
"""

from __future__ import annotations

import json
from pathlib import Path

from ... import cache
from ...errors import CompileError

#: What Numba writes for a function: its index and its data files.
_SUFFIXES = (".nbi", ".nbc")


class NumbaCacheFiles:
    """The Numba cache files of the kernel module at ``source`` (a ``.py`` in nbyoc's
    cache), checked against nbyoc's record of them when made."""

    def __init__(self, source: Path):
        self.source = source
        self.directory = numba_cache_path(source)
        self.record_path = source.with_suffix(".numba")
        # (root: under NUMBA_CACHE_DIR, its parents are not nbyoc's and are checked too)
        cache.private_directory(self.directory, root=True)
        self._admitted: dict | None = None  # the digests ``admit`` found recorded

    def files(self) -> list[Path]:
        """This module's index and data files (Numba names them ``<module>.<function>...``)."""
        prefix = self.source.stem + "."
        return sorted(
            p
            for p in self.directory.glob(f"{self.source.stem}.*")
            if p.name.startswith(prefix) and p.suffix in _SUFFIXES
        )

    def admit(self) -> None:
        """Before Numba reads them: delete this module's files unless each is private and
        recorded with its current digest (a foreign-owned or group-writable one raises
        ``CacheSecurityError``)."""
        files = self.files()
        if not files:
            return
        recorded = self._recorded()
        for path in files:
            cache.check_private(path)
        digests = {p.name: cache.file_digest(p) for p in files}
        if recorded is not None and all(recorded.get(n) == d for n, d in digests.items()):
            self._admitted = digests
            return
        for path in files:
            path.unlink(missing_ok=True)

    def present(self) -> bool:
        """Whether Numba's files of this module look cached: a record, and a file of each
        kind (``admit`` still checks them before Numba reads them). A cheap guess that
        tells a compile from a load (``runtime.llvm.compile_workers`` gets only compiles)."""
        names = {p.suffix for p in self.files()}
        return self.record_path.exists() and names == set(_SUFFIXES)

    def record(self, module) -> None:
        """After the import: check that Numba used the directory checked above, and record
        the digests of the files it loaded or wrote (unless they are those admitted)."""
        for value in vars(module).values():
            stats = getattr(value, "stats", None)
            used = getattr(stats, "cache_path", None)
            if used is not None and Path(used) != self.directory:
                raise CompileError(
                    f"internal: Numba cached kernel {value!r} in {used}, not in "
                    f"{self.directory} where nbyoc checks it; please report this"
                )
        digests = {p.name: cache.file_digest(p) for p in self.files()}
        if digests != self._admitted:
            cache.atomic_write(self.record_path, json.dumps(digests, sort_keys=True).encode())

    def _recorded(self) -> dict | None:
        """The recorded digests by file name, or None (no record, or not one nbyoc wrote)."""
        if not self.record_path.exists():
            return None
        cache.check_private(self.record_path)
        try:
            digests = json.loads(self.record_path.read_bytes())
        except ValueError:
            return None
        return digests if isinstance(digests, dict) else None


def numba_cache_path(source: Path) -> Path:
    """The directory where Numba keeps the cache of functions defined in ``source`` (an
    existing file), as Numba's own locators choose it: under ``NUMBA_CACHE_DIR`` if set,
    else ``__pycache__`` beside it (created here first, mode 0700)."""
    from numba.core import config

    key = (str(source.parent), config.CACHE_DIR or "")
    found = _CACHE_PATHS.get(key)
    if found is None:
        from numba.core.caching import FunctionCache

        cache.private_directory(source.parent / "__pycache__")
        # A function whose code says it comes from ``source`` (the locators read only
        # its file name and first line): two lines of our own, compiled from text.
        probe: dict = {}
        exec(compile("def probe():\n    pass\n", str(source), "exec"), probe)
        found = _CACHE_PATHS[key] = Path(FunctionCache(probe["probe"]).cache_path)
    return found


#: (module directory, NUMBA_CACHE_DIR) -> the directory Numba caches those modules in.
_CACHE_PATHS: dict[tuple[str, str], Path] = {}
