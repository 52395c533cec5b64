"""The reference graph ((a + b) - c) * d, float32: NumPy and each backend side by side.

Run with ``python -m pytest bench --benchmark-enable --benchmark-json=bench.json``
and summarise with ``python bench/report.py bench.json`` (ratios against NumPy).
"""

import numpy as np
import pytest

import nbyoc
from nbyoc.demo import numpy_reference, reference_graph

# (case id, backend, codegen options): every registered backend, plus variants.
CASES = [(name, name, None) for name in nbyoc.codegen.registered_backends()]
CASES.append(("csource-fused", "csource", {"csource": {"fused": True}}))


def test_numpy(benchmark, reference_inputs):
    n, args = reference_inputs
    benchmark.group = f"reference {n}x{n}"
    benchmark(numpy_reference, *args)


@pytest.mark.parametrize("case,backend,options", CASES, ids=[c[0] for c in CASES])
def test_nbyoc(benchmark, reference_inputs, case, backend, options):
    n, args = reference_inputs
    benchmark.group = f"reference {n}x{n}"
    fn = nbyoc.compile(reference_graph((n, n)), backend=backend, options=options)
    out = benchmark(fn, *args)
    np.testing.assert_allclose(out, numpy_reference(*args), rtol=1e-6)
