"""Whether a backend's result for a function agrees with the host's: in structure, dtype
and shape exactly, and in value within the forward error bound of the computation
(``nbyoc.runtime.tolerance``, estimated for an op the model lacks, as ``fn.verify``
bounds it), and at least ``FALLBACK_ULPS`` ulps of the dtype at the value's magnitude
plus one.
Integers and bools are exact; NaN matches NaN; elements whose result may jump (a
comparison of values within their bounds) are not compared.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (3,))
>>> f = nbyoc.function([x], nbyoc.exp(x))
>>> args = [np.array([0.0, 1.0, 2.0], np.float32)]
>>> expected = np.exp(args[0])
>>> difference(f, args, expected * (1 + 1e-7), expected)
>>> difference(f, args, expected + np.array([0, 0, 0.5], np.float32), expected)
Difference(worst=0.5, elements=1, message='output 0: 1 element(s) beyond their bound, ...')
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..ir.dtypes import dtype_info
from ..runtime.tolerance import ESTIMATE, error_bounds

#: The least tolerance of a float result, in ulps of its dtype times its magnitude plus
#: one (a floor under an estimated bound: a tiny result of a sum that cancels).
FALLBACK_ULPS = 16


@dataclass(frozen=True)
class Difference:
    """How a result differs from the host's: the largest absolute difference among the
    elements beyond their bound (``inf`` for NaN against a number; ``nan`` when the
    structure, dtype or shape differs; None when it raised), how many elements, and what
    differs."""

    worst: float | None
    elements: int
    message: str


def difference(func, args, got, expected) -> Difference | None:
    """None when ``got`` (a backend's ``func(*args)``) agrees with ``expected`` (the
    host's), else the ``Difference``."""
    if not isinstance(expected, tuple):
        got, expected = (got,) if not isinstance(got, tuple) else got, (expected,)
    if not isinstance(got, tuple) or len(got) != len(expected):
        return Difference(float("nan"), 0, f"{len(expected)} output(s) expected, got {got!r}")
    with np.errstate(all="ignore"):
        bounds = error_bounds(func, args, unknown=ESTIMATE)
    found = []
    for k, (g, e, bound) in enumerate(zip(got, expected, bounds)):
        g, e = np.asarray(g), np.asarray(e)
        if (g.dtype, g.shape) != (e.dtype, e.shape):
            return Difference(
                float("nan"), 0,
                f"output {k}: {g.dtype}{list(g.shape)}, expected {e.dtype}{list(e.shape)}",
            )  # fmt: skip
        found.append(_beyond(k, g, e, bound))
    found = [d for d in found if d is not None]
    if not found:
        return None
    worst = max(found, key=lambda d: d.worst)
    message = "; ".join(d.message for d in found)
    return Difference(worst.worst, sum(d.elements for d in found), message)


def _beyond(k: int, got, expected, bound) -> Difference | None:
    checked = np.isfinite(bound)
    exact_g, exact_e = got[checked], expected[checked]
    g, e = exact_g.astype(np.float64), exact_e.astype(np.float64)  # (bfloat16 exactly too)
    with np.errstate(all="ignore"):
        error = np.abs(g - e)
        info = dtype_info(expected.dtype)
        if info.is_float:
            eps = float(ml_dtypes.finfo(info.numpy).eps)
            allowed = np.maximum(bound[checked], FALLBACK_ULPS * eps * (np.abs(e) + 1))
            bad = ~((g == e) | (np.isnan(g) & np.isnan(e)) | (error <= allowed))
        else:  # (compared as they are: int64 past 2**53 is not exact in float64)
            bad = exact_g != exact_e
            error = np.maximum(error, 1.0)
    if not bad.any():
        return None
    error = np.where(np.isnan(error), np.inf, error)[bad]
    where = tuple(int(i) for i in np.argwhere(checked)[np.flatnonzero(bad)[0]])
    return Difference(
        float(error.max()),
        int(bad.sum()),
        f"output {k}: {int(bad.sum())} element(s) beyond their bound, e.g. at {where} got "
        f"{_value(got[where])}, expected {_value(expected[where])}",
    )


def _value(x) -> str:
    """An element as a number (bfloat16's too)."""
    x = np.asarray(x)
    return repr((x.astype(np.float64) if dtype_info(x.dtype).is_float else x).item())
