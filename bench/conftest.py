"""Options and machine facts shared by the benchmarks.

    python -m pytest bench --benchmark-enable --benchmark-json=bench.json
    python bench/report.py bench.json

``--bench-sizes 10 256`` limits the square graphs to those n x n sizes (the
peak-memory probe runs at the largest); ``--bench-quick`` runs each fresh-process
measurement once and no case waits or warms up first (the smoke test in
tests/test_bench.py uses both).
"""

from __future__ import annotations

import os
import platform
import subprocess
import time

import graphs
import pytest
import scaling_graphs


def pytest_addoption(parser):
    group = parser.getgroup("nbyoc benchmarks")
    group.addoption(
        "--bench-sizes", type=int, nargs="+", default=list(graphs.SIZES), metavar="N",
        help=f"run the square graphs at these n x n sizes (default: {graphs.SIZES})",
    )  # fmt: skip
    group.addoption(
        "--bench-quick", action="store_true",
        help="one round of each fresh-process measurement (compile time, memory), and no "
        "settling or warm-up before a case",
    )  # fmt: skip
    group.addoption(
        "--scaling-nodes", type=int, nargs="+", default=[10, 30, 100, 300, 1000], metavar="N",
        help="graph sizes (nodes) of the compile-time scaling sweep",
    )  # fmt: skip
    group.addoption(
        "--scaling-families", nargs="+", default=list(scaling_graphs.FAMILIES),
        choices=scaling_graphs.FAMILIES, metavar="FAMILY",
        help=f"graph families of the compile-time scaling sweep (default: all of "
        f"{', '.join(scaling_graphs.FAMILIES)})",
    )  # fmt: skip


def pytest_generate_tests(metafunc):
    if "size" in metafunc.fixturenames:
        sizes = metafunc.config.getoption("--bench-sizes")
        metafunc.parametrize("size", sizes, ids=[f"{n}x{n}" for n in sizes])


#: ONNX Runtime's worker threads spin for a while after each run (in the second after a
#: 2048x2048 softmax they used 0.04 s of CPU), taking a core from whatever runs next: an
#: llvm softmax timed right after ORT's ran at one core's speed (2.3 ms against 1.1).
#: Every benchmark waits this long first, so that no case pays for the one before it.
SETTLE_SECONDS = 0.2


#: Before it is timed, a case runs for this long (at least WARM_CALLS times): ONNX
#: Runtime's first calls of PP-OCR's classifier took 10.8 ms and its later ones 3.7 ms
#: (its memory arena and threads settle over some 50 calls), and pytest-benchmark takes
#: no warm-up rounds of its own.
WARM_SECONDS = 0.3
WARM_CALLS = 20


@pytest.fixture(autouse=True)
def settled(request):
    """Start each benchmark once the previous one's worker threads have gone idle (not
    in a quick run: its numbers are not for reading, and the test suite's smoke run of
    every benchmark would spend a minute and a half waiting)."""
    if not request.config.getoption("--bench-quick"):
        time.sleep(SETTLE_SECONDS)


def _warm(fn, *args) -> None:
    deadline = time.perf_counter() + WARM_SECONDS
    calls = 0
    while calls < WARM_CALLS or time.perf_counter() < deadline:
        fn(*args)
        calls += 1


@pytest.fixture
def warm(request):
    """``warm(fn, *args)``: call a case until it runs as it will when timed (once, in a
    quick run)."""
    if request.config.getoption("--bench-quick"):
        return lambda fn, *args: fn(*args)
    return _warm


@pytest.fixture(scope="session")
def process_rounds(request) -> int:
    """How many fresh processes a compile-time or memory measurement takes the median of."""
    return 1 if request.config.getoption("--bench-quick") else 5


@pytest.fixture(scope="session")
def largest_size(request) -> int:
    return max(request.config.getoption("--bench-sizes"))


def _versions() -> dict[str, str]:
    import llvmlite
    import numba
    import numpy

    versions = {"numpy": numpy.__version__, "numba": numba.__version__}
    versions["llvmlite"] = llvmlite.__version__
    if graphs.numexpr is not None:
        versions["numexpr"] = graphs.numexpr.__version__
    if graphs.jax is not None:
        versions["jax"] = graphs.jax.__version__
    try:
        cc = os.environ.get("CC", "cc")
        first = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
        versions["cc"] = first.splitlines()[0] if first else "?"
    except OSError:
        versions["cc"] = "none"
    return versions


def _memory_gib() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return None


def pytest_benchmark_update_machine_info(config, machine_info):
    """Add what the numbers depend on beyond the CPU: library versions, cores, memory."""
    machine_info["nbyoc"] = {
        **_versions(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "platform": platform.platform(terse=True),
    }
