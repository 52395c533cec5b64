"""Saving a compiled ``Executable`` to one file and loading it back.

The file is a zip archive holding only data:

- ``manifest.json``: format name and version, the nbyoc version that wrote
  it, the backend, and for each runtime module its global symbol,
  ``type_key``, member name and, as a hint for error messages only, the class
  that wrote it;
- ``module.json``: the partitioned IR (``nbyoc.to_json``), constants by index;
- ``constants/<k>.npy``: the constants, read with ``allow_pickle=False``;
- ``runtime/<symbol>.bin``: each runtime module's ``save_to_bytes``.

Loading checks all of it and rebuilds every runtime module through the
loader registered for its ``type_key`` (found lazily: nbyoc's own types, or an
installed package's ``nbyoc.loaders`` entry point, so any process can load
any archive); the built-in loaders regenerate code from the stored graph
(kernels are then found in the cache). Nothing in the file is executed: no
pickle, no stored source, no module named by the file is imported. Any problem raises
``LoadError``: a newer format, a truncated or corrupted file, an unknown
``type_key`` (the message lists the registered loaders).
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np

from .._version import __version__
from ..errors import LoadError, NbyocError
from ..ir.names import BACKEND_NAME
from ..ir.nodes import IRModule
from ..ir.serialize import from_json, to_json
from .module import get_loader, unsavable_message

FORMAT = "nbyoc-archive"
VERSION = 1
#: A class written as ``module:qualname`` (shown in errors, never imported).
WRITER = re.compile(r"[A-Za-z_][\w.]{0,199}:[A-Za-z_][\w.]{0,199}\Z", re.ASCII)
#: Refuse members larger than this (a corrupted size field must not exhaust memory).
MAX_MEMBER_BYTES = 1 << 34


def save_executable(executable, path) -> None:
    """Write ``executable`` to ``path`` (atomically: a temporary file, then a rename).
    A runtime module that cannot be saved raises ``NbyocError`` before anything is written."""
    from ..cache import atomic_write

    for name, m in executable.runtime_modules.items():
        if not m.savable():
            raise NbyocError(f"cannot save @{name}: {unsavable_message(m)}")
    constants: list[np.ndarray] = []
    module_json = to_json(executable.module, constants=constants)
    backend = executable.backend
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "nbyoc_version": __version__,
        "backend": backend if isinstance(backend, str) else list(backend),
        "constants": [f"constants/{k}.npy" for k in range(len(constants))],
        "runtime_modules": [
            {
                "symbol": name,
                "type_key": m.type_key,
                "file": f"runtime/{name}.bin",
                "written_by": f"{type(m).__module__}:{type(m).__qualname__}",
            }
            for name, m in executable.runtime_modules.items()
        ],
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest, indent=1))
        archive.writestr("module.json", module_json)
        for k, array in enumerate(constants):
            data = io.BytesIO()
            np.save(data, array, allow_pickle=False)  # constants are C-contiguous already
            archive.writestr(f"constants/{k}.npy", data.getvalue())
        for name, m in executable.runtime_modules.items():
            archive.writestr(f"runtime/{name}.bin", m.save_to_bytes())
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, buffer.getvalue())


def load_executable(path):
    """The ``Executable`` saved at ``path``; ``LoadError`` if the file is not a valid archive."""
    from .executable import Executable

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e}") from None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            manifest = _manifest(archive)
            constants = [_array(archive, name) for name in manifest["constants"]]
            module = from_json(_member(archive, "module.json"), constants=constants)
            if not isinstance(module, IRModule):
                raise LoadError("module.json does not hold a module")
            runtime = {}
            for entry in manifest["runtime_modules"]:
                loader = _loader(entry)
                runtime[entry["symbol"]] = loader(_member(archive, entry["file"]))
    except LoadError:
        raise
    except NbyocError as e:
        raise LoadError(f"{path}: {e}") from e
    except Exception as e:
        # A damaged zip fails in many ways (bad CRC, zlib errors, flags claiming encryption
        # or unknown compression): each means the same thing to the caller.
        raise LoadError(
            f"{path} is not a readable nbyoc archive: {type(e).__name__}: {e}"
        ) from None
    external = {f for f in module.functions if "Compiler" in module[f].attrs}
    missing, extra = sorted(external - set(runtime)), sorted(set(runtime) - external)
    if missing:
        raise LoadError(f"{path}: no runtime module for {', '.join(missing)}")
    if extra:
        raise LoadError(
            f"{path}: runtime modules for {', '.join(extra)}, which the module "
            f"does not call as external functions"
        )
    backend = manifest["backend"]
    try:
        return Executable(module, runtime, backend if isinstance(backend, str) else list(backend))
    except NbyocError as e:  # e.g. a runtime module that does not provide its symbol
        raise LoadError(f"{path}: {e}") from e


def _loader(entry: dict):
    """The loader of a manifest entry's module type; the error names the class that
    wrote it (a hint for the reader: nbyoc never imports what a file names)."""
    try:
        return get_loader(entry["type_key"])
    except LoadError as e:
        hint = entry.get("written_by")
        if isinstance(hint, str) and WRITER.match(hint) and not hint.startswith("nbyoc."):
            module = hint.split(":")[0]
            raise LoadError(
                f"{e}. This archive's module was written by {hint}: import "
                f"{module} first, or install the package that provides it"
            ) from None
        raise


def _member(archive: zipfile.ZipFile, name: str) -> bytes:
    if not isinstance(name, str):
        raise LoadError(f"member name {name!r} is not a string")
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise LoadError(f"the archive has no {name!r}") from None
    if info.file_size > MAX_MEMBER_BYTES:
        raise LoadError(f"{name!r} claims {info.file_size} bytes, more than nbyoc will read")
    return archive.read(info)


def _manifest(archive: zipfile.ZipFile) -> dict:
    try:
        manifest = json.loads(_member(archive, "manifest.json"))
    except ValueError as e:
        raise LoadError(f"manifest.json is not valid JSON: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise LoadError("not an nbyoc archive (manifest format tag missing)")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise LoadError(f"bad archive version {version!r}")
    if version > VERSION:
        raise LoadError(
            f"this archive has format version {version} (written by nbyoc "
            f"{manifest.get('nbyoc_version', '?')}); this nbyoc {__version__} reads up to "
            f"{VERSION}: upgrade nbyoc"
        )
    if not isinstance(manifest.get("constants"), list) or not isinstance(
        manifest.get("runtime_modules"), list
    ):
        raise LoadError("manifest.json lacks its 'constants' or 'runtime_modules' lists")
    for entry in manifest["runtime_modules"]:
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), str) for k in ("symbol", "type_key", "file")
        ):
            raise LoadError(f"bad runtime module entry in manifest.json: {entry!r}")
    backend = manifest.get("backend")
    names = [backend] if isinstance(backend, str) else backend
    if not isinstance(names, list) or not all(
        isinstance(n, str) and BACKEND_NAME.match(n) for n in names
    ):
        raise LoadError(f"manifest.json: bad backend {backend!r}")
    return manifest


def _array(archive: zipfile.ZipFile, name: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(_member(archive, name)), allow_pickle=False)
    except LoadError:
        raise
    except Exception as e:  # np.load raises many kinds on corrupted data
        raise LoadError(f"{name!r} is not a valid .npy array: {e}") from None
