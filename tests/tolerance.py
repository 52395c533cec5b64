"""The tests' tolerance: the forward error bound of ``nbyoc.runtime.tolerance`` (moved
there from here, for ``Executable.verify``), and an assertion on it."""

import numpy as np

from nbyoc.runtime.tolerance import beyond, error_bounds

__all__ = ["assert_within", "error_bounds"]


def assert_within(got, expected, bound, what: str) -> None:
    """``got`` equals ``expected`` where ``bound`` is 0 and lies within it where it is
    finite (NaN where NaN, the same infinities); uncertain elements are skipped."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape), what
    bad = beyond(got, expected, bound)
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} element(s) beyond their bound, e.g. got {got[bad][:3]}, "
        f"expected {expected[bad][:3]}, bound {np.broadcast_to(bound, bad.shape)[bad][:3]}"
    )
