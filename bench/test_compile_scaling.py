"""Compile time against graph size: every backend, cold and warm, on three families
of graphs (``scaling_graphs``: a chain, a diamond-rich DAG, repeated residual MLP
blocks) from about 10 to 1000 nodes.

Each measurement is a fresh process (``bench/probe.py scaling``): cold with an empty
cache directory, warm with the cache the cold run left. ``extra_info`` holds the
compile time, the regions and the distinct llvm kernel modules the process compiled or
loaded; ``bench/report.py`` tabulates them, fits the growth exponent and draws the
plot. ``--scaling-nodes`` picks the sizes, ``--scaling-families`` the families.
"""

from __future__ import annotations

import pytest
from probe import run_probe

import nbyoc

BACKENDS = list(nbyoc.codegen.registered_backends())


def pytest_generate_tests(metafunc):
    if "nodes" in metafunc.fixturenames:
        sizes = metafunc.config.getoption("--scaling-nodes")
        metafunc.parametrize("nodes", sizes)
    if "family" in metafunc.fixturenames:
        metafunc.parametrize("family", metafunc.config.getoption("--scaling-families"))


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    """One cache directory per (family, backend, nodes): cold fills it, warm reuses it."""
    return {}


@pytest.mark.parametrize("phase", ["cold", "warm"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_scaling(benchmark, family, backend, nodes, phase, caches, tmp_path_factory):
    benchmark.group = f"compile scaling: {family}"
    key = (family, backend, nodes)
    if phase == "cold" or key not in caches:
        caches[key] = tmp_path_factory.mktemp("scaling")
        if phase == "warm":
            run_probe("scaling", backend, nodes, caches[key], family)  # fills the cache
    reports = []
    benchmark.pedantic(
        lambda: reports.append(run_probe("scaling", backend, nodes, caches[key], family)),
        rounds=1,
    )
    benchmark.extra_info.update(kind="scaling", family=family, case=backend, phase=phase)
    benchmark.extra_info.update(reports[0])
