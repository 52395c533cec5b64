"""Supported dtypes: one list of names, a ``DType`` record per name derived from NumPy
(and from ``ml_dtypes`` for the machine-learning types), and promotion that is NumPy's
own.

nbyoc computes in ``bool``, ``int8``, ``int16``, ``int32``, ``int64``, ``uint8``,
``uint16``, ``uint32``, ``uint64``, ``float16``, ``bfloat16``, ``float32`` and
``float64`` (``DTYPES``). Mixing dtypes in one op gives what NumPy gives
(``np.result_type``; each op's result dtype is NumPy's for that op, see
``nbyoc.ir.ops.elementwise``)::

    int32 + float32 -> float64      uint8 + int8 -> int16      uint64 + int64 -> float64
    bool + bool -> bool             int8 / int8 -> float64     exp(int8) -> float16

bfloat16 (``ml_dtypes.bfloat16``, the machine-learning float with float32's range and
8 bits of precision) promotes as float16 does, and with float16 to float32, which
holds both; every op on it computes in float32 and rounds its result to the nearest
bfloat16, ties to even.

The *narrow* dtypes (``NARROW_DTYPES``: the float8 formats, float4 and the 4- and
2-bit integers of ``ml_dtypes``) are stored, moved and converted but never computed
in: they are valid in types, constants and arguments, in the ops that only move
values (reshape, transpose, slice, gather, concatenate, ...), and in ``cast`` to and
from any dtype; an op that computes refuses them and says to cast first.

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

import ml_dtypes  # (registers bfloat16, float8 and the 4-bit types with NumPy)
import numpy as np

from ..errors import NbyocTypeError, UnsupportedDTypeError

#: The dtypes ml_dtypes adds to NumPy (their NumPy kind is "V"; their facts come from
#: ml_dtypes' finfo and iinfo).
_ML_DTYPES = {
    name: np.dtype(getattr(ml_dtypes, name))
    for name in ("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                 "float8_e5m2fnuz", "float4_e2m1fn", "int4", "uint4", "int2", "uint2")
}  # fmt: skip


@dataclass(frozen=True)
class DType:
    """What every part of nbyoc knows about a dtype, derived from its NumPy dtype (and
    ml_dtypes' records of its own types): code asks these fields, never the spelling of
    the name.

    >>> info = dtype_info("int32")
    >>> info.kind, info.bits, info.itemsize, info.is_float, info.min
    ('int', 32, 4, False, -2147483648)
    >>> int4 = dtype_info("int4")
    >>> int4.kind, int4.bits, int4.itemsize, int4.min, int4.max, int4.computed
    ('int', 4, 1, -8, 7, False)
    """

    name: str

    @property
    def numpy(self) -> np.dtype:
        ml = _ML_DTYPES.get(self.name)  # (not ``or``: a dtype without fields is falsy)
        return ml if ml is not None else np.dtype(self.name)

    @property
    def kind(self) -> str:
        """ "bool", "int" (signed), "uint" or "float"."""
        if self.name in _ML_DTYPES:
            if _is_ml_integer(self.name):
                return "int" if ml_dtypes.iinfo(self.numpy).min < 0 else "uint"
            return "float"
        return {"b": "bool", "i": "int", "u": "uint", "f": "float"}[self.numpy.kind]

    @property
    def bits(self) -> int:
        """The value's width (4 for int4, though NumPy holds each in a byte)."""
        if self.name in _ML_DTYPES:
            info = ml_dtypes.iinfo if _is_ml_integer(self.name) else ml_dtypes.finfo
            return info(self.numpy).bits
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
    def native(self) -> bool:
        """Whether NumPy has the dtype itself (C and the hardware too); False for the
        types ml_dtypes adds (bfloat16, float8, the 4-bit integers)."""
        return self.name not in _ML_DTYPES

    @property
    def computed(self) -> bool:
        """False for the narrow dtypes, which are stored and converted, never computed in."""
        return self.name not in NARROW_DTYPES

    @property
    def min(self):
        """The smallest value (a Python int for integers and bool, -inf for floats)."""
        if self.kind == "bool":
            return 0
        return int(_iinfo(self.numpy).min) if self.is_integer else float("-inf")

    @property
    def max(self):
        if self.kind == "bool":
            return 1
        return int(_iinfo(self.numpy).max) if self.is_integer else float("inf")

    @property
    def finite_max(self) -> float:
        """A float dtype's largest finite value (what a saturating cast clips to).

        >>> dtype_info("float8_e4m3fn").finite_max, dtype_info("float16").finite_max
        (448.0, 65504.0)
        """
        return float(ml_dtypes.finfo(self.numpy).max)


def _is_ml_integer(name: str) -> bool:
    try:
        ml_dtypes.iinfo(_ML_DTYPES[name])
    except ValueError:
        return False
    return True


def _iinfo(dtype: np.dtype):
    return ml_dtypes.iinfo(dtype) if dtype in _ML_DTYPES.values() else np.iinfo(dtype)


#: The dtypes nbyoc computes in: the one list; everything else is derived from the
#: records.
DTYPES: tuple[str, ...] = (
    "float32", "float64", "int32", "int64", "bool", "int8", "int16",
    "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
)  # fmt: skip
#: The dtypes nbyoc stores, moves and converts (``cast``) but does not compute in.
NARROW_DTYPES: tuple[str, ...] = (
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn",
    "int4", "uint4", "int2", "uint2",
)  # fmt: skip
#: Every dtype a type may have.
ALL_DTYPES: tuple[str, ...] = DTYPES + NARROW_DTYPES
_RECORDS: dict[str, DType] = {name: DType(name) for name in ALL_DTYPES}
FLOAT_DTYPES: frozenset[str] = frozenset(d for d in DTYPES if _RECORDS[d].is_float)
INT_DTYPES: frozenset[str] = frozenset(d for d in DTYPES if _RECORDS[d].is_integer)

_BY_NUMPY_DTYPE = {_RECORDS[d].numpy: d for d in ALL_DTYPES}


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
    if dtype.__class__ is str and dtype in _RECORDS:  # the common cases, kept cheap
        return dtype
    if isinstance(dtype, np.dtype) and dtype in _BY_NUMPY_DTYPE:
        return _BY_NUMPY_DTYPE[dtype]
    try:
        name = np.dtype(dtype).name
    except (TypeError, ValueError, SyntaxError):  # NumPy parses "f4,"-style strings with ast
        name = None
    if name not in _RECORDS:
        raise UnsupportedDTypeError(
            f"dtype {dtype!r} is not supported; use one of {', '.join(DTYPES)}, or store "
            f"as one of {', '.join(NARROW_DTYPES)} (convert arrays with .astype(...))"
        )
    return name


def as_bits(array: np.ndarray) -> np.ndarray:
    """``array`` as NumPy's own dtypes hold it: a view of an ml_dtypes array (bfloat16,
    float8, int4, ...) as the unsigned integers of its itemsize, which ``.npy`` files and
    C hold (their ``.npy`` header would say "void"); other arrays as they are. The
    declared type reads it back (``from_bits``).

    >>> as_bits(np.array([1.0], "bfloat16")).dtype.name
    'uint16'
    """
    if array.dtype.kind != "V" or array.dtype not in _BY_NUMPY_DTYPE:
        return array
    return array.view(f"u{array.dtype.itemsize}")


def from_bits(array: np.ndarray, dtype: str) -> np.ndarray:
    """An array ``as_bits`` wrote for ``dtype``, as that dtype again (others as they are)."""
    info = dtype_info(dtype)
    if info.native or array.dtype != np.dtype(f"u{info.itemsize}"):
        return array
    return array.view(info.numpy)


def computable(dtype: str, where: str) -> str:
    """``dtype``, or an error saying that ``where`` cannot compute in a narrow dtype.

    >>> computable("int4", "add")
    Traceback (most recent call last):
        ...
    nbyoc.errors.NbyocTypeError: add: int4 is a storage dtype nbyoc does not compute in; ...
    """
    if dtype in NARROW_DTYPES:
        raise NbyocTypeError(
            f"{where}: {dtype} is a storage dtype nbyoc does not compute in; cast it first "
            f'(e.g. nbyoc.cast(x, "float32"))'
        )
    return dtype


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
    for d in dtypes:
        computable(d, "promotion")
    if "bfloat16" not in dtypes:
        return normalize_dtype(np.result_type(*(np.dtype(d) for d in dtypes)))
    # bfloat16 promotes as float16 does (NumPy has no rule for it with most integers);
    # with float16 itself, neither holds the other and float32 holds both.
    if "float16" in dtypes:
        return _promote(*("float32" if d in ("bfloat16", "float16") else d for d in dtypes))
    result = _promote(*("float16" if d == "bfloat16" else d for d in dtypes))
    return "bfloat16" if result == "float16" else result


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
    # does not matter under NEP 50; 0 fits every dtype); bfloat16 as float16.
    computable(partner, "a Python scalar's promotion")
    if partner == "bfloat16":
        result = _weak_result("float16", kind)
        return "bfloat16" if result == "float16" else result
    return normalize_dtype(np.result_type(np.dtype(partner), kind(0)))
