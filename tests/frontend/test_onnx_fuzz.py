"""Fuzzing ``nbyoc.from_onnx`` (issue 35): mutated real models (``models.py``), single-op
models whose values fold while importing, and ONNX's own node test cases (as they are
and with their inputs made initializers) are imported from bytes; only ``NbyocError``
may escape, and each case ends within its time and memory budget (``tests/fuzzing.py``;
the workers' limit on folded values is 16 MiB, so a bomb shows as memory)."""

from __future__ import annotations

import random

import pytest

from .. import fuzzing
from ..fuzz_seeds import onnx_models
from ..mutations import mutate_bytes, mutations
from .onnx_mutations import mutate_onnx, node_case_models, single_op_models


def seeds(slow: bool) -> list[tuple[str, bytes]]:
    # Making ONNX's node test cases takes 17 s: only the slow run mutates them.
    return onnx_models() + single_op_models() + (node_case_models(every=2) if slow else [])


def _mutate(rng: random.Random, data: bytes):
    return mutate_onnx(rng, data) if rng.random() < 0.9 else mutate_bytes(rng, data)


def cases(slow: bool) -> dict[str, list]:
    rng = random.Random(35)
    return {"from_onnx": mutations(rng, seeds(slow), 5000 if slow else 800, _mutate)}


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mutated_models_raise_only_nbyoc_errors_within_budget(slow, tmp_path):
    fuzzing.assert_no_failures(cases(slow), tmp_path)
