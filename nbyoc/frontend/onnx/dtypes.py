"""ONNX element types and nbyoc dtypes: one table, derived from ONNX's own mapping to
NumPy, keeping the types nbyoc has.

>>> from onnx import TensorProto
>>> onnx_dtype(TensorProto.FLOAT), onnx_dtype(TensorProto.UINT8)
('float32', 'uint8')
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ...errors import ModelImportError
from ...ir.dtypes import DTYPES

#: ONNX's names for NumPy's float32 and float64; every other type nbyoc has is named
#: as NumPy names it (INT8 is int8, FLOAT16 is float16).
_ALIASES = {"FLOAT": "float32", "DOUBLE": "float64"}


def _table() -> dict[int, str]:
    table = {}
    for name, code in TensorProto.DataType.items():
        dtype = _ALIASES.get(name, name.lower())
        # ONNX also maps bfloat16, float8 and int4 onto NumPy types that are not theirs;
        # the name check keeps only the types whose own name is an nbyoc dtype.
        if dtype in DTYPES and np.dtype(helper.tensor_dtype_to_np_dtype(code)) == dtype:
            table[code] = dtype
    return table


#: ONNX element type (TensorProto enum) -> nbyoc dtype, for every type nbyoc has.
ONNX_TO_NBYOC = _table()
NBYOC_TO_ONNX = {dtype: code for code, dtype in ONNX_TO_NBYOC.items()}


def onnx_dtype(code: int, where: str = "a tensor") -> str:
    """The nbyoc dtype of ONNX element type ``code``, or an error naming it."""
    if code in ONNX_TO_NBYOC:
        return ONNX_TO_NBYOC[code]
    name = TensorProto.DataType.Name(code) if code in TensorProto.DataType.values() else code
    have = ", ".join(sorted(TensorProto.DataType.Name(c) for c in ONNX_TO_NBYOC))
    raise ModelImportError(f"{where}: element type {name} is not supported (nbyoc has {have})")
