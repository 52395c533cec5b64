"""Arrays to call a function with, and the exact comparison of two results.

Values are small (floats in [-2, 2), signed integers in [-5, 5], unsigned ones in
[0, 5], bools 0 and 1), so that sums and products of a few of them fit every dtype.

>>> import nbyoc
>>> x, n = nbyoc.var("x", (2, 3)), nbyoc.var("n", (4,), "uint8")
>>> a, b = random_inputs(nbyoc.function([x, n], [x, n]))
>>> a.shape, a.dtype.name, bool((b <= 5).all())
((2, 3), 'float32', True)
"""

from __future__ import annotations

import numpy as np

from ..errors import NbyocError


def random_inputs(func, seed: int = 0) -> list[np.ndarray]:
    """Arrays for ``func``'s parameters: small values, so nothing overflows. Every
    parameter needs a fixed shape (bind symbolic sizes first: ``nbyoc.ir.specialize``)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for p in func.params:
        t = p.type
        if t.symbols:
            raise NbyocError(
                f"parameter %{p.name_hint} has the symbolic shape {t.shape}; give its sizes "
                f"first (from_onnx(..., shapes=...), or a function of fixed shapes)"
            )
        kind = np.dtype(t.dtype).kind
        if kind in "biu":  # bool: 0 and 1; unsigned: 0 to 5
            low, high = {"b": (0, 2), "u": (0, 6)}.get(kind, (-5, 6))
            arrays.append(rng.integers(low, high, size=t.shape).astype(t.dtype))
        else:
            arrays.append(rng.uniform(-2, 2, size=t.shape).astype(t.dtype))
    return arrays


def assert_same_results(actual, expected) -> None:
    """Outputs agree in structure, dtype, shape and value (NaNs equal).

    >>> assert_same_results((np.zeros(2),), (np.zeros(2),))
    >>> assert_same_results(np.zeros(2), np.ones(2))
    Traceback (most recent call last):
        ...
    AssertionError: ...
    """
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same_results(a, e)
        return
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind == "V":
        # (NumPy's NaN-equal comparison knows only its own floats: bfloat16 and the narrow
        # dtypes compare exactly as float32, every one of their values being one)
        actual, expected = actual.astype(np.float32), expected.astype(np.float32)
    np.testing.assert_array_equal(actual, expected)
