"""An ONNX tensor's values (initializers, ``Constant`` nodes' tensors), read without
trusting the model.

A tensor stores its elements in ``raw_data`` (little-endian bytes), in a typed field
(``float_data``, ``int32_data``, ...), or in a file its ``external_data`` names
(``location``, ``offset``, ``length``). Before any of it becomes an array:

- the declared dims must be non-negative and agree with the number of elements held;
- external data is read only from inside ``base_dir``, the model's directory: the
  location must be a relative path without ``..``, must not leave the directory through
  a symbolic link, must be a regular file, and the offset and length must lie within
  it. Without a directory (a model given as bytes or a ModelProto, and no
  ``base_dir=``) external data is refused: nbyoc never reads a file relative to the
  process's current directory.

>>> import numpy as np
>>> from onnx import numpy_helper
>>> tensor_array(numpy_helper.from_array(np.arange(3.0), "w"), None, "initializer 'w'")
array([0., 1., 2.])
>>> bad = numpy_helper.from_array(np.arange(3.0), "w")
>>> bad.dims[:] = [1000]
>>> tensor_array(bad, None, "initializer 'w'")
Traceback (most recent call last):
    ...
nbyoc.errors.ModelImportError: initializer 'w': declares dims [1000] (1,000 elements) but holds 3
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import PurePosixPath, PureWindowsPath

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...errors import ModelImportError, shown
from ...ir.dtypes import dtype_info
from .dtypes import ONNX_TO_NBYOC

#: external_data values that are byte counts: decimal digits only.
_COUNT = re.compile(r"\d{1,20}\Z")


def tensor_array(tensor: TensorProto, base_dir: str | None, where: str) -> np.ndarray:
    """The values of ``tensor`` as an array; ``where`` names it in errors (see the module
    docstring for what is checked)."""
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelImportError(f"{where}: declares negative dims {dims}")
    if tensor.data_location == TensorProto.EXTERNAL:
        loaded = TensorProto()
        loaded.CopyFrom(tensor)  # the caller's model stays as it was
        loaded.raw_data = external_bytes(tensor, base_dir, where)
        loaded.data_location = TensorProto.DEFAULT
        del loaded.external_data[:]
        tensor = loaded
    count = math.prod(dims)
    held = _elements_held(tensor, count)
    if held is not None and held != count:
        raise ModelImportError(
            f"{where}: declares dims {dims} ({count:,} elements) but holds {held:,}"
        )
    try:
        return numpy_helper.to_array(tensor)
    except Exception as e:  # onnx raises many kinds on element types it cannot convert
        raise ModelImportError(f"{where}: cannot read its data: {type(e).__name__}: {e}") from None


def _elements_held(tensor: TensorProto, count: int) -> int | None:
    """How many elements ``tensor`` holds, for the element types nbyoc has (each stored
    one per entry or ``itemsize`` bytes apiece; the 4- and 2-bit types packed, several
    per byte or per ``int32_data`` entry, so ``count`` when their entries hold exactly
    that many); None for other types (onnx's own conversion checks those)."""
    if tensor.data_type not in ONNX_TO_NBYOC:
        return None
    info = dtype_info(ONNX_TO_NBYOC[tensor.data_type])
    if tensor.HasField("raw_data"):
        entries, itemsize = len(tensor.raw_data), info.itemsize
    else:
        entries = len(getattr(tensor, helper.tensor_dtype_to_field(tensor.data_type)))
        itemsize = 1
    if info.bits < 8:
        per_entry = 8 // info.bits
        return count if entries == -(-count // per_entry) else entries * per_entry
    return entries // itemsize if entries % itemsize == 0 else -1


def external_bytes(tensor: TensorProto, base_dir: str | None, where: str) -> bytes:
    """The bytes ``tensor``'s external data names, read from inside ``base_dir``."""
    entries = {e.key: e.value for e in tensor.external_data}
    location = entries.get("location", "")
    if base_dir is None:
        raise ModelImportError(
            f"{where} keeps its data in the external file {shown(location)}, and a model given as "
            f"bytes or a ModelProto has no directory to read it from: pass "
            f"from_onnx(..., base_dir=<the directory holding the model's files>), or the "
            f"model's path"
        )
    _check_location(location, where)
    offset, length = (_count(entries, key, where) for key in ("offset", "length"))
    base = os.path.realpath(base_dir)
    target = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, target]) != base:
        raise ModelImportError(
            f"{where}: its external file {shown(location)} leads outside the model's directory "
            f"{base_dir!r} (through a symbolic link); nbyoc reads external data only from "
            f"inside it"
        )
    return _read_file(target, offset or 0, length, f"{where}: its external file {shown(location)}")


def _read_file(path: str, offset: int, length: int | None, what: str) -> bytes:
    """``length`` bytes (or all) from ``offset`` of the regular file at ``path``."""
    try:
        # Opened without waiting (a FIFO would block until someone wrote to it), and
        # refused unless it is a regular file.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        size = os.fstat(fd)
        if not stat.S_ISREG(size.st_mode):
            os.close(fd)
            raise ModelImportError(f"{what} is not a file")
        with os.fdopen(fd, "rb") as f:
            if offset + (length or 0) > size.st_size:
                asked = "the rest" if length is None else f"{length:,} bytes"
                raise ModelImportError(
                    f"{what} holds {size.st_size:,} bytes: {asked} from offset {offset:,} "
                    f"reach beyond it"
                )
            if length is None:
                length = size.st_size - offset
            f.seek(offset)
            data = f.read(length)
    except OSError as e:
        raise ModelImportError(f"{what} cannot be read: {e.strerror}") from None
    if len(data) != length:  # the file shrank while it was read
        raise ModelImportError(f"{what} ended early")
    return data


def _check_location(location: str, where: str) -> None:
    """Refuse a location that is empty, absolute, or climbs out with ``..`` (in either
    path syntax, so a model written on Windows is judged as it would be there)."""
    paths = (PurePosixPath(location), PureWindowsPath(location))
    if (
        not location
        or "\0" in location
        or any(p.is_absolute() or p.anchor for p in paths)
        or any(".." in p.parts for p in paths)
    ):
        raise ModelImportError(
            f"{where}: external data location {shown(location)} must be a relative path inside "
            f"the model's directory (no '..', not absolute)"
        )


def _count(entries: dict, key: str, where: str) -> int | None:
    if key not in entries:
        return None
    if not _COUNT.match(entries[key]):
        raise ModelImportError(
            f"{where}: external data {key} {shown(entries[key])} is not a non-negative integer"
        )
    return int(entries[key])
