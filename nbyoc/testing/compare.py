"""Whether a backend's result for a function agrees with the host's: in structure, dtype
and shape exactly, and in value within the forward error bound of the computation
(``nbyoc.runtime.tolerance``, estimated for an op the model lacks, as ``fn.verify``
bounds it), and at least ``FALLBACK_ULPS`` ulps of the dtype at the value's magnitude
plus one. Integers and bools are exact; NaN matches NaN; elements whose result may
jump (a comparison of values within their bounds) are not compared.

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
from ..runtime.tolerance import ESTIMATE, beyond, error_bounds

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
    with np.errstate(all="ignore"):
        bounds = error_bounds(func, args, unknown=ESTIMATE)

    def output(k, g, e):
        bound = bounds[k]
        if dtype_info(e.dtype).is_float:
            floor = FALLBACK_ULPS * float(ml_dtypes.finfo(dtype_info(e.dtype).numpy).eps)
            with np.errstate(all="ignore"):
                least = floor * (np.abs(e.astype(np.float64)) + 1)
            bound = np.where(np.isfinite(bound), np.maximum(bound, least), np.inf)
        return elements_beyond(k, g, e, bound)

    return outputs_difference(got, expected, output)


def outputs_difference(got, expected, output) -> Difference | None:
    """Outputs ``got`` against ``expected`` (an array or a tuple of them, alike): their
    count, dtypes and shapes, then ``output(k, got_k, expected_k)`` for each, which
    returns the ``Difference`` of its values or None; all of them as one."""
    if not isinstance(expected, tuple):
        got, expected = (got,) if not isinstance(got, tuple) else got, (expected,)
    if not isinstance(got, tuple) or len(got) != len(expected):
        return Difference(float("nan"), 0, f"{len(expected)} output(s) expected, got {got!r}")
    found = []
    for k, (g, e) in enumerate(zip(got, expected)):
        g, e = np.asarray(g), np.asarray(e)
        if (g.dtype, g.shape) != (e.dtype, e.shape):
            return Difference(
                float("nan"), 0,
                f"output {k}: {g.dtype}{list(g.shape)}, expected {e.dtype}{list(e.shape)}",
            )  # fmt: skip
        found.append(output(k, g, e))
    found = [d for d in found if d is not None]
    if not found:
        return None
    message = "; ".join(d.message for d in found)
    return Difference(max(d.worst for d in found), sum(d.elements for d in found), message)


def elements_beyond(k: int, got, expected, allowed, what: str = "their bound"):
    """The ``Difference`` of output ``k``'s elements farther from ``expected`` than
    ``allowed`` (each element's tolerance; ``inf``: not compared; integers and bools
    exactly wherever it is finite), NaN matching NaN; None when none is
    (``nbyoc.runtime.tolerance.beyond``)."""
    bad = beyond(got, expected, np.broadcast_to(allowed, expected.shape))
    if not bad.any():
        return None
    with np.errstate(all="ignore"):
        error = np.abs(got.astype(np.float64) - expected.astype(np.float64))[bad]
    error = np.where(np.isnan(error), np.inf, error)
    if not dtype_info(expected.dtype).is_float:
        error = np.maximum(error, 1.0)  # (int64 past 2**53 differs by less in float64)
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return Difference(
        float(error.max()),
        int(bad.sum()),
        f"output {k}: {int(bad.sum())} element(s) beyond {what}, e.g. at {where} got "
        f"{_value(got[where])}, expected {_value(expected[where])}",
    )


def _value(x) -> str:
    """An element as a number (bfloat16's too)."""
    x = np.asarray(x)
    return repr((x.astype(np.float64) if dtype_info(x.dtype).is_float else x).item())
