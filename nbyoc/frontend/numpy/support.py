"""What ``nbyoc.jit`` understands of NumPy, read from the tables that implement it, and the
one-sentence errors for what it does not: the NumPy function named as NumPy's docs name
it (``numpy.linalg.norm``), with the closest few names it does support.

>>> listing = supported()
>>> "numpy.cumsum" in listing["functions"], "exp" in listing["ufuncs"], "+" in listing["operators"]
(True, True, True)
>>> unsupported_function("numpy.nancumsum", "")
'numpy.nancumsum is not supported by nbyoc.jit; the closest it supports: numpy.cumsum, ...
"""

from __future__ import annotations

import difflib

import numpy as np

#: Python's operators on arrays, by the method that implements them.
OPERATORS = {
    "__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/", "__floordiv__": "//",
    "__mod__": "%", "__pow__": "**", "__matmul__": "@", "__neg__": "unary -",
    "__pos__": "unary +", "__abs__": "abs()", "__invert__": "~", "__and__": "&",
    "__or__": "|", "__xor__": "^", "__lt__": "<", "__le__": "<=", "__gt__": ">",
    "__ge__": ">=", "__eq__": "==", "__ne__": "!=", "__getitem__": "x[...]",
}  # fmt: skip
#: How many close names an error suggests.
SUGGESTED = 3


def public_name(func) -> str:
    """``func``'s name as NumPy documents it: its module without private parts
    (``numpy.linalg._linalg`` -> ``numpy.linalg``), then its name.

    >>> public_name(np.linalg.norm), public_name(np.cumsum)
    ('numpy.linalg.norm', 'numpy.cumsum')
    """
    module = getattr(func, "__module__", None) or "numpy"
    parts = [p for p in module.split(".") if not p.startswith("_")]
    return ".".join([*parts, getattr(func, "__name__", repr(func))])


def supported() -> dict[str, list[str]]:
    """Everything ``nbyoc.jit`` understands, sorted: NumPy ``functions``, ``ufuncs`` (with
    ``reduce``/``accumulate`` where nbyoc has them: ``add.reduce``), array ``methods`` and
    ``attributes``, and Python ``operators``."""
    from ...ir.nodes import Expr
    from .methods import (
        ARRAY_FUNCTIONS,
        UFUNC_GRAPHS,
        UFUNC_REDUCTIONS,
        UFUNC_SCANS,
        ufunc_ops,
    )

    ufuncs = {u.__name__ for u in [*ufunc_ops(), *UFUNC_GRAPHS]}
    ufuncs |= {f"{u.__name__}.reduce" for u in UFUNC_REDUCTIONS}
    ufuncs |= {f"{u.__name__}.accumulate" for u in UFUNC_SCANS}
    members = {
        name: getattr(Expr, name) for name in dir(Expr) if not name.startswith("_")
    }  # (the IR's own fields are not NumPy's)
    numpy_names = set(dir(np.ndarray))
    return {
        "functions": sorted({public_name(f) for f in ARRAY_FUNCTIONS}),
        "ufuncs": sorted(ufuncs),
        "methods": sorted(n for n, m in members.items() if n in numpy_names and callable(m)),
        "attributes": sorted(n for n, m in members.items() if n in numpy_names and not callable(m)),
        "operators": [symbol for method, symbol in OPERATORS.items() if _defines(Expr, method)],
    }


def _defines(cls, method: str) -> bool:
    """Whether ``cls`` or a base of it defines ``method`` (``hasattr`` would also find the
    metaclass's: ``type.__or__`` makes ``X | Y`` a union of classes, not an operator of
    their instances)."""
    return any(method in vars(base) for base in cls.__mro__)


def closest(name: str, candidates: list[str], count: int = SUGGESTED) -> list[str]:
    """The ``count`` names of ``candidates`` closest to ``name`` (compared by their last
    part, so ``numpy.linalg.svd`` finds ``numpy.svdvals``)."""
    short = {c: c.rsplit(".", 1)[-1] for c in candidates}
    tail = name.rsplit(".", 1)[-1]
    by_tail = difflib.get_close_matches(tail, list(short.values()), n=count, cutoff=0.5)
    found = [c for t in by_tail for c in candidates if short[c] == t]
    return list(dict.fromkeys(found))[:count]


def unsupported_function(name: str, hint: str) -> str:
    """The error for a NumPy function ``jit`` lacks: ``hint`` (what to write instead),
    else the closest functions it supports."""
    return f"{name} is not supported by nbyoc.jit; {hint or _instead(name, 'functions')}"


def unsupported_ufunc(name: str, hint: str) -> str:
    """The error for a ufunc (or ufunc method) without an nbyoc op."""
    return f"{name} has no nbyoc op yet; {hint or _instead(name, 'ufuncs')}"


def _instead(name: str, kind: str) -> str:
    names = supported()[kind]
    prefix = "numpy." if kind == "ufuncs" else ""
    near = [f"{prefix}{n}" for n in closest(name.removeprefix("numpy."), names)]
    listing = "nbyoc.frontend.numpy.supported() lists them all"
    if not near:
        return f"none of the {kind} it supports is close ({listing})"
    return f"the closest it supports: {', '.join(near)} ({listing})"
