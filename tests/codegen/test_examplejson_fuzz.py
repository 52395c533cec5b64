"""Fuzzing the ExampleJSON reader (issue 35): mutated ExampleJSON texts of real graphs'
external functions (tokens replaced by extreme numbers, other op names, non-ASCII data,
deep brackets; bytes changed) are parsed into functions and printed; only
``NbyocError`` may escape, and each case ends within its time and memory budget
(``tests/fuzzing.py``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.examplejson.format import GUIDE_NAMES, to_examplejson

from .. import fuzzing
from ..fuzz_seeds import graphs
from ..helpers import examples
from ..mutations import mutate_bytes, mutate_tokens, mutations
from ..strategies import graphs as random_graphs

NAMES = [*nbyoc.ir.list_ops(), *GUIDE_NAMES.values(), *nbyoc.DTYPES, "input", "const",
         "output", "inputs:", "shape:", "dtype:", "data:", "axis:", "attr.shape:", "none",
         "subgraph_0", "AAAA", "AA==", "é=="]  # fmt: skip


def _examplejson_of(f: nbyoc.ir.Function) -> bytes:
    """``f``'s external functions for the examplejson backend, as one text."""
    module = nbyoc.partition(f, "examplejson")
    external = [g for g in module.functions.values() if "Compiler" in g.attrs]
    return "\n".join(to_examplejson(g) for g in external).encode()


def seeds() -> list[tuple[str, bytes]]:
    return [(name, _examplejson_of(f)) for name, f in graphs()]


def _mutate(rng: random.Random, data: bytes):
    return mutate_tokens(rng, data, NAMES) if rng.random() < 0.8 else mutate_bytes(rng, data)


def cases(slow: bool) -> dict[str, list]:
    rng = random.Random(35)
    return {"examplejson": mutations(rng, seeds(), 3000 if slow else 500, _mutate)}


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mutated_examplejson_raises_only_nbyoc_errors_within_budget(slow, tmp_path):
    fuzzing.assert_no_failures(cases(slow), tmp_path)


@settings(max_examples=examples(60), deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(), st.randoms(use_true_random=False))
def test_mutated_examplejson_of_random_graphs_raises_only_nbyoc_errors(f, rng):
    # In this process, so that hypothesis can shrink what it finds.
    (_, data), *_ = mutations(rng, [("graph", _examplejson_of(f))], 1, _mutate)[1:]
    fuzzing.check_in_process(fuzzing.read_examplejson, data)
