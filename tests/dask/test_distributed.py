"""``nbyoc.dask.apply`` on a real ``dask.distributed`` cluster: two worker processes,
which receive the block functions as data, compile each once, and survive a worker's
death."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import nbyoc

from ..frontend.numpy_corpus import layer_norm, mlp, softmax
from .test_apply import assert_equal_to_numpy, payloads

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        yield client


def rows(shape, chunk, seed=0):
    array = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return array, da.from_array(array, chunks=(chunk, *shape[1:]))


def test_elementwise_graphs_run_on_the_workers(client):
    arrays = [rows((256, 64), 32, seed) for seed in range(4)]
    fn = lambda a, b, c, d: ((a + b) - c) * d  # noqa: E731
    y = nbyoc.dask.apply(fn, *[chunked for _, chunked in arrays])
    assert_equal_to_numpy(client.compute(y).result(), fn(*[a for a, _ in arrays]), "reference")
    diamond = lambda a: np.tanh(a) * np.exp(-a) + np.sqrt(np.abs(a))  # noqa: E731
    y = nbyoc.dask.apply(diamond, arrays[0][1])
    assert_equal_to_numpy(client.compute(y).result(), diamond(arrays[0][0]), "diamond")


def test_softmax_and_layer_norm_over_rows_with_the_row_axis_cut(client):
    x, chunked = rows((512, 96), 64)
    gain, bias = np.linspace(0.5, 1.5, 96, dtype=np.float32), np.ones(96, np.float32)
    y = nbyoc.dask.apply(softmax, chunked)
    z = nbyoc.dask.apply(layer_norm, chunked, gain, bias)
    assert y.chunks[0] == z.chunks[0] == (64,) * 8
    got_y, got_z = client.compute([y, z], sync=True)
    assert_equal_to_numpy(got_y, softmax(x), "softmax")
    assert_equal_to_numpy(got_z, layer_norm(x, gain, bias), "layer_norm")


def test_a_sum_and_a_mean_over_the_cut_axis_run_as_trees(client):
    x, chunked = rows((1024, 32), 64)
    total = nbyoc.dask.apply(lambda x: (x * x).sum(axis=0), chunked, block_bytes=32 << 10)
    mean = nbyoc.dask.apply(lambda x: x.mean(axis=0), chunked, block_bytes=32 << 10)
    assert "rechunk" not in " ".join(total.dask.layers)
    got_total, got_mean = client.compute([total, mean], sync=True)
    assert_equal_to_numpy(got_total, (x * x).sum(axis=0), "sum")
    assert_equal_to_numpy(got_mean, x.mean(axis=0), "mean")


def test_an_mlp_on_a_chunked_batch(client):
    x, chunked = rows((600, 48), 128)  # the last block holds 88 rows
    rng = np.random.default_rng(1)
    w1, b1 = rng.standard_normal((48, 64)).astype(np.float32), np.zeros(64, np.float32)
    w2, b2 = rng.standard_normal((64, 10)).astype(np.float32), np.ones(10, np.float32)
    y = nbyoc.dask.apply(mlp, chunked, w1, b1, w2, b2)
    assert y.chunks == ((128, 128, 128, 128, 88), (10,))
    assert_equal_to_numpy(client.compute(y).result(), mlp(x, w1, b1, w2, b2), "mlp")


def test_each_worker_compiles_each_block_signature_once(client):
    fn = lambda x: np.sin(x) * np.cos(x) + 0.25  # noqa: E731
    x, chunked = rows((320, 16), 32)
    before = client.run(lambda: dict(nbyoc.dask.tasks.compiles))
    for _ in range(3):
        assert_equal_to_numpy(client.compute(nbyoc.dask.apply(fn, chunked)).result(), fn(x), "f")
    after = client.run(lambda: dict(nbyoc.dask.tasks.compiles))
    compiled = [after[w]["block"] - before[w]["block"] for w in after]
    assert sum(compiled) >= 1 and max(compiled) <= 1, compiled  # one signature: (32, 16)


def test_workers_find_the_clients_kernels_in_the_shared_disk_cache(client):
    """The client compiles the first block function; workers on its file system load the
    kernel from nbyoc's disk cache (Numba's cache hits, no misses) instead of compiling."""
    fn = lambda x: np.cos(x) * 0.375 - x * 1.625  # noqa: E731 (a kernel no test has made)
    x, chunked = rows((128, 8), 32)
    y = nbyoc.dask.apply(fn, chunked)
    (payload,) = payloads(y)
    assert_equal_to_numpy(client.compute(y).result(), fn(x), "f")

    def kernel_cache(digest=payload["digest"]):
        hits = misses = 0
        for entry, executable in list(nbyoc.dask.tasks._cache.items()):
            if entry[0] == digest:
                for module in executable.runtime_modules.values():
                    hits += sum(module.kernel.stats.cache_hits.values())
                    misses += sum(module.kernel.stats.cache_misses.values())
        return hits, misses

    found = [counts for counts in client.run(kernel_cache).values() if counts != (0, 0)]
    assert found and all(hits >= 1 and misses == 0 for hits, misses in found), found


def test_a_worker_that_dies_mid_compute_is_replaced_and_the_result_is_right(client, tmp_path):
    marker = tmp_path / "died"

    def block(i):
        if i == 5 and not marker.exists():
            marker.write_text("this worker exits now")
            os._exit(1)  # the worker process dies, as on a crash or an OOM kill
        return np.random.default_rng(i).standard_normal((32, 24)).astype(np.float32)

    parts = [da.from_delayed(dask.delayed(block)(i), (32, 24), np.float32) for i in range(8)]
    y = nbyoc.dask.apply(softmax, da.concatenate(parts))
    x = np.concatenate([np.random.default_rng(i).standard_normal((32, 24)) for i in range(8)])
    assert_equal_to_numpy(client.compute(y).result(timeout=120), softmax(x.astype(np.float32)), "softmax")  # fmt: skip
    assert marker.exists()  # the worker did die
    client.wait_for_workers(2, timeout=60)


def test_the_cluster_benchmark_runs_and_reports_every_graph():
    """bench/dask_cluster.py at a small size: a row per graph, each with its ratio."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "bench" / "dask_cluster.py"
    done = subprocess.run(
        [sys.executable, str(script), "--size", "256", "--chunk", "64", "--rounds", "1"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "x |" in line]
    assert len(rows) == 5, done.stdout
    assert all(float(row.split("|")[4].strip().rstrip("x")) > 0 for row in rows)
