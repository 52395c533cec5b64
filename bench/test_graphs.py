"""Run time of every graph in graphs.py, side by side in one process: NumPy (naive and
with ``out=``), numexpr when installed, and nbyoc on every backend.

Each benchmark's ``extra_info`` says what it measured (graph, shape, case, the memory
traffic of an ideal pass, flops), so ``bench/report.py`` needs no name parsing. The copy
benchmarks measure the memory bandwidth the large cases are compared with: one
thread (``np.copyto``), every core (a parallel Numba loop, which LLVM turns into a
``memcpy`` per thread) and every core with streaming stores (``nbyoc.runtime.llvm.stream``).
Each counts the bytes it really moves: a store to a line not in the cache reads it
first (three times the array), a streaming store does not (twice); glibc's ``memcpy``
streams copies from its ``x86_non_temporal_threshold`` up (``memcpy_streams``).
"""

from __future__ import annotations

import functools
import glob
import re
import subprocess

import graphs
import numba
import numpy as np
import pytest

from nbyoc.runtime.llvm.stream import store_fence, stream_row

CASES = [*graphs.COMPETITORS, *graphs.NBYOC_CASES]


@functools.lru_cache(maxsize=1)  # one group's 64 MiB arrays at a time
def prepared(graph: str, n: int | None):
    work = graphs.workload(graph, n)
    args = work.inputs()
    return work, args, work.numpy(*args)


def run_case(benchmark, warm, graph: str, n: int | None, case: str) -> None:
    work, args, expected = prepared(graph, n)
    fn = graphs.candidate(work, case)
    if fn is None:
        pytest.skip(f"{case}: not installed (pip install '.[bench]'), or no version of this graph")
    # Scaled: the MLP's sums cancel, and chain10 subtracts nearly equal values at a few points
    # of 16M, where an ulp of difference in exp or tanh between libraries shows.
    atol = 1e-4 * float(np.abs(expected).max())
    np.testing.assert_allclose(fn(*args), expected, rtol=2e-5, atol=atol)
    benchmark.group = f"{work.graph} {work.shape_label}"
    benchmark.extra_info.update(
        kind="run", graph=work.graph, shape=work.shape_label, case=case,
        traffic=work.traffic, footprint=work.footprint, flops=work.flops,
    )  # fmt: skip
    warm(fn, *args)
    benchmark(fn, *args)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("graph", list(graphs.SQUARE_GRAPHS))
def test_graph(benchmark, warm, size, graph, case):
    run_case(benchmark, warm, graph, size, case)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("graph", list(graphs.NN_GRAPHS))
def test_nn_graph(benchmark, warm, request, size, graph, case):
    """Softmax, log-softmax, layer norm, RMS norm, GELU: the reductions and transcendental
    math models are made of, as ONNX models nbyoc imports (from 1024 x 1024 up: below,
    a row of a softmax is not what models run; any size in a quick run)."""
    if size < 1024 and not request.config.getoption("--bench-quick"):
        pytest.skip("the neural-network graphs run from 1024 x 1024 up")
    run_case(benchmark, warm, graph, size, case)


@pytest.mark.parametrize("case", CASES)
def test_mlp(benchmark, warm, case):
    run_case(benchmark, warm, "mlp", None, case)


@numba.njit(parallel=True)
def parallel_copy(source, destination):
    flat_source, flat_destination = source.reshape(-1), destination.reshape(-1)
    for i in numba.prange(flat_source.size):
        flat_destination[i] = flat_source[i]


@numba.njit(parallel=True)
def streaming_copy(source, destination):
    rows, tasks = source.shape[0], 4 * numba.get_num_threads()
    for task in numba.prange(tasks):
        for row in range(task * rows // tasks, (task + 1) * rows // tasks):
            stream_row(destination, row, source[row])
        store_fence()


@numba.njit(parallel=True)
def read_pass(source, destination):
    """The sum of every 32-bit word of both arrays (modulo 2**64): a read-only pass over
    the bytes a copy touches. (Integer, so that LLVM vectorises the reduction without
    reordering float adds; the result is checked, so the reads cannot be dropped.)"""
    a, b = source.reshape(-1).view(np.uint32), destination.reshape(-1).view(np.uint32)
    total = np.uint64(0)
    for i in numba.prange(a.size):
        total += np.uint64(a[i]) + np.uint64(b[i])
    return total


#: The passes a case's bandwidth bound is taken from: copies, and a read-only pass over
#: the same bytes (the faster of them is the bound).
COPY_METHODS = ["np.copyto", "parallel copy", "streaming copy", "read pass"]


@functools.cache
def glibc_non_temporal_threshold() -> int | None:
    """The size from which glibc's ``memcpy`` writes with streaming stores (x86), read
    from the dynamic loader's tunables; None where there is no such loader."""
    for loader in sorted(glob.glob("/lib64/ld-linux-*.so*") + glob.glob("/lib/*/ld-linux-*.so*")):
        try:
            listed = subprocess.run([loader, "--list-tunables"], capture_output=True, text=True)
        except OSError:
            continue
        found = re.search(r"x86_non_temporal_threshold: (0x[0-9a-f]+|\d+)", listed.stdout)
        if found:
            return int(found.group(1), 0)
    return None


def memcpy_streams(nbytes: int) -> bool:
    """Whether glibc copies one block of ``nbytes`` with streaming stores."""
    threshold = glibc_non_temporal_threshold()
    return threshold is not None and nbytes >= threshold


@pytest.mark.parametrize("method", COPY_METHODS)
def test_copy(benchmark, warm, size, method):
    """Copy one n x n float32 array into another (already touched) one."""
    measure_copy(benchmark, warm, size, method)


@pytest.mark.parametrize("method", COPY_METHODS)
def test_copy_beyond_the_cache(benchmark, warm, largest_size, method):
    """The same copy at twice the largest size (512 MiB for 4096): the bound of the large
    cases whose arrays outgrow the last-level cache (260 MiB on this project's Xeon, so
    the 4096 x 4096 copy's 128 MiB fits in it and runs up to twice as fast as memory)."""
    measure_copy(benchmark, warm, 2 * largest_size, method)


def measure_copy(benchmark, warm, size: int, method: str) -> None:
    source = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    destination = np.zeros_like(source)
    copy = {
        "np.copyto": lambda s, d: np.copyto(d, s),
        "parallel copy": parallel_copy,
        "streaming copy": streaming_copy,
        "read pass": read_pass,
    }[method]
    benchmark.group = f"copy {size}x{size}"
    if method == "read pass":
        destination[...] = source
        expected = 2 * source.reshape(-1).view(np.uint32).sum(dtype=np.uint64)
        assert copy(source, destination) == expected
        # Traffic: both arrays read, nothing written.
        benchmark.extra_info.update(
            kind="copy", shape=f"{size}x{size}", case=method, streams=False, reads_only=True,
            traffic=2 * source.nbytes, footprint=2 * source.nbytes,
        )  # fmt: skip
    else:
        copy(source, destination)
        np.testing.assert_array_equal(destination, source)
        # memcpy calls: one for np.copyto, one per thread's share for the parallel loop
        per_call = source.nbytes // (1 if method == "np.copyto" else numba.get_num_threads())
        streams = method == "streaming copy" or memcpy_streams(per_call)
        # Traffic: the source read and the destination written, and read first (write-
        # allocate) unless the stores stream.
        benchmark.extra_info.update(
            kind="copy", shape=f"{size}x{size}", case=method, streams=streams,
            traffic=(2 if streams else 3) * source.nbytes, footprint=2 * source.nbytes,
        )  # fmt: skip
    warm(copy, source, destination)
    benchmark(copy, source, destination)
