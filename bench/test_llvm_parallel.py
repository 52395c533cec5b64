"""Where parallel kernels start to pay: the reference graph at growing sizes,
compiled serial (threshold above the size) and parallel (threshold 1).

The llvm backend's ``PARALLEL_THRESHOLD`` comes from this crossover.
"""

import numpy as np
import pytest

import nbyoc
from nbyoc.demo import reference_graph

SIZES = [1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20]


@pytest.mark.parametrize("elements", SIZES)
@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_reference_graph(benchmark, elements, mode):
    benchmark.group = f"llvm {elements} elements"
    threshold = 1 if mode == "parallel" else elements + 1
    options = {"llvm": {"parallel_threshold": threshold}}
    fn = nbyoc.compile(reference_graph((elements,)), backend="llvm", options=options)
    args = [np.random.default_rng(k).standard_normal(elements).astype(np.float32) for k in range(4)]
    benchmark(fn, *args)
