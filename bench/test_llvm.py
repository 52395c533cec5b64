"""The llvm backend's targets, measured side by side with NumPy in one run.

- reference graph ((a + b) - c) * d, float32, 4096x4096: against NumPy, and
  against the memory-bandwidth bound: 5 arrays x 4 bytes x N divided by the
  copy bandwidth np.copyto reaches in the same run (``python bench/report.py``
  prints ``bound/llvm``, the bound's time over llvm's; at least 0.8 means
  within 1.25x of the bound);
- the diamond t = a * b; (t + c) * (t - d) at 4096x4096;
- compiling: the same graph again in the same process, and a fresh process
  with a warm disk cache compiling and running the reference graph.

The 10x10 and 1024x1024 reference graphs are in test_reference_graph.py.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import nbyoc
from nbyoc.demo import numpy_reference, reference_graph

N = 4096


@pytest.fixture(scope="module")
def big_inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((N, N)).astype(np.float32) for _ in range(4)]


def diamond_graph():
    a, b, c, d = (nbyoc.var(name, (N, N)) for name in "abcd")
    t = a * b
    return nbyoc.function([a, b, c, d], (t + c) * (t - d))


def numpy_diamond(a, b, c, d):
    t = a * b
    return (t + c) * (t - d)


def test_copy(benchmark, big_inputs):
    """np.copyto moves 2 arrays; the reference graph's bound is 5/2 of this."""
    benchmark.group = "llvm reference 4096x4096"
    destination = np.empty_like(big_inputs[0])
    destination[...] = 0
    benchmark(np.copyto, destination, big_inputs[0])


def test_numpy(benchmark, big_inputs):
    benchmark.group = "llvm reference 4096x4096"
    benchmark(numpy_reference, *big_inputs)


def test_llvm(benchmark, big_inputs):
    benchmark.group = "llvm reference 4096x4096"
    fn = nbyoc.compile(reference_graph((N, N)), backend="llvm")
    np.testing.assert_allclose(fn(*big_inputs), numpy_reference(*big_inputs), rtol=1e-6)
    benchmark(fn, *big_inputs)


def test_numpy_diamond(benchmark, big_inputs):
    benchmark.group = "llvm diamond 4096x4096"
    benchmark.name = "numpy"
    benchmark(numpy_diamond, *big_inputs)


def test_llvm_diamond(benchmark, big_inputs):
    benchmark.group = "llvm diamond 4096x4096"
    fn = nbyoc.compile(diamond_graph(), backend="llvm")
    np.testing.assert_allclose(fn(*big_inputs), numpy_diamond(*big_inputs), rtol=1e-5)
    benchmark(fn, *big_inputs)


def test_compile_again_in_process(benchmark):
    benchmark.group = "llvm compile"
    nbyoc.compile(reference_graph((10, 10)), backend="llvm")  # warm the in-memory cache
    benchmark(lambda: nbyoc.compile(reference_graph((10, 10)), backend="llvm"))


FRESH_PROCESS = (
    "import numpy as np, nbyoc, time\n"
    "from nbyoc.demo import reference_graph\n"
    "fn = nbyoc.compile(reference_graph((10, 10)), backend='llvm')\n"
    "fn(*[np.ones((10, 10), np.float32)] * 4)\n"
    "print(time.time())\n"
)


def start_to_result() -> float:
    """Seconds from launching a fresh Python to its first result: start-up included;
    the interpreter's own shutdown (about 0.15 s of Numba and llvmlite teardown) not."""
    start = time.time()
    done = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS], check=True, capture_output=True, text=True,
        env=dict(os.environ),
    )  # fmt: skip
    return float(done.stdout.split()[-1]) - start


def test_compile_in_a_fresh_process_with_a_warm_disk_cache(benchmark):
    """The whole process, shutdown included; extra_info holds start-to-result times."""
    benchmark.group = "llvm compile"
    start_to_result()  # warm the disk cache
    benchmark.pedantic(start_to_result, rounds=7, iterations=1)
    times = sorted(start_to_result() for _ in range(7))
    benchmark.extra_info["start_to_result_median_s"] = times[len(times) // 2]
