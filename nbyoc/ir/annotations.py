"""The types the public signatures share: what may stand for a shape, a dtype, an
operand of an op, an attribute value. (Annotations only: nothing here checks a value;
``normalize_shape``, ``normalize_dtype`` and ``call_op`` do.)

>>> from nbyoc.ir.builder import var
>>> shape: ShapeLike = ("n", 3)
>>> var("x", shape).type
Tensor[(n, 3), float32]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .nodes import Expr
from .symbols import SizeExpr

#: One dimension: a size, a symbol's name (``"n"``) or an expression of symbols
#: (``"2*n"``), or a ``SizeExpr``.
Dimension = int | str | SizeExpr
#: A shape: dimensions in a sequence, or one for a 1-D shape.
ShapeLike = Sequence[Dimension] | Dimension
#: A dtype: its name (``"float32"``), a ``numpy.dtype`` or a NumPy scalar type.
DTypeLike = str | np.dtype[Any] | type
#: An op's operand: a graph value, or data made a constant (an array, a nested list, a
#: NumPy scalar; a Python number is weak: it takes its partner's dtype kind).
Operand = Expr | np.ndarray[Any, Any] | np.generic | float | int | bool | Sequence[Any]
#: The axes of a reduction or a sort: one, several, or None for all.
Axes = int | Sequence[int] | None
