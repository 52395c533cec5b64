"""The cost of generality: each bench graph and real model run size-generic (its leading
dimensions symbolic, one build for every size) against shape-specialised (built for
its shapes), side by side in one process, on the llvm backend.

    python bench/size_generic.py [--graphs reference,mlp,...] [--models ppocr-cls,...]
                                 [--sizes 256,1024] [--runs 30] [--json size_generic.json]

For each case the executables are compiled and warmed, then timed alternately (one
call of each per round, ``--runs`` rounds), so that a busy moment of the machine falls
on all; the table gives the medians of the size-generic build (``STABLE_CALLS`` off),
of the same function as nbyoc runs it by default (a stable binding whose fixed-shape
build is faster is rebuilt for its shapes: ``nbyoc.runtime.sizes.STABLE_CALLS``) and of
the shape-specialised build, the ratios to the latter, and the compiles a second size
made (0: it ran on the first size's kernels). A graph's leading dimension is made
symbolic where a parameter has the first one's (the batch, the rows); a model keeps its own
dynamic dimensions symbolic (its other dimensions fixed as the real-model set fixes
them, where its import needs them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import graphs  # noqa: E402
import numpy as np  # noqa: E402

import nbyoc  # noqa: E402
from nbyoc.ir.specialize import generalize, specialize  # noqa: E402
from nbyoc.runtime import sizes  # noqa: E402
from nbyoc.runtime.compiles import compile_counts  # noqa: E402

#: The bench graphs measured (each at every --sizes, n x n; the MLP at its one shape).
GRAPHS = ("reference", "diamond", "chain10", "fallback", "softmax", "layer_norm", "gelu", "mlp")


def _kernels() -> int:
    counts = compile_counts()
    return counts.get("llvm modules", 0) + counts.get("c libraries", 0)


def compile_generic(func):
    """The size-generic executable (the stable rule off) and the default one of ``func``."""
    saved = sizes.STABLE_CALLS
    sizes.STABLE_CALLS = 0  # (read when compiled: 0 never rebuilds a binding)
    try:
        raw = nbyoc.compile(func)
    finally:
        sizes.STABLE_CALLS = saved
    return raw, nbyoc.compile(func)


def timed(functions, args, runs: int) -> list[float]:
    """Medians (seconds) of ``runs`` rounds of one call of each of ``functions``."""
    for _ in range(sizes.STABLE_CALLS + 3):  # (past the stable rule's count)
        for fn in functions:
            fn(*args)
    times = [[] for _ in functions]
    for _ in range(runs):
        for fn, spent in zip(functions, times):
            t = time.perf_counter()
            fn(*args)
            spent.append(time.perf_counter() - t)
    return [statistics.median(spent) for spent in times]


def _row(case: str, medians, compiles, symbolic: str) -> dict:
    raw, default, fixed = medians
    return {"case": case, "generic_s": raw, "default_s": default, "specialised_s": fixed,
            "ratio": raw / fixed, "default_ratio": default / fixed,
            "new_size_compiles": compiles, "symbolic": symbolic}  # fmt: skip


def graph_case(graph: str, n: int, runs: int) -> dict:
    work = graphs.workload(graph, n)
    func = work.function
    lead = func.params[0].type.shape[0]  # (the rows of the first input: its batch)
    dims = {p.name_hint: ("rows", *[None] * (p.type.ndim - 1))
            for p in func.params if p.type.ndim and p.type.shape[0] == lead}  # fmt: skip
    symbolic = generalize(func, dims)
    raw, default = compile_generic(symbolic)
    specialised = nbyoc.compile(func)
    args = work.inputs()
    np.testing.assert_allclose(raw(*args), specialised(*args), rtol=1e-4, atol=1e-4)
    medians = timed([raw, default, specialised], args, runs)
    other = max(2, lead // 2 + 1)  # another size, not a power of two
    before = _kernels()
    try:
        other_args = graphs_inputs(specialize(symbolic, {"rows": other}))
    except nbyoc.errors.NbyocTypeError:  # (a size the graph fixes: a product's inner one)
        compiles = "-"
    else:
        raw(*other_args)
        compiles = _kernels() - before
    types = ", ".join(str(p.type) for p in symbolic.params)
    return _row(f"{graph} {work.shape_label}", medians, compiles, types)


def graphs_inputs(func) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in func.params]


def model_case(name: str, runs: int) -> dict:
    from tests import real_models as R

    model = R.MODELS[name]
    data = R.fetch(name)
    symbolic = R.symbolic_import(name, data)
    raw, default = compile_generic(symbolic)
    specialised = nbyoc.compile(nbyoc.from_onnx(data, shapes=model.shapes,
                                                constants=model.constants))  # fmt: skip
    args = list(model.sample(R.SEED).values())
    medians = timed([raw, default, specialised], args, runs)
    # two more batch sizes (the first above 1 may add the structures that broadcast a
    # batch of 1), then the compiles of a third
    batched = [not isinstance(p.type.shape[0], int) for p in symbolic.params]
    for copies in (2, 3):
        raw(*[np.concatenate([a] * copies) if b else a for a, b in zip(args, batched)])
    before = _kernels()
    raw(*[np.concatenate([a] * 5) if b else a for a, b in zip(args, batched)])
    types = ", ".join(str(p.type) for p in symbolic.params)
    return _row(f"model {name}", medians, _kernels() - before, types)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--models", default="")
    parser.add_argument("--sizes", default="256,1024,2048")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", default=None)
    options = parser.parse_args()
    rows = []
    for graph in [g for g in options.graphs.split(",") if g]:
        for n in [int(s) for s in options.sizes.split(",")] if graph != "mlp" else [None]:
            rows.append(graph_case(graph, n, options.runs))
            print_row(rows[-1])
    for name in [m for m in options.models.split(",") if m]:
        rows.append(model_case(name, options.runs))
        print_row(rows[-1])
    if options.json:
        Path(options.json).write_text(json.dumps(rows, indent=1))


def print_row(row: dict) -> None:
    print(f"| {row['case']} | {row['generic_s'] * 1e3:.3f} ms | {row['default_s'] * 1e3:.3f} "
          f"ms | {row['specialised_s'] * 1e3:.3f} ms | {row['ratio']:.2f} | "
          f"{row['default_ratio']:.2f} | {row['new_size_compiles']} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    print(
        "| case | size-generic | default (stable rule) | specialised | generic / specialised "
        "| default / specialised | compiles at a new size |"
    )
    print("|---|---|---|---|---|---|---|")
    main()
