"""Saving a compiled ``Executable`` to one file and loading it back.

The file is a zip archive holding only data:

- ``manifest.json``: format name and version, the nbyoc version that wrote
  it, the backend, and for each runtime module its global symbol,
  ``type_key``, member name and, as a hint for error messages only, the class
  that wrote it; ``fallbacks``, the regions moved off their backend
  (``runtime.fallback.Fallback`` records), and ``strict`` (optional: an archive
  without them has none and is not strict);
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

Nothing is decompressed before its size is checked against the limits (``nbyoc.limits``):
each member against ``member_bytes``, and everything read together against
``compression_ratio`` times the archive's size (the first ``RATIO_EXEMPT`` bytes are
exempt). Members are read only as far as they claim to reach, with the methods
nbyoc writes (stored, deflate: bzip2 and LZMA can inflate without bound or ask for
large dictionaries), so a member that lies about its size is cut off and fails its
CRC check; a ``.npy`` constant's header must describe exactly the bytes that follow it.
A refusal by a limit raises ``LimitError``.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import limits
from .._version import __version__
from ..errors import LimitError, LoadError, NbyocError, shown
from ..ir.dtypes import as_bits
from ..ir.names import BACKEND_NAME
from ..ir.nodes import IRModule
from ..ir.serialize import from_json, to_json
from .fallback import Fallback
from .module import get_loader, unsavable_message
from .sizes import is_symbolic

if TYPE_CHECKING:
    from .executable import Executable


FORMAT = "nbyoc-archive"
VERSION = 1
#: A class written as ``module:qualname`` (shown in errors, never imported).
WRITER = re.compile(r"[A-Za-z_][\w.]{0,199}:[A-Za-z_][\w.]{0,199}\Z", re.ASCII)
#: Archives that inflate to at most this many bytes in all are exempt from the limit
#: ``compression_ratio`` (a small graph's JSON may compress well; its size is harmless).
RATIO_EXEMPT = 16 << 20
#: The compression methods nbyoc writes, and so reads.
METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
#: The .npy format versions np.save writes for nbyoc's dtypes.
NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0,
               (2, 0): np.lib.format.read_array_header_2_0}  # fmt: skip


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
    options = executable.options if executable.runtime_modules == {} else {}
    try:
        json.dumps(options, allow_nan=False)
    except (TypeError, ValueError):
        raise NbyocError(
            f"cannot save this executable: its codegen options {options!r} are not plain "
            f"JSON values, and a function with symbolic sizes is built again from them "
            f"when loaded"
        ) from None
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "nbyoc_version": __version__,
        "backend": backend if isinstance(backend, str) else list(backend),
        "options": options,
        # (optional keys, which older readers ignore: the format version stays)
        "strict": bool(executable.strict),
        "fallbacks": [record.to_json() for record in executable.fallbacks],
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
            # (C-contiguous already; bfloat16 and the narrow dtypes as their bits)
            np.save(data, as_bits(array), allow_pickle=False)
            archive.writestr(f"constants/{k}.npy", data.getvalue())
        for name, m in executable.runtime_modules.items():
            archive.writestr(f"runtime/{name}.bin", m.save_to_bytes())
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, buffer.getvalue())


def load_executable(path: str | os.PathLike[str]) -> Executable:
    """The ``Executable`` saved at ``path``; ``LoadError`` if the file is not a valid archive."""
    from .executable import Executable

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e}") from None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = Members(archive, len(data))
            manifest = _manifest(members)
            constants = [_array(members, name) for name in manifest["constants"]]
            module = from_json(members.read("module.json"), constants=constants)
            if not isinstance(module, IRModule):
                raise LoadError("module.json does not hold a module")
            runtime = {}
            for entry in manifest["runtime_modules"]:
                loader = _loader(entry)
                runtime[entry["symbol"]] = loader(members.read(entry["file"]))
    except LimitError as e:
        raise e.within(str(path)) from None
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
    if is_symbolic(module) and not runtime:
        # (built for each binding of its sizes at its first call, as when compiled)
        external = set()
    missing, extra = sorted(external - set(runtime)), sorted(set(runtime) - external)
    if missing:
        raise LoadError(f"{path}: no runtime module for {', '.join(missing)}")
    if extra:
        raise LoadError(
            f"{path}: runtime modules for {', '.join(extra)}, which the module "
            f"does not call as external functions"
        )
    backend = manifest["backend"]
    options = manifest.get("options", {})
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise LoadError(f"{path}: manifest.json: options must map backends to keyword arguments")
    strict, fallbacks = _fallbacks(manifest, str(path))
    try:
        return Executable(module, runtime, backend if isinstance(backend, str) else list(backend),
                          options, strict=strict, fallbacks=fallbacks)  # fmt: skip
    except NbyocError as e:  # e.g. a runtime module that does not provide its symbol
        raise LoadError(f"{path}: {e}") from e


def _fallbacks(manifest: dict, path: str) -> tuple[bool, list]:
    """The manifest's ``strict`` flag and fallback records (none in an archive without)."""
    strict, records = manifest.get("strict", False), manifest.get("fallbacks", [])
    if not isinstance(strict, bool):
        raise LoadError(f"{path}: manifest.json: strict must be true or false, not {shown(strict)}")
    if not isinstance(records, list):
        raise LoadError(f"{path}: manifest.json: fallbacks must be a list, not {shown(records)}")
    try:
        return strict, [Fallback.from_json(record) for record in records]
    except LoadError as e:
        raise LoadError(f"{path}: manifest.json: {e}") from None


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


class Members:
    """Reads an archive's members within the limits (see the module docstring).

    >>> buffer = io.BytesIO()
    >>> with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
    ...     z.writestr("zeros", bytes(100_000))
    >>> archive = zipfile.ZipFile(buffer)
    >>> len(Members(archive, len(buffer.getvalue())).read("zeros"))
    100000
    >>> with limits.override(member_bytes=1000):
    ...     Members(archive, len(buffer.getvalue())).read("zeros")
    Traceback (most recent call last):
        ...
    nbyoc.errors.LimitError: member 'zeros': 100,000 bytes, more than the limit member_bytes = ...
    """

    def __init__(self, archive: zipfile.ZipFile, size: int):
        self.archive, self.size = archive, size
        self.inflated = 0  # bytes read so far, from every member

    def read(self, name: str) -> bytes:
        """The bytes of member ``name``, checked before they are decompressed."""
        if not isinstance(name, str):
            raise LoadError(f"member name {shown(name)} is not a string")
        try:
            info = self.archive.getinfo(name)
        except KeyError:
            raise LoadError(f"the archive has no {shown(name)}") from None
        if info.compress_type not in METHODS:
            raise LoadError(
                f"{shown(name)} is compressed with method {info.compress_type}; nbyoc archives "
                f"use {' or '.join(METHODS.values())}"
            )
        declared = info.file_size
        what = f"member {shown(name)}"
        limits.check("member_bytes", declared, what)
        total = self.inflated + declared
        if total > RATIO_EXEMPT:
            ratio = math.ceil(total / max(self.size, 1))
            limits.check(
                "compression_ratio",
                ratio,
                f"{what} claims {declared:,} bytes, so the {self.size:,}-byte archive",
            )
        # zipfile inflates only up to the size the member claims, then checks the CRC at
        # its end: reading one byte more reaches that end.
        with self.archive.open(info) as stream:
            data = stream.read(declared)
            if stream.read(1) or len(data) != declared:
                raise LoadError(f"{shown(name)} does not hold the {declared:,} bytes it claims")
        self.inflated = total
        return data


def _manifest(members: Members) -> dict:
    text = members.read("manifest.json")
    limits.check_json_nesting(text, "manifest.json")
    try:
        manifest = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise LoadError(f"manifest.json is not valid JSON: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise LoadError("not an nbyoc archive (manifest format tag missing)")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise LoadError(f"bad archive version {shown(version)}")
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
            raise LoadError(f"bad runtime module entry in manifest.json: {shown(entry)}")
    backend = manifest.get("backend")
    names = [backend] if isinstance(backend, str) else backend
    if not isinstance(names, list) or not all(
        isinstance(n, str) and BACKEND_NAME.match(n) for n in names
    ):
        raise LoadError(f"manifest.json: bad backend {shown(backend)}")
    return manifest


def _array(members: Members, name: str) -> np.ndarray:
    """A ``.npy`` member, its header checked against the bytes that follow it before any
    array is made (``np.load`` would allocate the shape the header claims first)."""
    raw = members.read(name)
    stream = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(stream)
        if version not in NPY_HEADERS:
            raise LoadError(
                f"{shown(name)} is a .npy file of version {version}, not written by nbyoc"
            )
        shape, fortran, dtype = NPY_HEADERS[version](stream)
    except LoadError:
        raise
    except Exception as e:  # numpy raises ValueError, SyntaxError, ... on a corrupted header
        raise LoadError(
            f"{shown(name)} is not a valid .npy array: {type(e).__name__}: {e}"
        ) from None
    if dtype.hasobject or dtype.itemsize == 0:
        raise LoadError(f"{shown(name)} holds {dtype} elements, which no nbyoc constant has")
    offset, count = stream.tell(), math.prod(shape)
    if len(raw) - offset != count * dtype.itemsize:
        raise LoadError(
            f"{shown(name)} claims shape {shape} of {dtype} ({count * dtype.itemsize:,} bytes) but "
            f"holds {len(raw) - offset:,} bytes"
        )
    array = np.frombuffer(raw, dtype, count, offset)
    return array.reshape(shape, order="F" if fortran else "C")
