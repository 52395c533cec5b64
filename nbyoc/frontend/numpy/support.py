"""What ``nbyoc.jit`` understands of NumPy, read from the tables that implement it and
from the members graph values have (``supported()``); the errors for what it does not
understand are ``refusals``'.

>>> listing = supported()
>>> "numpy.cumsum" in listing["functions"], "exp" in listing["ufuncs"], "+" in listing["operators"]
(True, True, True)
"""

from __future__ import annotations

import numpy as np

from ...ir.nodes import Expr
from . import functions, ufuncs

#: Python's operators on arrays, by the method that implements them.
OPERATORS = {
    "__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/", "__floordiv__": "//",
    "__mod__": "%", "__pow__": "**", "__matmul__": "@", "__neg__": "unary -",
    "__pos__": "unary +", "__abs__": "abs()", "__invert__": "~", "__and__": "&",
    "__or__": "|", "__xor__": "^", "__lt__": "<", "__le__": "<=", "__gt__": ">",
    "__ge__": ">=", "__eq__": "==", "__ne__": "!=", "__getitem__": "x[...]",
}  # fmt: skip


def supported() -> dict[str, list[str]]:
    """Everything ``nbyoc.jit`` understands, sorted: NumPy ``functions``, ``ufuncs`` (with
    ``reduce``/``accumulate`` where nbyoc has them: ``add.reduce``), array ``methods`` and
    ``attributes``, and Python ``operators``."""
    members = {
        name: getattr(Expr, name) for name in dir(Expr) if not name.startswith("_")
    }  # (the IR's own fields are not NumPy's)
    numpy_names = set(dir(np.ndarray))
    return {
        "functions": functions.names(),
        "ufuncs": ufuncs.names(),
        "methods": sorted(n for n, m in members.items() if n in numpy_names and callable(m)),
        "attributes": sorted(n for n, m in members.items() if n in numpy_names and not callable(m)),
        "operators": [symbol for method, symbol in OPERATORS.items() if _defines(Expr, method)],
    }


def _defines(cls, method: str) -> bool:
    """Whether ``cls`` or a base of it defines ``method`` (``hasattr`` would also find the
    metaclass's: ``type.__or__`` makes ``X | Y`` a union of classes, not an operator of
    their instances)."""
    return any(method in vars(base) for base in cls.__mro__)
