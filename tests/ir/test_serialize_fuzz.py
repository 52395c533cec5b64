"""Fuzzing ``nbyoc.from_json`` (issue 35): mutated JSON of real graphs and modules (values
replaced by extreme numbers, long or non-ASCII strings, wrong types, deep nesting; keys
dropped; bytes changed) is read, printed and serialised again; only ``NbyocError`` may
escape, and each case ends within its time and memory budget (``tests/fuzzing.py``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc

from .. import fuzzing
from ..fuzz_seeds import deep_tuple_documents, graphs, modules
from ..helpers import examples
from ..mutations import mutate_bytes, mutate_json, mutations
from ..strategies import graphs as random_graphs


def seeds() -> list[tuple[str, bytes]]:
    docs = [(name, nbyoc.to_json(f)) for name, f in graphs()]
    docs += [(f"{name} module", nbyoc.to_json(m)) for name, m in modules()]
    found = [(name, text.encode()) for name, text in docs]
    return found + deep_tuple_documents()


def _mutate(rng: random.Random, data: bytes):
    return mutate_json(rng, data) if rng.random() < 0.85 else mutate_bytes(rng, data)


def cases(slow: bool) -> dict[str, list]:
    rng = random.Random(35)
    return {"from_json": mutations(rng, seeds(), 3000 if slow else 500, _mutate)}


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mutated_json_raises_only_nbyoc_errors_within_budget(slow, tmp_path):
    fuzzing.assert_no_failures(cases(slow), tmp_path)


@settings(max_examples=examples(60), deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(), st.randoms(use_true_random=False))
def test_mutated_json_of_random_graphs_raises_only_nbyoc_errors(f, rng):
    # In this process, so that hypothesis can shrink what it finds.
    (_, data), *_ = mutations(rng, [("graph", nbyoc.to_json(f).encode())], 1, _mutate)[1:]
    fuzzing.check_in_process(fuzzing.read_from_json, data)
