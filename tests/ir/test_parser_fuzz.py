"""Fuzzing ``nbyoc.parse`` (issue 35): mutated texts of real graphs and modules are
read, printed and serialised; only ``NbyocError`` may escape, and each case ends within
its time and memory budget (``tests/fuzzing.py``). A deeper run is marked slow."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc

from .. import fuzzing
from ..fuzz_seeds import deep_tuple_texts, graphs, modules
from ..helpers import examples
from ..mutations import mutate_bytes, mutate_tokens, mutations
from ..strategies import graphs as random_graphs

NAMES = [*nbyoc.ir.list_ops(), *nbyoc.DTYPES, "fn", "def", "const", "Tensor", "dtype",
         "base64", "shape", "attrs", "True", "None", "%x", "%0", "@main", "@llvm_0"]  # fmt: skip


def seeds() -> list[tuple[str, bytes]]:
    texts = [(name, str(f)) for name, f in graphs()]
    texts += [(f"{name} module", str(m)) for name, m in modules()]
    found = [(name, text.encode()) for name, text in texts]
    return found + deep_tuple_texts()


def _mutate(rng: random.Random, data: bytes):
    return mutate_tokens(rng, data, NAMES) if rng.random() < 0.8 else mutate_bytes(rng, data)


def cases(slow: bool) -> dict[str, list]:
    rng = random.Random(35)
    return {"parse": mutations(rng, seeds(), 3000 if slow else 500, _mutate)}


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mutated_texts_raise_only_nbyoc_errors_within_budget(slow, tmp_path):
    fuzzing.assert_no_failures(cases(slow), tmp_path)


@settings(max_examples=examples(60), deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs(), st.randoms(use_true_random=False))
def test_mutated_texts_of_random_graphs_raise_only_nbyoc_errors(f, rng):
    # In this process, so that hypothesis can shrink what it finds.
    (_, data), *_ = mutations(rng, [("graph", str(f).encode())], 1, _mutate)[1:]
    fuzzing.check_in_process(fuzzing.read_parse, data)
