"""Compile time of the reference graph at 1024x1024 on each backend, three ways:

- cold: a fresh process with an empty cache directory (Numba's and gcc's work
  included, and Numba's own first-use warm-up);
- warm disk: a fresh process whose cache directory holds the compiled code;
- in memory: compiling the same graph again in the same process.

The fresh-process cases run ``bench/probe.py compile``; ``extra_info`` holds
the medians it reports (import, compile, first call, start to result), and the
benchmark's own time is the whole process, launch to exit.
"""

from __future__ import annotations

import statistics

import graphs
import pytest
from probe import run_probe

import nbyoc

N = 1024
BACKENDS = list(nbyoc.codegen.registered_backends())


def record(benchmark, reports: list[dict], **info) -> None:
    benchmark.extra_info.update(kind="compile", shape=f"{N}x{N}", **info)
    for key in reports[0]:
        benchmark.extra_info[key] = statistics.median(r[key] for r in reports)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cold(benchmark, backend, tmp_path_factory, process_rounds):
    benchmark.group = "compile: cold (fresh process, empty cache)"
    reports = []

    def empty_cache():
        return (tmp_path_factory.mktemp("cold"),), {}

    def launch(cache_dir):
        reports.append(run_probe("compile", backend, N, cache_dir))

    benchmark.pedantic(launch, setup=empty_cache, rounds=process_rounds)
    record(benchmark, reports, case=backend, phase="cold")


@pytest.mark.parametrize("backend", BACKENDS)
def test_warm_disk(benchmark, backend, tmp_path_factory, process_rounds):
    benchmark.group = "compile: warm disk cache (fresh process)"
    cache_dir = tmp_path_factory.mktemp("warm")
    run_probe("compile", backend, N, cache_dir)  # fills the cache
    reports = []
    benchmark.pedantic(
        lambda: reports.append(run_probe("compile", backend, N, cache_dir)),
        rounds=process_rounds,
    )
    record(benchmark, reports, case=backend, phase="warm disk")


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_memory(benchmark, backend):
    benchmark.group = "compile: in-memory cache hit"
    work = graphs.workload("reference", N)
    nbyoc.compile(work.function, backend=backend)  # the first compile fills the cache
    benchmark.extra_info.update(kind="compile", shape=f"{N}x{N}", case=backend, phase="in memory")
    benchmark(lambda: nbyoc.compile(graphs.workload("reference", N).function, backend=backend))
