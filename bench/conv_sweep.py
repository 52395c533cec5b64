"""Conv layers (bench/conv_layers.py) on nbyoc's llvm backend against ONNX Runtime and
OpenVINO, and against this machine's FMA peak (bench/fma_peak.py) measured in the same
run.

    python bench/conv_sweep.py [--layers a,b] [--runs 10] [--rounds 3] [--json FILE] [--quick]

A layer is measured by one phase after another, each a fresh process, so that no
runtime's threads (ONNX Runtime's and OpenVINO's spin on after a run) take a core from
another's. The phases run ``--rounds`` times per layer, each round starting one phase
later, and the layer's timed runs of every round are pooled; then the next layer. On a
machine that other work shares, a burst of load then falls on every runtime of a
layer alike, and on the FMA peak measured beside it, rather than on the one phase it
happens to meet. The phases:

1. ``fma``: the FMA peak, float32 and float64, on 1 thread and on all (the median of
   101 runs of 1 ms, ``fma_peak``'s reasons; a layer's share of the peak is of the
   median of the peaks beside it);
2. ``nbyoc-1`` and ``nbyoc-all``: ``nbyoc.from_onnx`` + ``compile`` on llvm (an empty
   cache of the phase's own: cold for a layer's first structures), then ``--runs``
   warm calls, with ``NUMBA_NUM_THREADS=1`` and with Numba's default (every CPU);
3. ``ort``: ONNX Runtime with its default session options;
4. ``openvino``: ``compile_model`` on the CPU with ``INFERENCE_PRECISION_HINT: f32``
   (with AMX or AVX512-BF16 it would otherwise compute in bfloat16).

A runtime that is not installed is left out, with a note. Each nbyoc result is then
checked against ONNX Runtime's: both are within the first-order rounding bound of the
exact result (``nbyoc.runtime.tolerance.error_bounds``: the sum of C/group*k*k products
per element), so they may differ by twice that bound; the check reports the largest
difference as a share of it and fails above 1.

The table (``report.conv_sweep_markdown``) gives per layer each runtime's median, its
GFLOP/s (2 * N * M * C/group * k*k * outputs over the median) and the share of the FMA
peak at its thread count (the peers use all threads, as by default), nbyoc's speed
over ONNX Runtime's and OpenVINO's (above 1: nbyoc is faster) and its speed-up from 1
thread to all. ``--json`` writes every number; ``bench/report.py --conv-sweep FILE
--page docs/performance.md`` puts the table on the performance page. ``--quick``
runs two small layers a few times (the test in tests/test_bench.py).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import conv_layers  # noqa: E402
import numpy as np  # noqa: E402
from conv_layers import LAYERS  # noqa: E402

#: The longest one layer's timed runs may take in one phase (it stops after fewer
#: runs, at least MIN_RUNS).
RUN_BUDGET_S = 15.0
MIN_RUNS = 3
WARM_CALLS = 3
#: The phases, in the order they run; a peer's needs its module installed.
PHASES = ("fma", "nbyoc-1", "nbyoc-all", "ort", "openvino")
PEER_MODULES = {"ort": "onnxruntime", "openvino": "openvino"}


def timed_ms(call, runs: int) -> list[float]:
    """``runs`` timed calls (ms) after WARM_CALLS untimed ones (fewer if they take
    longer than RUN_BUDGET_S, at least MIN_RUNS)."""
    for _ in range(WARM_CALLS):
        call()
    times, began = [], time.perf_counter()
    while len(times) < runs and (
        len(times) < MIN_RUNS or time.perf_counter() - began < RUN_BUDGET_S
    ):
        t = time.perf_counter()
        call()
        times.append(1e3 * (time.perf_counter() - t))
    return times


# -- the children: each measures every layer and writes its report after each one


def prepare_nbyoc(path: Path):
    import nbyoc
    from nbyoc.runtime.threads import start_threads

    # Numba's threads started as nbyoc starts them (asking Numba first would start
    # them with OpenMP's default of spinning while idle, which nbyoc does not use here)
    threads = start_threads()
    fn = nbyoc.compile(nbyoc.from_onnx(str(path)), backend="llvm")
    return fn, {"threads": threads}


def prepare_ort(path: Path):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda x: session.run(None, {"x": x})[0], {"version": onnxruntime.__version__}


def prepare_openvino(path: Path):
    import openvino

    core = openvino.Core()
    compiled = core.compile_model(
        core.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    output = compiled.outputs[0]
    return lambda x: np.asarray(compiled([x])[output]), {"version": openvino.__version__}


PREPARE = {"nbyoc-1": prepare_nbyoc, "nbyoc-all": prepare_nbyoc, "ort": prepare_ort,
           "openvino": prepare_openvino}  # fmt: skip


def child(args) -> None:
    work, report_path = Path(args.work), Path(args.report)
    report: dict = {"load_at_start": os.getloadavg(), "layers": {}}

    def save():
        report["load_at_end"] = os.getloadavg()
        partial = report_path.with_suffix(".part")
        partial.write_text(json.dumps(report))
        os.replace(partial, report_path)

    if args.child == "fma":
        import fma_peak

        report.update(fma_peak.peaks(runs=args.fma_runs, seconds=args.fma_seconds))
        report["layer"] = args.layers  # (measured beside this layer's runs)
        save()
        return
    for name in args.layers.split(","):
        layer, entry = LAYERS[name], {}
        report["layers"][name] = entry
        try:
            began = time.perf_counter()
            run, facts = PREPARE[args.child](work / f"{name}.onnx")
            x = conv_layers.sample(layer)
            out = run(x)
            entry.update(facts, prepare_s=time.perf_counter() - began)
            np.save(work / f"{args.child}-{name}.npy", out)
            entry["times_ms"] = timed_ms(functools.partial(run, x), args.runs)
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"
        save()


# -- the parent


def run_phase(phase: str, name: str, opts, work: Path, round_: int) -> dict:
    """One phase on one layer in a fresh process; its report (what it finished, if
    stopped)."""
    report_path = work / f"{phase}-{name}-{round_}.json"
    command = [sys.executable, __file__, "--child", phase, "--work", str(work),
               "--report", str(report_path), "--layers", name,
               "--runs", str(opts.runs), "--fma-runs", str(opts.fma_runs),
               "--fma-seconds", str(opts.fma_seconds)]  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if phase.startswith("nbyoc"):
        # a cache of its own: cold in the first round, warm after
        env["NBYOC_CACHE_DIR"] = str(work / f"cache-{phase}")
        if phase == "nbyoc-1":
            env["NUMBA_NUM_THREADS"] = "1"
    errors = report_path.with_suffix(".stderr")
    with errors.open("w") as stderr:
        process = subprocess.Popen(command, env=env, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
    try:
        process.wait(timeout=opts.timeout)
    except subprocess.TimeoutExpired:
        pass
    finally:  # stopped, or this process interrupted: the child (its own session) goes too
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    report = json.loads(report_path.read_text()) if report_path.exists() else {"layers": {}}
    if process.returncode:
        lines = errors.read_text().strip().splitlines()
        stopped = process.returncode == -signal.SIGKILL
        last = lines[-1] if lines else f"exit code {process.returncode}"
        report["error"] = f"stopped after {opts.timeout:.0f} s" if stopped else last
    return report


def _median_gflops(reports: list[dict]) -> dict:
    """dtype -> threads -> the median of the reports' FMA peaks."""
    first = reports[0]["gflops"]
    return {dtype: {t: statistics.median(r["gflops"][dtype][t] for r in reports) for t in by}
            for dtype, by in first.items()}  # fmt: skip


def merge_rounds(phase: str, rounds: list[dict]) -> dict:
    """One phase's reports (a layer and a round each) as one: each layer's timed runs
    pooled, their median ``ms`` and fastest ``best_ms``; its first preparation (cold
    for nbyoc) and the fastest later one (warm). For the FMA peak, the median of every
    report, and each layer's own (of the reports beside it) under "layers". The
    reports are kept under "rounds"."""
    merged: dict = {"rounds": rounds, "layers": {}}
    errors = [r["error"] for r in rounds if "error" in r]
    if errors:
        merged["error"] = errors[0]
    if phase == "fma":
        done = [r for r in rounds if "gflops" in r]
        if done:
            merged.update({k: v for k, v in done[0].items() if k not in ("gflops", "layer")})
            merged["gflops"] = _median_gflops(done)
            for name in dict.fromkeys(r["layer"] for r in done):
                beside = [r for r in done if r["layer"] == name]
                merged["layers"][name] = {"gflops": _median_gflops(beside)}
        return merged
    names = dict.fromkeys(name for r in rounds for name in r.get("layers", {}))
    for name in names:
        entries = [r["layers"][name] for r in rounds if name in r.get("layers", {})]
        times = [t for e in entries for t in e.get("times_ms", [])]
        entry = {k: v for k, v in entries[0].items() if k not in ("times_ms", "prepare_s")}
        if "prepare_s" in entries[0]:
            entry["first_prepare_s"] = entries[0]["prepare_s"]
        later = [e["prepare_s"] for e in entries[1:] if "prepare_s" in e]
        if later:
            entry["later_prepare_s"] = min(later)
        if times:
            entry.pop("error", None)
            entry.update(ms=statistics.median(times), best_ms=min(times), runs=len(times))
        merged["layers"][name] = entry
    return merged


def check(layer, work: Path, phase: str) -> dict | None:
    """``phase``'s result of ``layer`` against ONNX Runtime's (None: one of them is
    missing): the largest difference, relative to the largest magnitude of ORT's
    result and as a share of twice the rounding bound (see the module docstring)."""
    mine, theirs = work / f"{phase}-{layer.name}.npy", work / f"ort-{layer.name}.npy"
    if not (mine.exists() and theirs.exists()):
        return None
    import nbyoc
    from nbyoc.runtime.tolerance import error_bounds

    got, ort = np.load(mine).astype(np.float64), np.load(theirs).astype(np.float64)
    if got.shape != ort.shape:
        return {"ok": False, "why": f"shape {got.shape}, ONNX Runtime's {ort.shape}"}
    f = nbyoc.from_onnx(str(work / f"{layer.name}.onnx"))
    (bound,) = error_bounds(f, [conv_layers.sample(layer)])
    allowed, diff = 2 * np.asarray(bound, np.float64), np.abs(got - ort)
    share = float(np.max(np.where(allowed > 0, diff / np.maximum(allowed, 1e-300),
                                  np.where(diff > 0, np.inf, 0.0))))  # fmt: skip
    return {
        "ok": bool(np.isfinite(share) and share <= 1.0),
        "max_abs_diff": float(diff.max()),
        "max_rel_diff": float(diff.max() / max(float(np.abs(ort).max()), 1e-300)),
        "of_bound": share,
    }


def machine() -> dict:
    import numba
    import numpy

    cpu = ""
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((ln.split(":", 1)[1].strip() for ln in info
                        if ln.startswith("model name")), "")  # fmt: skip
    except OSError:
        pass
    return {"cpu": cpu or platform.processor(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "numpy": numpy.__version__,
            "numba": numba.__version__, "platform": platform.platform(),
            "date": time.strftime("%Y-%m-%d", time.gmtime())}  # fmt: skip


def load_report_module():
    spec = importlib.util.spec_from_file_location("bench_report", BENCH / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="", help=f"comma-separated; of: {', '.join(LAYERS)}")
    parser.add_argument("--runs", type=int, default=10, help="timed runs per layer and round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="times every phase runs, one after another (runs pooled)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=300.0, help="per process, s")
    parser.add_argument("--json", help="write every number here")
    quick = ", ".join(conv_layers.QUICK)
    parser.add_argument("--quick", action="store_true", help=f"two small layers ({quick}), 3 runs")
    parser.add_argument("--child", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--fma-runs", type=int, default=101, help=argparse.SUPPRESS)
    parser.add_argument("--fma-seconds", type=float, default=0.001, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.child:
        child(opts)
        return 0
    if opts.quick:
        opts.runs, opts.rounds, opts.fma_runs = min(opts.runs, 3), 1, 21
    names = opts.layers.split(",") if opts.layers else list(conv_layers.QUICK if opts.quick
                                                            else LAYERS)  # fmt: skip
    unknown = [n for n in names if n not in LAYERS]
    if unknown:
        parser.error(f"unknown layers {unknown}; the set: {', '.join(LAYERS)}")
    notes, phases = [], []
    for phase in PHASES:
        module = PEER_MODULES.get(phase)
        if module and not importlib.util.find_spec(module):
            notes.append(f"{module} is not installed: no {module} column "
                         f"(pip install '.[bench]')")  # fmt: skip
        else:
            phases.append(phase)
    if "ort" not in phases:
        notes.append("no ONNX Runtime: nbyoc's results are not checked")
    doc = {"machine": machine(), "runs": opts.runs, "rounds": opts.rounds, "quick": opts.quick,
           "notes": notes,
           "load_at_start": os.getloadavg(), "phases": {}, "checks": {},
           "layers": {n: {"network": LAYERS[n].network, "conv": LAYERS[n].describe(),
                          "flops": LAYERS[n].flops} for n in names}}  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="nbyoc-conv-sweep-"))
    try:
        import onnx

        for name in names:
            onnx.save(conv_layers.onnx_model(LAYERS[name]), str(work / f"{name}.onnx"))
        reports: dict[str, list[dict]] = {phase: [] for phase in phases}
        for i, name in enumerate(names):
            for round_ in range(opts.rounds):
                # each round starts one phase later, so that no runtime always runs first
                turn = (i + round_) % len(phases)
                print(f"{name}, round {round_ + 1}...", file=sys.stderr, flush=True)
                for phase in phases[turn:] + phases[:turn]:
                    reports[phase].append(run_phase(phase, name, opts, work, round_))
                    if "error" in reports[phase][-1]:
                        print(f"  {phase}: {reports[phase][-1]['error']}", file=sys.stderr)
        doc["phases"] = {phase: merge_rounds(phase, reports[phase]) for phase in phases}
        for name in names:
            for phase in ("nbyoc-1", "nbyoc-all"):
                verdict = check(LAYERS[name], work, phase)
                if verdict is not None:
                    doc["checks"].setdefault(name, {})[phase] = verdict
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["load_at_end"] = os.getloadavg()
    print(load_report_module().conv_sweep_markdown(doc), end="")
    if opts.json:
        Path(opts.json).write_text(json.dumps(doc, indent=1))
        print(f"\nwrote {opts.json}", file=sys.stderr)
    failed = [n for n, by in doc["checks"].items() if not all(v["ok"] for v in by.values())]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
