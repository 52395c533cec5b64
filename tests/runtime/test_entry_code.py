"""A stage's entry built as LLVM IR (``nbyoc.runtime.llvm.entry_code``): the stage it
calls receives exactly the arguments its row holds, whatever their kinds and dtypes,
an error the stage raises reaches the caller, and only an entry's own text is built.

Kept across processes (its machine code, loaded by another process) is
``test_cross_process.py``'s: a warm program there loads every entry from it.
"""

import numpy as np
import pytest
from numba import njit
from numba.core import types as nbt
from numba.experimental.function_type import _get_jit_address

from nbyoc.runtime.llvm import entry_code
from nbyoc.runtime.llvm.jit_address import call_at
from nbyoc.runtime.llvm.stage_table import table_of

TABLE = nbt.Array(nbt.int64, 1, "C")
ENTRY_TYPE = nbt.FunctionType(nbt.void(TABLE, nbt.int64, nbt.int64, nbt.int64))


@njit
def _call(entry, table, at, lo, hi):
    call_at(entry, ENTRY_TYPE, (table, at, lo, hi))


def _entry(items, symbol: str) -> int:
    library = entry_code.build(entry_code.entry_text(items), symbol)
    return library.get_pointer_to_function(symbol)


INNER = nbt.void(
    nbt.Array(nbt.float32, 2, "C"), nbt.int64, nbt.UniTuple(nbt.int64, 2),
    nbt.Array(nbt.float64, 1, "A"), nbt.Array(nbt.int64, 1, "C"), nbt.int64, nbt.int64,
)  # fmt: skip


@njit(INNER)
def _record(matrix, value, sizes, strided, out, lo, hi):
    """Writes what it received into ``out``."""
    out[0] = matrix.shape[0] * 10 + matrix.shape[1]
    out[1] = matrix.strides[0]
    out[2] = int(matrix[lo:hi].sum())
    out[3] = value
    out[4] = sizes[0] * 100 + sizes[1]
    out[5] = strided.shape[0] * 1000 + strided.strides[0]
    out[6] = int(strided.sum())
    out[7] = lo * 10 + hi


@njit
def _row_of_every_kind(stage, matrix, strided, out):
    # (two rows: the entry must read the second from ``at``, not from the start)
    first = table_of("v v", (0, 0))
    row = table_of("v a2 v t2 s1 a1", (stage, matrix, 7, (3, 5), strided, out))
    both = np.empty(first.size + row.size, np.int64)
    both[: first.size] = first
    both[first.size :] = row
    return both


def test_the_stage_receives_every_kind_of_argument_from_its_row():
    entry = _entry(
        [("array", "float32", 2), ("value",), ("values", 2), ("strided", "float64", 1),
         ("array", "int64", 1)],
        "nbyoc_test_entry_every_kind",
    )  # fmt: skip
    matrix = np.arange(12, dtype=np.float32).reshape(4, 3)
    base = np.arange(10.0)
    out = np.zeros(8, np.int64)
    table = _row_of_every_kind(_get_jit_address(_record, INNER), matrix, base[::3], out)
    _call(entry, table, 2, 1, 3)
    assert out.tolist() == [
        43, 12, int(matrix[1:3].sum()), 7, 305, 4 * 1000 + 24, int(base[::3].sum()), 13,
    ]  # fmt: skip


@pytest.mark.parametrize("dtype", sorted(entry_code.DTYPES))
def test_a_number_passed_by_its_address_arrives_as_itself(dtype):
    numba_type = getattr(nbt, dtype)
    inner = nbt.void(numba_type, nbt.Array(nbt.float64, 1, "C"), nbt.int64, nbt.int64)

    @njit(inner)
    def stage(number, out, lo, hi):
        out[0] = number

    entry = _entry([("scalar", dtype), ("array", "float64", 1)], f"nbyoc_test_entry_{dtype}")
    numpy_dtype = np.bool_ if dtype == "boolean" else np.dtype(dtype)
    number = np.array([1 if dtype == "boolean" else 5], numpy_dtype)
    out = np.zeros(1)
    table = np.array([_get_jit_address(stage, inner), number.ctypes.data, out.ctypes.data, 1])
    _call(entry, table, 0, 0, 1)
    assert out[0] == number[0]


def test_an_error_the_stage_raises_reaches_the_caller():
    inner = nbt.void(nbt.Array(nbt.float32, 1, "C"), nbt.int64, nbt.int64)

    @njit(inner)
    def stage(array, lo, hi):
        if hi > array.shape[0]:
            raise IndexError("past the end")

    entry = _entry([("array", "float32", 1)], "nbyoc_test_entry_raises")
    array = np.zeros(4, np.float32)
    table = np.array([_get_jit_address(stage, inner), array.ctypes.data, 4])
    _call(entry, table, 0, 0, 4)
    with pytest.raises(IndexError, match="past the end"):
        _call(entry, table, 0, 0, 5)


@pytest.mark.parametrize(
    "text",
    [
        "import os\nos.system('true')",
        entry_code.ENTRY_HEAD + "\narray float16 2",
        entry_code.ENTRY_HEAD + "\narray float32",
        entry_code.ENTRY_HEAD + "\narray float32 -1",
        entry_code.ENTRY_HEAD + "\nvalues 65",
        entry_code.ENTRY_HEAD + "\nvalue 1",
        entry_code.ENTRY_HEAD + "\nscalar",
        entry_code.ENTRY_HEAD + "\n",
    ],
)
def test_only_an_entrys_own_text_is_built(text):
    with pytest.raises(ValueError, match="internal: "):
        entry_code.build(text, "nbyoc_test_entry_refused")
