"""``Executable.verify``: every external function run on its real inputs next to the host
executor, each output compared element by element against a tolerance.

A call of the executable runs as usual, each external function's inputs and outputs
recorded; each function is then run on the host executor (``HostFunction``) on those
same inputs. So each region is judged on its own: an error an earlier region made is
in both sides' inputs. The tolerance of each element is the forward error bound of the
region's computation on those inputs (``runtime.tolerance``, ``unknown=ESTIMATE``): it
grows with the dtype's epsilon, the magnitudes, the depth and the conditioning of each
op; integers and booleans are exact, NaN must be NaN on both sides, and an element
whose value depends on a comparison or rounding that its inputs' bounds may flip is
skipped. ``rtol`` and ``atol`` widen it (``atol + rtol * |host|``) for a backend whose
accuracy is looser by design. A region that fails is bisected (``runtime.bisect``) to
the first op whose value diverges.

The external functions of ``main`` are verified; those of a control-flow op's body
(compiled for its own executable) are not.

>>> import numpy as np, nbyoc
>>> a = nbyoc.var("a", (3,))
>>> fn = nbyoc.compile(nbyoc.function([a], nbyoc.exp(a) * a), backend="examplejson")
>>> report = fn.verify(np.arange(3, dtype=np.float32))
>>> report.ok, [(row.symbol, row.beyond, row.checked) for row in report.rows]
(True, [('examplejson_0', 0, 3)])
"""

from __future__ import annotations

import numpy as np

from ..ir.dtypes import dtype_info
from ..ir.nodes import Function
from ..ir.types import tensor_types
from .host import HostFunction
from .tolerance import ESTIMATE, beyond, error_bounds
from .verify_report import OutputCheck, VerificationReport


def verify_executable(executable, arrays, *, bisect: bool = True, rtol: float = 0.0,
                      atol: float = 0.0) -> VerificationReport:  # fmt: skip
    """Verify ``executable`` (of fixed shapes) on ``arrays`` (checked arguments)."""
    calls = capture(executable, arrays)
    report = VerificationReport()
    for symbol, (inputs, outputs) in calls.items():
        func = executable.module[symbol]
        rows = compare(func, inputs, outputs, rtol, atol)
        report.rows += rows
        if bisect and not all(row.ok for row in rows):
            from .bisect import bisect_region

            raised = isinstance(outputs, BaseException)
            divergence = bisect_region(func, inputs, executable.options, rtol, atol, raised)
            report.divergences.append(divergence)
    return report


def capture(executable, arrays) -> dict:
    """Run ``executable`` on ``arrays``, recording each external function's call: symbol
    -> (inputs, outputs), copies; outputs is the exception when it raised (the call then
    goes on with the host's results)."""
    calls: dict = {}

    def recording(name, run):
        func = executable.module[name]

        def record(*inputs):
            copies = [np.array(a, copy=True) for a in inputs]
            try:
                result = run(*inputs)
            except Exception as error:
                calls[name] = (copies, error)
                return HostFunction(func)(*inputs)
            calls[name] = (copies, [np.array(v, copy=True) for v in _flat(result)])
            return result

        return record

    with np.errstate(all="ignore"):
        executable._run_plan(executable._host_plan(recording), arrays)
    return calls


def compare(func: Function, inputs, outputs, rtol: float = 0.0, atol: float = 0.0):
    """One ``OutputCheck`` per output of external function ``func``: ``outputs`` (its
    backend's, or the exception it raised) against the host's on ``inputs``."""
    symbol, backend = func.attrs["global_symbol"], func.attrs.get("Compiler", "host")
    types = tensor_types(func.ret_type)
    if isinstance(outputs, BaseException):
        error = f"{type(outputs).__name__}: {outputs}"
        return [OutputCheck(symbol, backend, k, t.dtype, tuple(t.shape), np.inf, np.inf, 0.0,
                            0, 0, 0, error) for k, t in enumerate(types)]  # fmt: skip
    with np.errstate(all="ignore"):
        expected = list(_flat(HostFunction(func)(*inputs)))
        bounds = error_bounds(func, inputs, unknown=ESTIMATE)
    rows = []
    for k, (got, want, bound) in enumerate(zip(outputs, expected, bounds)):
        want = np.asarray(want)
        rows.append(check_output(symbol, backend, k, got, want, widen(bound, want, rtol, atol)))
    return rows


def widen(bound, expected, rtol: float, atol: float) -> np.ndarray:
    """``bound`` plus ``atol + rtol * |expected|`` for a float result (uncertain stays so)."""
    bound = np.broadcast_to(bound, expected.shape)
    if not (rtol or atol) or not dtype_info(expected.dtype).is_float:
        return bound
    with np.errstate(all="ignore"):
        extra = atol + rtol * np.abs(expected.astype(np.float64))
    return bound + np.where(np.isfinite(extra), extra, 0)


def check_output(symbol, backend, k, got, expected, bound) -> OutputCheck:
    """One output's row: its largest errors, the tolerance where the error is largest,
    and how many elements lie beyond theirs."""
    checked = np.isfinite(bound)
    bad = beyond(got, expected, bound)
    g = got.astype(np.float64)[checked]
    e = expected.astype(np.float64)[checked]
    with np.errstate(all="ignore"):
        error = np.where((g == e) | (np.isnan(g) & np.isnan(e)), 0.0, np.abs(g - e))
        error = np.where(np.isnan(error), np.inf, error)  # NaN on one side only
        scale = np.maximum(np.abs(e), _tiny(expected.dtype))
        relative = np.where(error == 0, 0.0, error / scale)
    worst = int(np.argmax(error)) if error.size else 0
    return OutputCheck(
        symbol, backend, k, str(expected.dtype), tuple(expected.shape),
        float(error.max(initial=0.0)), float(np.nan_to_num(relative, nan=np.inf).max(initial=0.0)),
        float(bound[checked][worst]) if error.size else 0.0,
        int(bad.sum()), int(checked.sum()), int(expected.size - checked.sum()),
    )  # fmt: skip


def _tiny(dtype) -> float:
    """The smallest normal number of a float dtype (relative errors of zeros)."""
    info = dtype_info(dtype)
    if not info.is_float:
        return 1.0
    import ml_dtypes

    return float(ml_dtypes.finfo(info.numpy).tiny)


def _flat(result):
    """A function's result as a list of arrays (nested tuples flattened)."""
    if isinstance(result, tuple):
        return [a for field in result for a in _flat(field)]
    return [result]
