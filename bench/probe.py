"""Measurements that need a fresh process: compile time and peak memory. Prints JSON.

    python bench/probe.py compile llvm 1024    # import, compile, first call: seconds
    python bench/probe.py memory numpy 4096    # peak and held memory of one call: MiB
    python bench/probe.py scaling llvm 300 chain   # compile time of a 300-node chain

Both run the reference graph at n x n; the benchmarks call them through
``run_probe``: ``compile`` from test_compile_time.py with an empty or a warm
``NBYOC_CACHE_DIR``, ``memory`` from test_memory.py. Peak memory is the
resident set's high-water mark, which Linux lets a process reset
(``/proc/self/clear_refs``), so it counts memory that tracemalloc cannot see:
C ``malloc`` in csource's buffers, Numba's allocations.
"""

from __future__ import annotations

import time

START = time.perf_counter()  # before the imports: they are part of a cold start

import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import graphs  # noqa: E402
import scaling_graphs  # noqa: E402

MIB = 1 << 20


def compile_times(case: str, n: int) -> dict:
    imported = time.perf_counter()
    work = graphs.workload("reference", n)
    args = work.inputs()
    began = time.perf_counter()
    fn = graphs.candidate(work, case)
    compiled = time.perf_counter()
    fn(*args)
    done = time.perf_counter()
    return {
        "import_s": imported - START,
        "compile_s": compiled - began,
        "first_call_s": done - compiled,
        "start_to_result_s": done - START,
    }


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_memory(case: str, n: int) -> dict:
    """Memory of one call in steady state (after three calls, the last result dropped):
    the peak above what the process held before it, and what earlier calls left held
    (pools, scratch buffers, preallocated outputs)."""
    work = graphs.workload("reference", n)
    args = work.inputs()
    fn = graphs.candidate(work, case)
    gc.collect()
    before_calls = _status_kib("VmRSS")
    for _ in range(3):
        out = fn(*args)
    del out
    gc.collect()
    baseline = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    out = fn(*args)
    peak = _status_kib("VmHWM")
    return {
        "peak_mib": (peak - baseline) / 1024,
        "held_mib": (baseline - before_calls) / 1024,
        "result_mib": out.nbytes / MIB,
    }


def scaling_times(backend: str, nodes: int, family: str) -> dict:
    """Compile time of ``family``'s graph of ``nodes`` nodes on ``backend``, checked against
    the host on its first call, with how many regions and distinct llvm kernels it took."""
    import numpy as np

    from nbyoc.runtime.llvm import kernels

    imported = time.perf_counter()
    scaled = scaling_graphs.family(family, nodes)
    args = scaled.inputs()
    began = time.perf_counter()
    fn = graphs.nbyoc.compile(scaled.function, backend=backend)
    compiled = time.perf_counter()
    got = fn(*args)
    done = time.perf_counter()
    want = graphs.nbyoc.compile(scaled.function, backend="host")(*args)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
    return {
        "nodes": scaled.nodes,
        "regions": len(fn.runtime_modules),
        "kernel_modules": len(kernels._KERNELS),
        "import_s": imported - START,
        "compile_s": compiled - began,
        "first_call_s": done - compiled,
        "start_to_result_s": done - START,
    }


PROBES = {"compile": compile_times, "memory": peak_memory, "scaling": scaling_times}
#: The nbyoc the benchmarks import, so that the probe's process imports it too.
NBYOC_ROOT = str(Path(graphs.nbyoc.__file__).resolve().parents[1])


def run_probe(probe: str, case: str, n: int, cache_dir: Path | None = None, *extra: str) -> dict:
    """Run this script in a fresh interpreter (the benchmarks' side) and return its report."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [NBYOC_ROOT, env.get("PYTHONPATH")]))
    if cache_dir is not None:
        env["NBYOC_CACHE_DIR"] = str(cache_dir)
    done = subprocess.run(
        [sys.executable, __file__, probe, case, str(n), *extra],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"probe {probe} {case} failed:\n{done.stderr}")
    return json.loads(done.stdout)


if __name__ == "__main__":
    probe, case, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(json.dumps(PROBES[probe](case, n, *sys.argv[4:])))
