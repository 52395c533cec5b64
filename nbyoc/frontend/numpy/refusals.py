"""The NumPy layer's errors: one sentence naming the NumPy function as NumPy's docs name
it (``numpy.linalg.norm``) and what to write instead, or the closest few names the
layer does support.

>>> unsupported_function("numpy.nancumsum", "", ["numpy.cumsum", "numpy.sum", "numpy.sort"])
'numpy.nancumsum is not supported by nbyoc.jit; the closest it supports: numpy.cumsum, ...
>>> refuse("round", "rounds to whole numbers only")
Traceback (most recent call last):
    ...
nbyoc.errors.NbyocTypeError: numpy.round: rounds to whole numbers only
"""

from __future__ import annotations

import difflib

from ...errors import NbyocTypeError

#: How many close names an error suggests.
SUGGESTED = 3
#: Where the full listing is.
LISTING = "nbyoc.frontend.numpy.supported() lists them all"


def refuse(name: str, what: str):
    """Raise the error for NumPy's ``name`` given what graph values cannot take (``what``)."""
    raise NbyocTypeError(f"numpy.{name}: {what}")


def public_name(func) -> str:
    """``func``'s name as NumPy documents it: its module without private parts
    (``numpy.linalg._linalg`` -> ``numpy.linalg``), then its name.

    >>> import numpy as np
    >>> public_name(np.linalg.norm), public_name(np.cumsum)
    ('numpy.linalg.norm', 'numpy.cumsum')
    """
    module = getattr(func, "__module__", None) or "numpy"
    parts = [p for p in module.split(".") if not p.startswith("_")]
    return ".".join([*parts, getattr(func, "__name__", repr(func))])


def closest(name: str, candidates: list[str], count: int = SUGGESTED) -> list[str]:
    """The ``count`` names of ``candidates`` closest to ``name`` (compared by their last
    part, so ``numpy.linalg.svd`` finds ``numpy.svdvals``)."""
    short = {c: c.rsplit(".", 1)[-1] for c in candidates}
    tail = name.rsplit(".", 1)[-1]
    by_tail = difflib.get_close_matches(tail, list(short.values()), n=count, cutoff=0.5)
    found = [c for t in by_tail for c in candidates if short[c] == t]
    return list(dict.fromkeys(found))[:count]


def unsupported_function(name: str, hint: str, supported: list[str]) -> str:
    """The error for a NumPy function ``jit`` lacks: ``hint`` (what to write instead),
    else the closest of the ``supported`` functions (their public names)."""
    return f"{name} is not supported by nbyoc.jit; {hint or _instead(name, 'functions', supported)}"


def unsupported_ufunc(name: str, hint: str, supported: list[str]) -> str:
    """The error for a ufunc (or ufunc method) without an nbyoc op: ``hint``, else the
    closest of the ``supported`` ufuncs (``exp``, ``add.reduce``)."""
    return f"{name} has no nbyoc op yet; {hint or _instead(name, 'ufuncs', supported)}"


def _instead(name: str, kind: str, names: list[str]) -> str:
    prefix = "numpy." if kind == "ufuncs" else ""
    near = [f"{prefix}{n}" for n in closest(name.removeprefix("numpy."), names)]
    if not near:
        return f"none of the {kind} it supports is close ({LISTING})"
    return f"the closest it supports: {', '.join(near)} ({LISTING})"
