"""Shared pieces of the benchmarks: inputs of the reference graph at each size."""

import numpy as np
import pytest

SIZES = [10, 1024, 4096]


@pytest.fixture(params=SIZES, ids=lambda n: f"{n}x{n}")
def reference_inputs(request):
    rng = np.random.default_rng(0)
    n = request.param
    return n, [rng.standard_normal((n, n)).astype(np.float32) for _ in range(4)]
