"""Archives for the fuzz test of ``nbyoc.load``, and ``mutate_archive``, which changes one
thing in an archive: a member's content (its JSON, a ``.npy`` header or data, an
ExampleJSON text), its compression method, the size it claims, a bomb in place of a
member, a manifest that names one member many times; or bytes of the file."""

from __future__ import annotations

import io
import json
import random
import struct
import types
import zipfile

import numpy as np

import nbyoc
from nbyoc.codegen.examplejson.format import to_examplejson
from nbyoc.codegen.examplejson.module import ExampleJSONModule
from nbyoc.runtime.archive import save_executable

from ..mutations import mutate_bytes, mutate_json, mutate_tokens

NAMES = [*nbyoc.ir.list_ops(), *nbyoc.DTYPES, "input", "const", "output", "inputs:", "shape:"]


def examplejson_archive(func: nbyoc.ir.Function, path) -> None:
    """``func`` saved as an examplejson archive, without compiling anything: the
    runtime modules are built from their text (which only parses it), as loading does."""
    module = nbyoc.partition(func, "examplejson")
    runtime = {name: ExampleJSONModule(to_examplejson(g)) for name, g in
               module.functions.items() if "Compiler" in g.attrs}  # fmt: skip
    save_executable(types.SimpleNamespace(module=module, runtime_modules=runtime,
                                          backend="examplejson", strict=False,
                                          fallbacks=[]), path)  # fmt: skip


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _zip(members: dict[str, bytes], methods: dict[str, int] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            method = (methods or {}).get(name, zipfile.ZIP_DEFLATED)
            archive.writestr(name, content, compress_type=method)
    return buffer.getvalue()


def _mutate_npy(rng: random.Random, content: bytes) -> tuple[str, bytes]:
    try:
        array = np.load(io.BytesIO(content), allow_pickle=False)
    except Exception:
        return mutate_bytes(rng, content)
    kind = rng.randrange(4)
    header = {"descr": array.dtype.str, "fortran_order": False, "shape": array.shape}
    if kind == 0:
        header["shape"] = tuple(rng.choice([2**40, 2**28, 0, 3, 10**30]) for _ in
                                range(rng.randrange(1, 4)))  # fmt: skip
    elif kind == 1:
        header["descr"] = rng.choice(["|O", "<c16", ">f4", "<U4", "|V8", "<M8[s]", "<f2"])
    elif kind == 2:
        header["fortran_order"] = True
    else:
        return "npy data cut", content[: rng.randrange(len(content))]
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return f"npy header {header}", out.getvalue() + array.tobytes()


def _central_sizes(data: bytes, name: str, size: int) -> bytes:
    """``data`` with the uncompressed size the central directory gives ``name`` set."""
    at = data.find(b"PK\x01\x02")
    encoded = name.encode()
    while at != -1:
        length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + length] == encoded:
            return data[: at + 24] + struct.pack("<I", size) + data[at + 28 :]
        at = data.find(b"PK\x01\x02", at + 4)
    return data


def mutate_archive(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """One change to an archive (see the module docstring)."""
    try:
        members = _members(data)
    except Exception:
        return mutate_bytes(rng, data)
    if not members:
        return mutate_bytes(rng, data)
    name = rng.choice(sorted(members))
    kind = rng.randrange(10)
    if kind < 4:
        content = members[name]
        if name.endswith(".npy"):
            what, members[name] = _mutate_npy(rng, content)
        elif content.lstrip()[:1] in (b"{", b"["):
            what, members[name] = mutate_json(rng, content)
        else:
            what, members[name] = mutate_tokens(rng, content, NAMES)
        return f"{name}: {what}", _zip(members)
    if kind == 4 and len(members[name]) <= 1 << 20:  # (LZMA takes seconds on a bomb)
        method = rng.choice([zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA, zipfile.ZIP_STORED])
        return f"{name} compressed with method {method}", _zip(members, {name: method})
    if kind == 5:
        size = rng.choice([0, 1, 2**31, 2**32 - 1, len(members[name]) // 2])
        return f"{name} claims {size} bytes", _central_sizes(_zip(members), name, size)
    if kind == 6:
        # Past the 16 MiB nbyoc reads from any archive, deflated a thousand times.
        members[name] = bytes(rng.choice([17 << 20, 24 << 20]))
        return f"{name} made {len(members[name]) >> 20} MiB of zeros", _zip(members)
    if kind == 7 and "manifest.json" in members:
        try:
            manifest = json.loads(members["manifest.json"])
        except ValueError:  # an earlier mutation broke it
            return mutate_bytes(rng, data)
        if isinstance(manifest, dict) and isinstance(manifest.get("constants"), list):
            manifest["constants"] = manifest["constants"][:1] * 2000
            members["manifest.json"] = json.dumps(manifest).encode()
            return "the manifest names one constant 2,000 times", _zip(members)
    if kind == 8:
        del members[name]
        return f"{name} removed", _zip(members)
    return mutate_bytes(rng, data)
