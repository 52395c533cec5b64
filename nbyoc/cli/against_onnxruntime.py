"""``nbyoc run --check``: the model run on ONNX Runtime on the same inputs, and each of
nbyoc's outputs held against Runtime's.

The criterion is relative to each output's magnitude: a float output passes when every
element lies within ``TOLERANCE`` (1e-3) of the output's largest magnitude of Runtime's
(NaN where Runtime has NaN, the same infinities); an integer or bool output when it is
equal. The fraction is that of ``tests/real_models.py`` (``TRUTH_AGREES``): float32
rounding through the real-model set leaves nbyoc and Runtime within 1e-5 of each
output's largest magnitude, where an op computed wrongly is off by a sizeable fraction
of it. A float dtype narrower than float32 gets 32 of its ulps where that is more
(float16: 3%), its rounding being that much coarser. ``--tolerance`` sets the fraction.

Why not the forward error bound that ``Executable.verify`` holds each region to
(``runtime.tolerance``): it is a worst case, and over a whole model it compounds layer
by layer; on the real-model set it allows 0.16 of the output's magnitude for a three-
layer MLP head and 1e25 of it for a MobileNet, or marks every element uncertain after a
``where`` (a leaky ReLU): no check at all. Nor the float64 "truth" of the tests'
criterion, which needs a widened copy of the model and a float64 run of it: a user's
model need not widen (its casts and its quantised ops fix their dtypes).

Runtime runs its default session on the CPU, as a user runs it (its graph optimisations
move results by about 1e-6 of their magnitude, far inside the criterion; nbyoc's default
``qdq="integer"`` import computes a quantised model's products as that session does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import MissingDependencyError, NbyocError

INSTALL = "pip install onnxruntime"
#: The largest difference allowed, as a fraction of the output's largest magnitude.
TOLERANCE = 1e-3
#: ulps of a narrow float dtype allowed where they are more than ``TOLERANCE``.
NARROW_ULPS = 32


def require_onnxruntime() -> Any:
    """The ``onnxruntime`` module, or an error saying what to install."""
    try:
        import onnxruntime
    except ImportError:
        raise MissingDependencyError(f"--check runs ONNX Runtime: {INSTALL}") from None
    return onnxruntime


def runtime_name() -> str:
    return f"ONNX Runtime {require_onnxruntime().__version__}"


def onnxruntime_outputs(path: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of the model at ``path`` on ``feeds`` (graph input name -> array),
    computed by ONNX Runtime's default session on the CPU."""
    ort = require_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 3  # (errors only: its warnings are not ours to print)
    try:
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        return [np.asarray(v) for v in session.run(None, feeds)]
    except Exception as e:  # (Runtime's own exception types, with multi-line messages)
        message = " ".join(str(e).split())
        raise NbyocError(f"ONNX Runtime could not run the model: {message}") from None


@dataclass(frozen=True)
class OutputComparison:
    """One output, nbyoc's against Runtime's: the largest absolute difference and the
    largest relative one (to Runtime's value), the difference allowed (``tolerance``,
    the same for every element), and how many of its elements lie beyond it; ``error``
    says why nothing was compared (shapes or dtypes differ)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs_diff: float
    max_rel_diff: float
    tolerance: float
    beyond: int
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.beyond == 0


def allowed_fraction(dtype: np.dtype, fraction: float = TOLERANCE) -> float:
    """The fraction of an output's largest magnitude its elements may differ by.

    >>> allowed_fraction(np.dtype("float32")), allowed_fraction(np.dtype("float16"))
    (0.001, 0.03125)
    """
    eps = float(ml_dtypes.finfo(dtype).eps)
    return max(fraction, NARROW_ULPS * eps) if eps > 2**-23 else fraction


def compare(name: str, mine: np.ndarray, theirs: np.ndarray,
            fraction: float = TOLERANCE) -> OutputComparison:  # fmt: skip
    """nbyoc's output ``mine`` against Runtime's ``theirs``, as the module says.

    >>> row = compare("y", np.array([1.0, 2.0005]), np.array([1.0, 2.0]))
    >>> row.ok, row.tolerance, row.beyond
    (True, 0.002, 0)
    >>> compare("n", np.array([1, 3]), np.array([1, 2])).beyond
    1
    """
    if mine.shape != theirs.shape or mine.dtype != theirs.dtype:
        differs = f"nbyoc gives {mine.dtype} {mine.shape}, Runtime {theirs.dtype} {theirs.shape}"
        return OutputComparison(name, str(mine.dtype), mine.shape, np.inf, np.inf, 0.0, 0, differs)
    is_float = np.issubdtype(theirs.dtype, np.floating) or theirs.dtype.kind == "V"
    g, e = mine.astype(np.float64), theirs.astype(np.float64)
    with np.errstate(all="ignore"):
        same = (g == e) | (np.isnan(g) & np.isnan(e))
        diff = np.where(same, 0.0, np.abs(g - e))
        diff = np.where(np.isnan(diff), np.inf, diff)  # (NaN on one side only)
        relative = np.where(diff == 0, 0.0, diff / np.maximum(np.abs(e), np.finfo(np.float64).tiny))
    finite = np.abs(e[np.isfinite(e)])
    scale = float(finite.max()) if finite.size else 0.0
    tolerance = allowed_fraction(theirs.dtype, fraction) * scale if is_float else 0.0
    return OutputComparison(
        name, str(mine.dtype), mine.shape, float(diff.max(initial=0.0)),
        float(relative.max(initial=0.0)), tolerance, int((diff > tolerance).sum()),
    )  # fmt: skip
