"""Where parallel kernels start to pay: the reference graph at growing sizes,
compiled serial (threshold above the size) and parallel (threshold 1).

The llvm backend's ``PARALLEL_THRESHOLD`` comes from this crossover.
"""

import numpy as np
import pytest

import nbyoc
from nbyoc.demo import reference_graph

SIZES = [1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("mode", ["serial", "parallel"])
def test_reference_graph(benchmark, size, mode):
    benchmark.group = f"llvm {size} elements"
    threshold = 1 if mode == "parallel" else size + 1
    options = {"llvm": {"parallel_threshold": threshold}}
    fn = nbyoc.compile(reference_graph((size,)), backend="llvm", options=options)
    args = [np.random.default_rng(k).standard_normal(size).astype(np.float32) for k in range(4)]
    benchmark(fn, *args)
