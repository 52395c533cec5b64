"""The user corpus (tests/frontend/user_corpus.py: 51 NumPy functions a data scientist
would write) timed three ways on its first signature's arguments: NumPy as written,
``nbyoc.jit`` (the function as written, or its recorded rewrite where nbyoc refuses it)
and ``numba.njit`` on the function as written (skipped where Numba does not compile
it: the count is part of the report). The arguments are the tests' small ones, so the
times are mostly each tool's cost per call.

Each benchmark's ``extra_info`` has kind "corpus", the function and the case.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numba
import numpy as np
import pytest

import nbyoc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.frontend.user_corpus import CASES

KINDS = ["numpy", "nbyoc.jit", "numba.njit"]
#: The functions timed: all but those nothing computes alike (random draws).
TIMED = [name for name, c in CASES.items() if c.refused is None or c.rewrite is not None]


def _runnable(name: str, case: str):
    """The function ``case`` times for corpus function ``name`` (None: not this way)."""
    corpus = CASES[name]
    if case == "numpy":
        return corpus.function
    if case == "nbyoc.jit":
        fn = corpus.function if corpus.refused is None else corpus.rewrite
        return None if fn is None else nbyoc.jit(fn, static_argnames=corpus.static)
    try:  # (Numba compiles at the first call: a refusal shows there)
        jitted = numba.njit(corpus.function)
        jitted(*corpus.first())
    except Exception:  # (any refusal of Numba's: it does not compile the function)
        return None
    return jitted


@pytest.mark.parametrize("case", KINDS)
@pytest.mark.parametrize("name", TIMED)
def test_corpus(benchmark, warm, name, case):
    fn = _runnable(name, case)
    if fn is None:
        pytest.skip(f"{name}: {case} does not run it as written")
    args = CASES[name].first()
    expected = CASES[name].function(*CASES[name].first())
    got = fn(*args)
    if isinstance(expected, np.ndarray | np.generic) and np.asarray(expected).dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, equal_nan=True)
    benchmark.group = f"corpus {name}"
    shape = "x".join(map(str, np.shape(args[0]))) or "1"  # (the first argument's)
    benchmark.extra_info.update(kind="corpus", graph=name, shape=shape, case=case)
    warm(fn, *args)
    benchmark(fn, *args)
