"""The user corpus (tests/frontend/user_corpus.py) against NumPy: each function as
written, or, where its record says nbyoc refuses it, that refusal and the rewrite that
runs; values, dtypes and structure (dicts and named tuples too) on two signatures.

By default llvm runs every case and csource and examplejson a slice (QUICK); with
--run-slow every backend runs every case.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocError

from .test_numpy_jit import assert_like_numpy
from .user_corpus import CASES

BACKENDS = ["llvm", "csource", "examplejson"]
#: The cases every backend runs by default: a scan, a sort, a pytree result, a
#: fixed-count loop, integer labels, a concatenation, a matmul and a refusal's rewrite.
QUICK = {"moving_average", "ranks", "summary_features", "moments", "harmonic_oscillator",
         "top1_accuracy", "pre_emphasis", "dft_magnitude", "ewma"}  # fmt: skip


def assert_same_tree(got, expected, name: str) -> None:
    """``assert_like_numpy`` through dicts (same keys, in order) and named tuples."""
    if isinstance(expected, dict):
        assert type(got) is dict and list(got) == list(expected), (name, got)
        for key in expected:
            assert_same_tree(got[key], expected[key], f"{name}[{key!r}]")
        return
    if isinstance(expected, tuple) and hasattr(expected, "_fields"):
        assert type(got) is type(expected), (name, type(got))
        for field in expected._fields:
            assert_same_tree(getattr(got, field), getattr(expected, field), f"{name}.{field}")
        return
    assert_like_numpy(got, expected, name)


def cases() -> list:
    return [
        pytest.param(name, backend, marks=() if backend == "llvm" or name in QUICK
                     else pytest.mark.slow, id=f"{name}-{backend}")
        for name in CASES
        for backend in BACKENDS
    ]  # fmt: skip


@pytest.mark.parametrize("name,backend", cases())
def test_the_user_corpus_runs_as_recorded(name, backend):
    case = CASES[name]
    runs = case.function
    if case.refused is not None:
        jitted = nbyoc.jit(case.function, backend=backend, static_argnames=case.static)
        with pytest.raises(NbyocError) as refusal:
            jitted(*case.first())
        assert str(refusal.value).startswith(case.refused), str(refusal.value)
        if case.rewrite is None:
            return
        runs = case.rewrite
    jitted = nbyoc.jit(runs, backend=backend, static_argnames=case.static)
    for make in (case.first, case.second):
        assert_same_tree(jitted(*make()), case.function(*make()), name)
    assert len(jitted.signatures) == 2, jitted.signatures


def test_the_user_corpus_is_forty_functions_or_more_of_five_kinds():
    assert len(CASES) >= 40
    kinds = {case.kind for case in CASES.values()}
    assert kinds == {"statistics", "signal", "physics", "losses", "features"}
    # (a refusal always has a rewrite, but for random draws: they belong outside)
    without = {n for n, c in CASES.items() if c.refused is not None and c.rewrite is None}
    assert without == {"noisy_positions"}


def test_the_user_corpus_counts():
    """How many of the corpus run as written (the README's and the note's count)."""
    written = sum(c.refused is None for c in CASES.values())
    assert (written, len(CASES)) == (47, 51)
    assert np.isfinite(written / len(CASES))
