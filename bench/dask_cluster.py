"""nbyoc.dask.apply against Dask's own array expressions, on one dask.distributed
LocalCluster (2 worker processes, 1 thread each), in one run.

Each graph runs on the same persisted inputs (n x n float32, cut into row blocks),
written once as a NumPy function: Dask's own arrays evaluate it with NumPy per block
and op; ``nbyoc.dask.apply`` runs one compiled nbyoc kernel per block. Each round
persists the result on the workers (nothing comes back to the client), rounds of the
two alternate, and the table gives medians and the ratio (Dask's time / nbyoc's).
"Where the time goes" comes from Dask's task stream of one more round: the tasks run,
their summed compute time, and the share of that round's wall time x 2 workers they
fill (the rest is scheduling, moving blocks, allocating and waiting).

    python bench/dask_cluster.py                      # 16384 x 16384 in 1024-row blocks
    python bench/dask_cluster.py --size 2048 --chunk 256 --rounds 2
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections import defaultdict

import numpy as np

import nbyoc


def reference(a, b, c, d):
    return ((a + b) - c) * d


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm(x, gain, bias):
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gain + bias


def column_sum(x):
    return (x * x).sum(axis=0)  # over the cut axis: a tree of partial sums


def mlp(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def cases(client, arrays, n):
    """name -> (function, its arguments). The parameters are on the workers already,
    as the data is (not sent again inside every graph)."""
    import dask.array as da
    from distributed import wait

    rng = np.random.default_rng(0)
    gain, bias = np.ones(n, np.float32), np.zeros(n, np.float32)
    w1 = (rng.standard_normal((n, 256)) / np.sqrt(n)).astype(np.float32)
    w2 = (rng.standard_normal((256, 64)) / 16).astype(np.float32)
    b1, b2 = np.zeros(256, np.float32), np.zeros(64, np.float32)
    gain, bias, w1, b1, w2, b2 = client.persist(
        [da.from_array(p, chunks=p.shape) for p in (gain, bias, w1, b1, w2, b2)]
    )
    wait([gain, bias, w1, b1, w2, b2])
    a, b, c, d = arrays
    return {
        "((a+b)-c)*d": (reference, (a, b, c, d)),
        "softmax over rows": (softmax, (a,)),
        "layer norm over rows": (layer_norm, (a, gain, bias)),
        "sum of squares over the cut axis": (column_sum, (a,)),
        "MLP (n -> 256 -> 64) on the row blocks": (mlp, (a, w1, b1, w2, b2)),
    }


def timed(client, make) -> float:
    from distributed import wait

    start = time.perf_counter()
    result = client.persist(make())
    wait(result)
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def task_profile(client, make) -> tuple[int, float, float]:
    """(tasks run, their summed compute seconds, the wall seconds) for one evaluation
    of ``make()``."""
    from distributed import get_task_stream, wait

    with get_task_stream(client) as stream:
        start = time.perf_counter()
        result = client.persist(make())
        wait(result)
        wall = time.perf_counter() - start
    del result
    computing = defaultdict(float)
    for task in stream.data:
        for part in task["startstops"]:
            if part["action"] == "compute":
                computing[task["key"]] += part["stop"] - part["start"]
    return len(computing), sum(computing.values()), wall


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--chunk", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    n, chunk = args.size, args.chunk
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                     dashboard_address=None, silence_logs=logging.ERROR) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        rng = da.random.default_rng(0)
        arrays = [
            rng.standard_normal((n, n), dtype=np.float32, chunks=(chunk, n)) for _ in range(4)
        ]
        arrays = client.persist(arrays)
        wait(arrays)
        rows = []
        for name, (fn, fn_args) in cases(client, arrays, n).items():
            makers = {
                "dask": lambda fn=fn, fn_args=fn_args: fn(*fn_args),
                "nbyoc": lambda fn=fn, fn_args=fn_args: nbyoc.dask.apply(fn, *fn_args),
            }
            for make in makers.values():  # compiles (nbyoc), warms both
                timed(client, make)
            times = {k: [] for k in makers}
            for _ in range(args.rounds):
                for k, make in makers.items():
                    times[k].append(timed(client, make))
            medians = {k: statistics.median(v) for k, v in times.items()}
            profile = {k: task_profile(client, make) for k, make in makers.items()}
            rows.append((name, medians, profile))
            print(f"  measured {name}", file=sys.stderr, flush=True)
    print(table(rows, n, chunk, args.rounds))
    return 0


def table(rows, n, chunk, rounds) -> str:
    out = [
        f"{n} x {n} float32 ({n * n * 4 / 2**30:.2f} GiB per array) in {chunk}-row blocks, "
        f"on a LocalCluster of 2 worker processes x 1 thread; medians of {rounds} rounds; "
        f"ratio = Dask's time / nbyoc's.",
        "",
        "| graph | Dask arrays | nbyoc.dask.apply | ratio | tasks (Dask / nbyoc) "
        "| task compute, s (Dask / nbyoc) | workers busy computing (Dask / nbyoc) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, medians, profile in rows:
        (tasks_d, busy_d, wall_d), (tasks_n, busy_n, wall_n) = profile["dask"], profile["nbyoc"]
        out.append(
            f"| {name} | {medians['dask'] * 1e3:.0f} ms | {medians['nbyoc'] * 1e3:.0f} ms "
            f"| {medians['dask'] / medians['nbyoc']:.2f}x | {tasks_d} / {tasks_n} "
            f"| {busy_d:.2f} / {busy_n:.2f} "
            f"| {busy_d / (2 * wall_d):.0%} / {busy_n / (2 * wall_n):.0%} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
