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
from ...ir.dtypes import ALL_DTYPES

#: ONNX's names for the types nbyoc names otherwise; every other type nbyoc has is
#: named as NumPy (and ml_dtypes) name it, less the underscores (INT8 is int8,
#: FLOAT8E4M3FN is float8_e4m3fn).
_ALIASES = {"FLOAT": "float32", "DOUBLE": "float64", "FLOAT4E2M1": "float4_e2m1fn"}
_BY_SPELLING = {d.replace("_", ""): d for d in ALL_DTYPES}


def _table() -> dict[int, str]:
    table = {}
    for name, code in TensorProto.DataType.items():
        dtype = _ALIASES.get(name) or _BY_SPELLING.get(name.lower())
        # (the NumPy type onnx reads it as must be that dtype's: an older onnx read
        # bfloat16 as uint16)
        if dtype is not None and np.dtype(helper.tensor_dtype_to_np_dtype(code)) == np.dtype(dtype):
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
