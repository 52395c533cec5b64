"""Streaming stores (nbyoc.runtime.llvm.stream): ``stream_row`` writes exactly its row, for
every element size and every position of the row in a cache line, with non-temporal
stores for the aligned middle."""

from __future__ import annotations

import platform

import numpy as np
import pytest
from numba import njit

from nbyoc.runtime.llvm.stream import LINE_BYTES, store_fence, stream_row


@njit(nogil=True)
def _write(array, row, values):
    stream_row(array, row, values)
    store_fence()


@pytest.mark.parametrize("dtype", ["int8", "int16", "float32", "float64", "complex128"])
@pytest.mark.parametrize("columns", [0, 1, 3, 15, 16, 17, 63, 64, 100, 1000])
def test_stream_row_writes_its_row_and_nothing_else(dtype, columns):
    """Rows starting at every byte offset in a line (offsets that are no multiple of the
    element size too: such rows are stored without streaming); the bytes around the
    array and its other rows keep their sentinel."""
    size = np.dtype(dtype).itemsize
    values = (np.arange(columns) + 1).astype(dtype)
    for offset in range(0, LINE_BYTES + size):
        raw = np.full(3 * columns * size + 2 * LINE_BYTES + offset, 0xA5, np.uint8)
        array = raw[offset : offset + 3 * columns * size].view(dtype).reshape(3, columns)
        expected = array.copy()
        expected[1] = values
        _write(array, 1, values)
        np.testing.assert_array_equal(array, expected)
        assert (raw[:offset] == 0xA5).all() and (raw[offset + array.nbytes :] == 0xA5).all()


def test_stream_row_marks_its_stores_nontemporal():
    """The aligned middle is stored through ``!nontemporal`` vector stores of a whole
    line (LLVM IR), which x86 compiles to ``vmovntdq``/``movntdq``."""
    array, values = np.zeros((2, 64), np.float32), np.ones(64, np.float32)
    _write(array, 0, values)
    signature = _write.typeof_pyval(array), _write.typeof_pyval(0), _write.typeof_pyval(values)
    ir = _write.inspect_llvm(signature)
    assert f"store <{LINE_BYTES} x i8>" in ir and "!nontemporal" in ir
    assert "fence seq_cst" in ir
    asm = _write.inspect_asm(signature)
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert "movntdq" in asm or "movntps" in asm
