"""The examplejson interpreter's cost per node at 10x10: chains of 1 to 8 nodes.

``python bench/report.py`` fits the per-node time (the slope) and the fixed cost
of a call (the intercept). The reference graph at 10x10, 1024x1024 and
4096x4096 is in test_reference_graph.py with the other backends.
"""

import numpy as np
import pytest

import nbyoc

CHAINS = [1, 2, 4, 8]


@pytest.mark.parametrize("nodes", CHAINS)
def test_chain(benchmark, nodes):
    benchmark.group = "examplejson chain 10x10"
    x = nbyoc.var("x", (10, 10))
    y = x
    for _ in range(nodes):
        y = y + x
    fn = nbyoc.compile(nbyoc.function([x], y), backend="examplejson")
    data = np.ones((10, 10), np.float32)
    assert float(fn(data)[0, 0]) == nodes + 1
    benchmark(fn, data)
