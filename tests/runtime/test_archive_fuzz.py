"""Fuzzing ``nbyoc.load`` (issue 35): mutated archives of real graphs (members' JSON,
``.npy`` headers and ExampleJSON changed; other compression methods; sizes that lie;
members of zeros that deflate a thousand times; a manifest naming one member 2,000 times;
bytes of the file changed) are loaded; only ``NbyocError`` may escape, and each case
ends within its time and memory budget (``tests/fuzzing.py``; the workers' limit on a
member is 64 MiB). The default run loads examplejson archives; the slow run adds llvm
and csource ones (each case that loads compiles its kernels)."""

from __future__ import annotations

import random

import pytest

import nbyoc

from .. import fuzzing
from ..fuzz_seeds import graphs
from ..mutations import mutations
from .archive_mutations import examplejson_archive, mutate_archive

#: A case that loads compiles its kernels: a few seconds on a busy machine.
BUDGET = fuzzing.Budget(seconds=60.0)


def seeds(slow: bool, directory) -> list[tuple[str, bytes]]:
    # Loading compiles each op's kernel once: the default run keeps to the reference
    # graph's three ops (and those a mutation names).
    found = []
    for name, f in graphs() if slow else graphs()[:1]:
        path = directory / f"{name}.nbyoc"
        examplejson_archive(f, path)
        found.append((f"{name} (examplejson)", path.read_bytes()))
    if slow:
        for backend in ("llvm", "csource"):
            for name, f in graphs()[:3]:
                path = directory / f"{name}-{backend}.nbyoc"
                nbyoc.compile(f, backend=backend).save(path)
                found.append((f"{name} ({backend})", path.read_bytes()))
    return found


def cases(slow: bool, directory=None) -> dict[str, list]:
    import pathlib
    import tempfile

    directory = pathlib.Path(directory or tempfile.mkdtemp(prefix="nbyoc-archives-"))
    rng = random.Random(35)
    return {"load": mutations(rng, seeds(slow, directory), 1000 if slow else 50, mutate_archive)}


@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mutated_archives_raise_only_nbyoc_errors_within_budget(slow, tmp_path):
    fuzzing.assert_no_failures(cases(slow, tmp_path), tmp_path / "failures", BUDGET)
