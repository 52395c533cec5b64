"""Supported dtypes and the promotion rules nbyoc uses (NumPy 2's, written out).

nbyoc supports four dtypes: ``float32``, ``float64``, ``int32``, ``int64``.
Mixing two of them in one op gives the dtype in this table, which is NumPy's
``np.result_type`` for the same pair (the tests check every pair)::

               int32    int64    float32  float64
    int32      int32    int64    float64  float64
    int64      int64    int64    float64  float64
    float32    float64  float64  float32  float64
    float64    float64  float64  float64  float64

Python scalars are *weak*, as in NumPy 2 (NEP 50): they take the dtype of the
tensor they meet, except that a Python ``float`` meeting an integer tensor gives
``float64``. NumPy scalars and arrays are *strong*: they keep their own dtype.

>>> promote("int32", "float32")
'float64'
>>> scalar_dtype(2.5, "float32"), scalar_dtype(2, "int32"), scalar_dtype(2.5, "int32")
('float32', 'int32', 'float64')
"""

from __future__ import annotations

import numpy as np

from ..errors import NbyocTypeError, UnsupportedDTypeError

DTYPES: tuple[str, ...] = ("float32", "float64", "int32", "int64")
FLOAT_DTYPES: frozenset[str] = frozenset({"float32", "float64"})
INT_DTYPES: frozenset[str] = frozenset({"int32", "int64"})

# The table from the module docstring. Symmetric; looked up with a sorted key.
_PROMOTION: dict[frozenset[str], str] = {
    frozenset({"int32"}): "int32",
    frozenset({"int64"}): "int64",
    frozenset({"float32"}): "float32",
    frozenset({"float64"}): "float64",
    frozenset({"int32", "int64"}): "int64",
    frozenset({"int32", "float32"}): "float64",
    frozenset({"int32", "float64"}): "float64",
    frozenset({"int64", "float32"}): "float64",
    frozenset({"int64", "float64"}): "float64",
    frozenset({"float32", "float64"}): "float64",
}


_BY_NUMPY_DTYPE = {np.dtype(d): d for d in DTYPES}


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
    """The common dtype of several operands (NumPy's promotion, see the table above).

    >>> promote("int32", "int64", "float32")
    'float64'
    """
    result = dtypes[0]
    for other in dtypes[1:]:
        result = _PROMOTION[frozenset({result, other})]
    return result


def same(dtype: str) -> str:
    """The dtype rule of ops whose result has their operand's dtype (add, max, ...)."""
    return dtype


def to_float(dtype: str) -> str:
    """The dtype of a float-valued op (exp, divide, mean, ...) on ``dtype``:
    integers become float64, floats stay as they are.

    >>> to_float("int32"), to_float("float32")
    ('float64', 'float32')
    """
    return dtype if dtype in FLOAT_DTYPES else "float64"


def accumulate(dtype: str) -> str:
    """The dtype of ``sum`` over ``dtype``: NumPy widens int32 to int64.

    >>> accumulate("int32"), accumulate("float32")
    ('int64', 'float32')
    """
    return "int64" if dtype in INT_DTYPES else dtype


def scalar_dtype(value: int | float, partner: str | None) -> str:
    """The dtype a weak Python scalar takes next to a tensor of dtype ``partner``.

    With no partner (both operands are Python scalars), ints are int64 and
    floats float64, NumPy's defaults. Raises if an int does not fit the
    partner's integer dtype, as NumPy 2 does.

    >>> scalar_dtype(3, "float32"), scalar_dtype(3, None)
    ('float32', 'int64')
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NbyocTypeError(
            f"cannot use {value!r} ({type(value).__name__}) as a constant; "
            f"use an int, a float, or nbyoc.const(array)"
        )
    if partner is None:
        result = "int64" if isinstance(value, int) else "float64"
    elif isinstance(value, float):
        result = to_float(partner)
    else:
        result = partner
    if isinstance(value, int) and result in INT_DTYPES:
        info = np.iinfo(result)
        if not info.min <= value <= info.max:
            raise NbyocTypeError(
                f"Python integer {value} is out of bounds for {result}; "
                f"use nbyoc.const(np.int64({value})) or a float"
            )
    return result
