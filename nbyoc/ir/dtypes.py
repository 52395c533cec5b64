"""Supported dtypes: one list of names, a ``DType`` record per name derived from NumPy,
and promotion that is NumPy's own.

nbyoc supports ``bool``, ``int8``, ``int16``, ``int32``, ``int64``, ``uint8``,
``uint16``, ``uint32``, ``uint64``, ``float16``, ``float32`` and ``float64``.
Mixing dtypes in one op gives what NumPy gives (``np.result_type``; each op's
result dtype is NumPy's for that op, see ``nbyoc.ir.ops.elementwise``)::

    int32 + float32 -> float64      uint8 + int8 -> int16      uint64 + int64 -> float64
    bool + bool -> bool             int8 / int8 -> float64     exp(int8) -> float16

Python scalars are *weak*, as in NumPy 2 (NEP 50): they take the dtype of the
tensor they meet, except that a Python ``float`` meeting an integer or bool
tensor gives ``float64`` and a Python ``int`` meeting a bool tensor ``int64``.
NumPy scalars and arrays are *strong*: they keep their own dtype. Code that needs
a fact about a dtype (is it a float, how many bits, its range) asks its record,
``dtype_info(name)``, never the spelling of its name.

>>> promote("int32", "float32"), promote("uint8", "int8")
('float64', 'int16')
>>> scalar_dtype(2.5, "float32"), scalar_dtype(2, "uint8"), scalar_dtype(2.5, "int32")
('float32', 'uint8', 'float64')
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..errors import NbyocTypeError, UnsupportedDTypeError


@dataclass(frozen=True)
class DType:
    """What every part of nbyoc knows about a dtype, derived from its NumPy dtype: code
    asks these fields, never the spelling of the name.

    >>> info = dtype_info("int32")
    >>> info.kind, info.bits, info.itemsize, info.is_float, info.min
    ('int', 32, 4, False, -2147483648)
    """

    name: str

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(self.name)

    @property
    def kind(self) -> str:
        """ "bool", "int" (signed), "uint" or "float"."""
        return {"b": "bool", "i": "int", "u": "uint", "f": "float"}[self.numpy.kind]

    @property
    def bits(self) -> int:
        return self.numpy.itemsize * 8

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def min(self):
        """The smallest value (a Python int for integers and bool, -inf for floats)."""
        if self.kind == "bool":
            return 0
        return int(np.iinfo(self.numpy).min) if self.is_integer else float("-inf")

    @property
    def max(self):
        if self.kind == "bool":
            return 1
        return int(np.iinfo(self.numpy).max) if self.is_integer else float("inf")


#: The supported dtypes: the one list; everything else is derived from NumPy's records.
DTYPES: tuple[str, ...] = (
    "float32", "float64", "int32", "int64", "bool", "int8", "int16",
    "uint8", "uint16", "uint32", "uint64", "float16",
)  # fmt: skip
_RECORDS: dict[str, DType] = {name: DType(name) for name in DTYPES}
FLOAT_DTYPES: frozenset[str] = frozenset(d for d in DTYPES if _RECORDS[d].is_float)
INT_DTYPES: frozenset[str] = frozenset(d for d in DTYPES if _RECORDS[d].is_integer)

_BY_NUMPY_DTYPE = {np.dtype(d): d for d in DTYPES}


def dtype_info(dtype) -> DType:
    """The record of a supported dtype (by canonical name, or anything ``normalize_dtype``
    takes)."""
    record = _RECORDS.get(dtype) if dtype.__class__ is str else None
    return record if record is not None else _RECORDS[normalize_dtype(dtype)]


def normalize_dtype(dtype) -> str:
    """Return the canonical name of a supported dtype.

    Accepts a name, a ``numpy.dtype`` or a NumPy scalar type.

    >>> normalize_dtype(np.float32), normalize_dtype("int64"), normalize_dtype(np.dtype("f8"))
    ('float32', 'int64', 'float64')
    """
    if dtype.__class__ is str and dtype in DTYPES:  # the common cases, kept cheap
        return dtype
    if isinstance(dtype, np.dtype) and dtype in _BY_NUMPY_DTYPE:
        return _BY_NUMPY_DTYPE[dtype]
    try:
        name = np.dtype(dtype).name
    except (TypeError, ValueError, SyntaxError):  # NumPy parses "f4,"-style strings with ast
        name = None
    if name not in DTYPES:
        raise UnsupportedDTypeError(
            f"dtype {dtype!r} is not supported; use one of {', '.join(DTYPES)} "
            f"(convert arrays with .astype(...))"
        )
    return name


def promote(*dtypes: str) -> str:
    """The common dtype of several operands: NumPy's own ``np.result_type``.

    >>> promote("int32", "int64", "float32")
    'float64'
    """
    if len(dtypes) == 1 or all(d == dtypes[0] for d in dtypes[1:]):
        return dtypes[0]  # the common case, without asking NumPy
    return _promote(*dtypes)


@functools.cache
def _promote(*dtypes: str) -> str:
    return normalize_dtype(np.result_type(*(np.dtype(d) for d in dtypes)))


def same(dtype: str) -> str:
    """The dtype rule of ops whose result has their operand's dtype (max, reshape, ...)."""
    return dtype


def to_float(dtype: str) -> str:
    """The dtype of a float-valued reduction or division on ``dtype`` (``np.mean``,
    ``np.true_divide``): floats stay as they are, integers and bool become float64.

    >>> to_float("int8"), to_float("float16")
    ('float64', 'float16')
    """
    return dtype if dtype in FLOAT_DTYPES else "float64"


@functools.cache
def accumulate(dtype: str) -> str:
    """The dtype of ``sum`` over ``dtype``, as NumPy chooses it: small signed integers and
    bool sum to int64, small unsigned ones to uint64, floats stay.

    >>> accumulate("int32"), accumulate("uint8"), accumulate("bool"), accumulate("float16")
    ('int64', 'uint64', 'int64', 'float16')
    """
    return normalize_dtype(np.sum(np.zeros(1, dtype)).dtype)


def scalar_dtype(value: int | float | bool, partner: str | None) -> str:
    """The dtype a weak Python scalar takes next to a tensor of dtype ``partner``
    (NumPy 2's rule, NEP 50).

    With no partner (both operands are Python scalars), bools are bool, ints int64
    and floats float64, NumPy's defaults. Raises if an int does not fit the
    partner's integer dtype, as NumPy 2 does.

    >>> scalar_dtype(3, "float32"), scalar_dtype(3, None), scalar_dtype(3, "bool")
    ('float32', 'int64', 'int64')
    """
    if not isinstance(value, (bool, int, float)):
        raise NbyocTypeError(
            f"cannot use {value!r} ({type(value).__name__}) as a constant; "
            f"use a bool, an int, a float, or nbyoc.const(array)"
        )
    if partner is None:
        result = normalize_dtype(np.asarray(value).dtype)
    else:
        result = _weak_result(partner, type(value))
    if isinstance(value, int) and not isinstance(value, bool) and result in INT_DTYPES:
        info = dtype_info(result)
        if not info.min <= value <= info.max:
            raise NbyocTypeError(
                f"Python integer {value} is out of bounds for {result}; "
                f"use nbyoc.const(np.int64({value})) or a float"
            )
    return result


@functools.cache
def _weak_result(partner: str, kind: type) -> str:
    # NumPy's promotion of a tensor with a weak Python scalar of this kind (the value
    # does not matter under NEP 50; 0 fits every dtype).
    return normalize_dtype(np.result_type(np.dtype(partner), kind(0)))
