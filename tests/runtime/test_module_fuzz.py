"""Fuzzing ``nbyoc.load_module`` (issue 35): mutated saved runtime modules of real graphs
(ExampleJSON texts; the JSON the llvm and csource modules save) are loaded and their
functions fetched; only ``NbyocError`` may escape, and each case ends within its time and
memory budget (``tests/fuzzing.py``). Cases that load compile kernels, so the default
run reads ExampleJSON only; the slow run adds llvm and csource."""

from __future__ import annotations

import random

import pytest

import nbyoc
from nbyoc.runtime.module import save_function

from .. import fuzzing
from ..codegen.test_examplejson_fuzz import NAMES
from ..codegen.test_examplejson_fuzz import seeds as examplejson_seeds
from ..fuzz_seeds import graphs
from ..mutations import mutate_bytes, mutate_json, mutate_tokens, mutations

#: A case that loads compiles its kernels: a few seconds on a busy machine.
BUDGET = fuzzing.Budget(seconds=60.0)
OPTIONS = {"llvm": {"fuse": True, "parallel_threshold": 1 << 15},
           "csource": {"fused": True, "native": False}}  # fmt: skip


def saved_seeds(type_key: str) -> list[tuple[str, bytes]]:
    """Each graph's first external function, saved as a ``type_key`` module saves it."""
    found = []
    for name, f in graphs():
        module = nbyoc.partition(f, type_key)
        external = [g for g in module.functions.values() if "Compiler" in g.attrs]
        if external:  # (a backend may take none of a graph's ops)
            found.append((name, save_function(type_key, 1, external[0], OPTIONS[type_key])))
    return found


def _text_mutation(rng: random.Random, data: bytes):
    return mutate_tokens(rng, data, NAMES) if rng.random() < 0.8 else mutate_bytes(rng, data)


def _json_mutation(rng: random.Random, data: bytes):
    return mutate_json(rng, data) if rng.random() < 0.85 else mutate_bytes(rng, data)


def cases(slow: bool) -> dict[str, list]:
    rng = random.Random(35)
    # Loading compiles each op's kernel once: the default run keeps to the reference
    # graph's three ops (and those a mutation names).
    text = examplejson_seeds() if slow else examplejson_seeds()[:1]
    found = {"load_module:examplejson": mutations(rng, text, 600 if slow else 60, _text_mutation)}
    if slow:
        for key in ("llvm", "csource"):
            found[f"load_module:{key}"] = mutations(rng, saved_seeds(key), 150, _json_mutation)
    return found


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mutated_modules_raise_only_nbyoc_errors_within_budget(slow, tmp_path):
    fuzzing.assert_no_failures(cases(slow), tmp_path, BUDGET)
