"""Loading an archive nbyoc did not write: nothing is decompressed or allocated before
its size is checked (issue 35: a 2 KB bzip2 archive inflated to 2.2 GiB, members up to
16 GiB were read into memory, a ``.npy`` header's shape was allocated before its data
was read)."""

from __future__ import annotations

import io
import json
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

import nbyoc
from nbyoc import limits
from nbyoc.errors import LimitError, LoadError
from nbyoc.runtime import archive


@pytest.fixture(scope="module")
def members(tmp_path_factory) -> dict[str, bytes]:
    """The members of a saved host-only executable holding a (64,) float32 constant."""
    x = nbyoc.var("x", (64,))
    fn = nbyoc.compile(nbyoc.function([x], x * nbyoc.const(np.arange(64, dtype=np.float32))), [])
    path = tmp_path_factory.mktemp("saved") / "model.nbyoc"
    fn.save(path)
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def write(path, members: dict[str, bytes], methods: dict | None = None) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data, compress_type=(methods or {}).get(name, zipfile.ZIP_DEFLATED))


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def load_peak(path) -> tuple[Exception, int]:
    """The error loading ``path`` raises, and the peak memory it took (traced)."""
    tracemalloc.start()
    try:
        nbyoc.load(path)
    except nbyoc.NbyocError as e:
        error = e
    else:
        raise AssertionError(f"{path} loaded")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return error, peak


def test_the_saved_archive_loads(members, tmp_path):
    write(tmp_path / "m.nbyoc", members)
    assert nbyoc.load(tmp_path / "m.nbyoc")(np.ones(64, np.float32))[3] == 3


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_members_compressed_otherwise_than_nbyoc_writes_are_refused(members, tmp_path, method):
    # bzip2 inflates without bound in one call of zipfile's reader; LZMA's header picks
    # the dictionary it allocates.
    write(tmp_path / "m.nbyoc", members, {"constants/0.npy": method})
    with pytest.raises(LoadError, match=f"'constants/0.npy' is compressed with method {method}; "
                                        f"nbyoc archives use stored or deflate"):  # fmt: skip
        nbyoc.load(tmp_path / "m.nbyoc")


def test_a_member_larger_than_the_limit_is_refused_before_it_is_inflated(members, tmp_path):
    members = {**members, "constants/0.npy": npy(np.zeros(300_000, np.float32))}
    write(tmp_path / "m.nbyoc", members)
    with limits.override(member_bytes=1_000_000):
        error, peak = load_peak(tmp_path / "m.nbyoc")
    assert isinstance(error, LimitError) and error.limit == "member_bytes"
    assert str(error).startswith(f"{tmp_path / 'm.nbyoc'}: member 'constants/0.npy': 1,200,128 "
                                 f"bytes, more than the limit member_bytes = 1,000,000")  # fmt: skip
    assert peak < 1_000_000


def test_an_archive_inflating_far_beyond_its_size_is_refused_before_it_is_inflated(tmp_path):
    # 64 MiB of zeros deflate to 64 KiB: a thousand times, where nbyoc's own archives
    # inflate 1.1 (weights) to 20 (JSON) times.
    with zipfile.ZipFile(tmp_path / "bomb.nbyoc", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", bytes(64 << 20))
    error, peak = load_peak(tmp_path / "bomb.nbyoc")
    assert isinstance(error, LimitError) and error.limit == "compression_ratio"
    assert "member 'manifest.json' claims 67,108,864 bytes, so the 65," in str(error)
    assert f"more than the limit compression_ratio = {limits.get('compression_ratio')}" in str(
        error
    )
    assert peak < 4 << 20
    with limits.override(compression_ratio=2000), pytest.raises(LoadError, match="not valid JSON"):
        nbyoc.load(tmp_path / "bomb.nbyoc")  # raised: read, and found not to be JSON


def test_a_manifest_naming_one_member_many_times_counts_each_read(members, tmp_path, monkeypatch):
    manifest = json.loads(members["manifest.json"])
    manifest["constants"] = manifest["constants"] * 2000
    write(tmp_path / "m.nbyoc", {**members, "manifest.json": json.dumps(manifest).encode()})
    monkeypatch.setattr(archive, "RATIO_EXEMPT", 0)
    with pytest.raises(LimitError, match=r"inflates .* times, more than the limit compression"):
        nbyoc.load(tmp_path / "m.nbyoc")


def test_a_npy_header_is_checked_against_its_data_before_anything_is_allocated(members, tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 31,)}
    )
    members = {**members, "constants/0.npy": header.getvalue() + bytes(256)}
    write(tmp_path / "m.nbyoc", members)
    error, peak = load_peak(tmp_path / "m.nbyoc")
    assert isinstance(error, LoadError)
    assert "claims shape (2147483648,) of float32 (8,589,934,592 bytes) but holds 256" in str(error)
    assert peak < 1 << 20


@pytest.mark.parametrize("descr", ["|O", "<U4"])
def test_npy_constants_of_types_nbyoc_has_not_are_refused(members, tmp_path, descr):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False,
                                                  "shape": (2,)})  # fmt: skip
    write(tmp_path / "m.nbyoc", {**members, "constants/0.npy": header.getvalue() + bytes(32)})
    with pytest.raises(LoadError):
        nbyoc.load(tmp_path / "m.nbyoc")


def test_a_member_claiming_fewer_bytes_than_it_holds_is_cut_off(members, tmp_path):
    write(tmp_path / "m.nbyoc", members)
    data = (tmp_path / "m.nbyoc").read_bytes()
    at = data.find(b"PK\x01\x02")  # the central directory's first entry: manifest.json
    lied = data[: at + 24] + struct.pack("<I", 10) + data[at + 28 :]
    (tmp_path / "m.nbyoc").write_bytes(lied)
    with pytest.raises(LoadError, match=r"manifest\.json"):
        nbyoc.load(tmp_path / "m.nbyoc")
