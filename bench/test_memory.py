"""Peak memory of one call of the reference graph at the largest size (4096x4096 by
default), for NumPy, numexpr and every nbyoc case, each in a fresh process
(``bench/probe.py memory``): ``extra_info`` holds the peak above what the process
held before the call and what earlier calls left held, in MiB (medians).
"""

from __future__ import annotations

import statistics
import sys

import graphs
import pytest
from probe import run_probe

CASES = [*graphs.COMPETITORS, *graphs.NBYOC_CASES]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("case", CASES)
def test_peak_memory(benchmark, case, largest_size, process_rounds):
    if case == "numexpr" and graphs.numexpr is None:
        pytest.skip("numexpr is not installed (pip install '.[bench]')")
    if case == "jax.jit" and graphs.jax is None:
        pytest.skip("jax is not installed (pip install '.[bench]')")
    benchmark.group = f"memory: reference {largest_size}x{largest_size}"
    reports = []
    benchmark.pedantic(
        lambda: reports.append(run_probe("memory", case, largest_size)), rounds=process_rounds
    )
    benchmark.extra_info.update(kind="memory", shape=f"{largest_size}x{largest_size}", case=case)
    for key in reports[0]:
        benchmark.extra_info[key] = statistics.median(r[key] for r in reports)
