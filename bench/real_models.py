"""Compile and run times of the real-model set (tests/real_models.py) on nbyoc's
backends, against ONNX Runtime and (when installed) OpenVINO.

    python bench/real_models.py [--backends llvm,csource] [--models ppocr-cls,...]
                                [--runs 20] [--timeout 400] [--json real_models.json]
                                [--qdq float,integer] [--ort-disabled] [--no-one-thread]
                                [--no-profile]

Every measurement runs in a fresh process, one at a time:

1. cold: nbyoc with an empty cache (``NBYOC_CACHE_DIR`` a new folder): the import of
   nbyoc, ``from_onnx``, ``compile`` and the first call, wall and CPU time (CPU of the
   process and of its children, the C compiler's included); then the median run time
   of ``--runs`` calls. A compile still running after ``--timeout`` seconds is stopped
   and recorded as longer than that;
2. warm: the same, in a second process with the cache the first one filled; its
   table shows ``from_onnx`` + ``compile`` (what a peer's "create" measures) and then
   the first call (one inference, most of it the model's own work);
   resized: the same again with every input's first axis one longer (batch 2 for 1):
   the model's layers at other sizes, which per-structure stage functions load from
   the cache (a second model whose layers the cache has seen);
   1 thread (unless ``--no-one-thread``): the median run with ``NUMBA_NUM_THREADS=1``,
   against the cold phase's on every core: what the other cores buy;
   profile (unless ``--no-profile``): ``fn.profile`` in that cache, and its five slowest
   rows (regions and host ops) and stages inside the regions (each run alone) in a
   table: where a model's time goes;
3. ONNX Runtime (its default session options, as a user runs it): session creation
   and the median run; in their own processes, after nbyoc's, since ONNX Runtime's
   threads spin on after a run; with ``--ort-disabled`` also with its graph
   optimisations off (``ort-disabled``: the graph computed as written);
4. OpenVINO, if ``openvino`` is importable: ``read_model`` + ``compile_model`` on the
   CPU, and the median run;
5. the check: each result held against the float64 truth as the tests hold it
   (``real_models.accuracy``), and its largest difference from ONNX Runtime; and a
   last table, each result's largest difference from each ONNX Runtime session run
   ("exact" when bit for bit the same).

``--qdq float,integer`` measures each backend once per reading of a quantised model's
QDQ products (``from_onnx(..., qdq=...)``), as columns ``llvm qdq=float`` and so on;
without it ``from_onnx``'s default is used.

It prints a markdown table and writes the JSON (``--json``). Models nbyoc refuses are
listed with the reason and not run.
"""

from __future__ import annotations

import time

START = time.perf_counter()  # before the imports: they are part of a cold start

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tests import real_models  # noqa: E402
from tests.real_models import MODELS  # noqa: E402

#: The longest a timed run phase may take (it stops after fewer runs, at least 3).
RUN_BUDGET_S = 30.0
WARM_CALLS = 3
#: The profile phase: calls per step's median, and the slowest rows kept per model.
PROFILE_REPEAT, PROFILE_ROWS = 10, 5


def cpu_s() -> float:
    """CPU time of this process and of its waited-for children (cc, ...)."""
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def median_run_ms(call, runs: int) -> tuple[float, int]:
    for _ in range(WARM_CALLS):
        call()
    times = []
    began = time.perf_counter()
    while len(times) < runs and (len(times) < 3 or time.perf_counter() - began < RUN_BUDGET_S):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times), len(times)


# -- the child processes: each writes its report as JSON into --report, stage by stage


def child_nbyoc(args, report: dict, save) -> None:
    import nbyoc

    report["import_s"] = time.perf_counter() - START
    model = MODELS[args.model]
    if args.resized:
        longer = {n: dataclasses.replace(i, shape=(i.shape[0] + 1, *i.shape[1:]))
                  for n, i in model.inputs.items()}  # fmt: skip
        model = dataclasses.replace(model, inputs=longer)
    data = real_models.fetch(args.model)
    inputs = list(model.sample(real_models.SEED).values())
    began, cpu_began = time.perf_counter(), cpu_s()
    qdq = {"qdq": args.qdq} if args.qdq else {}
    f = nbyoc.from_onnx(data, shapes=model.shapes, constants=model.constants, **qdq)
    converted = time.perf_counter()
    fn = nbyoc.compile(f, backend=args.backend)
    compiled = time.perf_counter()
    outputs = fn(*inputs)
    done, cpu_done = time.perf_counter(), cpu_s()
    report.update(
        from_onnx_s=converted - began,
        compile_s=compiled - converted,
        first_call_s=done - compiled,
        # what a user waits for: from_onnx + compile + first call
        cold_s=done - began,
        # what a peer's "create" is: the model read and made ready to run
        prepare_s=compiled - began,
        cold_cpu_s=cpu_done - cpu_began,
        start_to_result_s=done - START,
        regions=len(fn.runtime_modules),
    )
    save(report, real_models.as_list(outputs))
    if args.profile:
        found = fn.profile(*inputs, repeat=max(3, min(args.runs, PROFILE_REPEAT)))
        report["profile"] = {"total_ms": found.total * 1e3,
                             "rows": [{"name": r.name, "backend": r.backend, "ops": r.ops,
                                       "ms": r.seconds * 1e3, "share": r.share}
                                      for r in found.rows[:PROFILE_ROWS]],
                             "stages": [{"name": r.region, "ops": r.what, "ms": r.seconds * 1e3,
                                         "share": r.share}
                                        for r in found.stages[:PROFILE_ROWS]]}  # fmt: skip
        save(report, None)
    elif args.runs:
        report["run_ms"], report["runs"] = median_run_ms(lambda: fn(*inputs), args.runs)
        save(report, None)


def measure_peer(args, report: dict, save, create, run) -> None:
    """A peer runtime's ``create()`` (session, compiled model) and ``run(created)``, timed."""
    report["import_s"] = time.perf_counter() - START
    began, cpu_began = time.perf_counter(), cpu_s()
    created = create()
    ready, cpu_ready = time.perf_counter(), cpu_s()
    outputs = run(created)
    report.update(
        compile_s=ready - began,
        compile_cpu_s=cpu_ready - cpu_began,
        first_call_s=time.perf_counter() - ready,
    )
    save(report, outputs)
    report["run_ms"], report["runs"] = median_run_ms(lambda: run(created), args.runs)
    save(report, None)


def child_ort(args, report: dict, save, optimised: bool = True) -> None:
    import onnxruntime

    model = MODELS[args.model]
    data = real_models.fetch(args.model)
    feeds = {**model.sample(real_models.SEED), **model.constants}
    report["version"] = onnxruntime.__version__
    options = onnxruntime.SessionOptions()
    if not optimised:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    measure_peer(
        args, report, save,
        lambda: onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"]),
        lambda session: session.run(None, feeds),
    )  # fmt: skip


def child_ort_disabled(args, report: dict, save) -> None:
    child_ort(args, report, save, optimised=False)


def child_openvino(args, report: dict, save) -> None:
    import openvino

    model = MODELS[args.model]
    real_models.fetch(args.model)
    feeds = model.sample(real_models.SEED)
    report["version"] = openvino.__version__

    def create():
        core = openvino.Core()
        read = core.read_model(str(model.path))
        read.reshape({name: list(i.shape) for name, i in model.inputs.items()})
        # f32: on a CPU with AMX or AVX512-BF16 OpenVINO would compute in bfloat16 (1e-3 off)
        return core.compile_model(read, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})

    def run(compiled):
        result = compiled([feeds[i.get_any_name()] for i in compiled.inputs])
        return [np.asarray(result[o]) for o in compiled.outputs]

    measure_peer(args, report, save, create, run)


CHILDREN = {"nbyoc": child_nbyoc, "ort": child_ort, "ort-disabled": child_ort_disabled,
            "openvino": child_openvino}  # fmt: skip


def child(args) -> None:
    report_path = Path(args.report)

    def save(report, outputs):
        if outputs is not None:
            np.savez(report_path.with_suffix(".npz"), *outputs)
        partial = report_path.with_suffix(".part")
        partial.write_text(json.dumps(report))
        os.replace(partial, report_path)

    report: dict = {}
    try:
        CHILDREN[args.child](args, report, save)
    except Exception as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        report["error"] = f"{type(e).__name__}: {' / '.join(lines)[:400]}"
        save(report, None)
        raise


# -- the parent: runs the children one at a time, then checks and tabulates


def run_child(
    kind: str,
    name: str,
    column: str,
    cache: Path | None,
    opts,
    work: Path,
    phase: str = "cold",
    threads: int | None = None,
) -> dict:
    """One measurement in a fresh process; its report, with its outputs under "outputs".
    ``column``: a backend, or a backend and a QDQ reading (``column_of``); ``threads``:
    the parallel loops' threads (``NUMBA_NUM_THREADS``), else every core."""
    backend, _, qdq = column.partition(" qdq=")
    tag = "-".join(p for p in (kind, name, backend, qdq, phase) if p)
    report_path = work / f"{tag}.json"
    command = [sys.executable, __file__, "--child", kind, "--model", name, "--backend", backend,
               "--runs", str(opts.runs), "--report", str(report_path)]  # fmt: skip
    if qdq:
        command += ["--qdq", qdq]
    if phase == "resized":
        command.append("--resized")
    if phase == "profile":
        command.append("--profile")
    env = dict(os.environ)
    # (this checkout's nbyoc in the child and in the compile workers it starts, which
    # import nbyoc by name: an installed copy would compile with another version)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if cache is not None:
        env["NBYOC_CACHE_DIR"] = str(cache)
    if threads is not None:
        env["NUMBA_NUM_THREADS"] = str(threads)
    began = time.perf_counter()
    errors = report_path.with_suffix(".stderr")
    with errors.open("w") as stderr:
        process = subprocess.Popen(command, env=env, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
    report: dict = {}
    try:
        while process.poll() is None:
            time.sleep(0.2)
            waited = time.perf_counter() - began
            compiled = report_path.exists()
            if (not compiled and waited > opts.timeout) or waited > opts.timeout + 4 * RUN_BUDGET_S:
                report["timeout_s"] = opts.timeout
                break
    finally:  # stopped, or this process interrupted: the child (its own session) goes too
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    stderr = errors.read_text()
    if report_path.exists():
        report.update(json.loads(report_path.read_text()))
    if process.returncode and "timeout_s" not in report and "error" not in report:
        report["error"] = stderr.strip().splitlines()[-1] if stderr.strip() else "crashed"
    outputs = report_path.with_suffix(".npz")
    if outputs.exists():
        with np.load(outputs) as saved:
            report["outputs"] = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    print(f"  {tag}: {summary(report)}", flush=True)
    return report


def summary(report: dict) -> str:
    if "timeout_s" in report and "cold_s" not in report and "compile_s" not in report:
        return f"> {report['timeout_s']} s (stopped)"
    if "error" in report:
        return f"error: {report['error']}"
    parts = [f"{k} {report[k]:.2f}" for k in ("cold_s", "compile_s", "run_ms") if k in report]
    return ", ".join(parts)


def check(name: str, outputs: list | None) -> dict | None:
    """The result against the truth, as the tests hold it (None: nothing to check)."""
    if not outputs:
        return None
    ref = real_models.reference(name)
    if len(outputs) != len(ref.ort):
        return {"ok": False, "why": f"{len(outputs)} outputs, ONNX Runtime gives {len(ref.ort)}"}
    accs = [real_models.accuracy(*o, ref.quantised_tolerance)
            for o in zip(outputs, ref.ort, ref.host, ref.truth)]  # fmt: skip
    return {
        "ok": all(a.ok for a in accs),
        "max_abs_diff_vs_ort": max(a.from_ort for a in accs),
        "worst": str(max(accs, key=lambda a: a.error / max(a.allowed, 1e-300))),
    }


def column_of(backend: str, qdq: str) -> str:
    """A table column: the backend, and the QDQ reading when one is asked for.

    >>> column_of("llvm", "integer"), column_of("llvm", "")
    ('llvm qdq=integer', 'llvm')
    """
    return f"{backend} qdq={qdq}" if qdq else backend


def against_peers(outputs: list | None, peers: dict) -> dict:
    """The largest difference of ``outputs`` from each ONNX Runtime session's (0: the same
    bit for bit); None for a session whose outputs do not compare (another count,
    shape or dtype)."""
    found = {}
    for peer, rep in peers.items():
        theirs = rep.get("outputs")
        if not outputs or not theirs or not peer.startswith("ort"):
            continue
        if len(theirs) != len(outputs) or any(
            (a.shape, a.dtype) != (b.shape, b.dtype) for a, b in zip(outputs, theirs)
        ):
            found[peer] = None
            continue
        found[peer] = max(
            (float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
             if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc") else 0.0)
            for a, b in zip(outputs, theirs)
        )  # fmt: skip
    return found


def fmt_diff(diff) -> str:
    return "-" if diff is None else "exact" if diff == 0 else f"{diff:.2g}"


def fmt_s(report: dict | None, key: str = "cold_s") -> str:
    if not report:
        return "-"
    if key not in report:
        if "timeout_s" in report:
            return f">{report['timeout_s']:.0f} s"
        if FIXED_SHAPE in report.get("error", ""):
            return "fixed shape"  # (the model's input has no other size: nothing to resize)
        return "error" if "error" in report else "-"
    return f"{report[key]:.1f} s" if report[key] >= 1 else f"{report[key] * 1e3:.0f} ms"


#: What ``from_onnx`` says when given a shape the model's input cannot take.
FIXED_SHAPE = "does not fit the model's input"


def fmt_warm(report: dict | None) -> str:
    """A warm start: the model read and compiled (as a peer's "create"), then its first
    run (one inference, which a real model's own work dominates)."""
    if not report or "prepare_s" not in report:
        return fmt_s(report)
    return f"{fmt_s(report, 'prepare_s')} + run {report['first_call_s'] * 1e3:.0f} ms"


def profile_row_text(row: dict) -> str:
    """One of ``fn.profile``'s rows in a table cell: its time, share and what it runs.

    >>> profile_row_text({"name": "@llvm_3", "backend": "llvm", "ops": "conv2d, relu",
    ...                   "ms": 1.234, "share": 0.25})
    '@llvm_3 1.23 ms (25%): conv2d, relu'
    """
    ops = row["ops"] if len(row["ops"]) <= 60 else row["ops"][:57] + "..."
    return f"{row['name']} {row['ms']:.3g} ms ({row['share']:.0%}): {ops}"


def markdown(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def tables(results: dict, backends: list[str], peers: list[str]) -> str:
    """Three markdown tables: the models, compile times, run times and accuracy; a
    fourth, each result's largest difference from each ONNX Runtime session's, when
    there are some. ``backends``: the columns (``column_of``)."""
    models = [[name, MODELS[name].family, MODELS[name].wheel, f"{MODELS[name].size / 1e6:.1f}",
               str(r["nodes"]), r["refused"] or ""] for name, r in results.items()]  # fmt: skip
    compiles, runs = [], []
    for name, r in results.items():
        row = [name]
        for b in backends:
            cold = r["cold"].get(b)
            cpu = f" (cpu {cold['cold_cpu_s']:.0f} s)" if cold and "cold_cpu_s" in cold else ""
            row.append(fmt_s(cold) + cpu)
        row += [fmt_warm(r["warm"].get(b)) for b in backends]
        row += [fmt_s(r["resized"].get(b)) for b in backends]
        compiles.append(row + [fmt_s(r["peers"].get(p), "compile_s") for p in peers])
        row = [name]
        for c in [*backends, *peers]:
            rep = r["cold"].get(c) or r["peers"].get(c)
            run = f"{rep['run_ms']:.3g} ms" if rep and "run_ms" in rep else "-"
            verdict = r["checks"].get(c)
            if verdict is not None and "max_abs_diff_vs_ort" in verdict:
                ok = "ok" if verdict["ok"] else "WRONG"
                run += f", {ok} {verdict['max_abs_diff_vs_ort']:.2g}"
            elif verdict is not None:
                run += f", WRONG: {verdict['why']}"
            row.append(run)
        runs.append(row)
    scaling = []
    for name, r in results.items():
        row = [name]
        for b in backends:
            one, every = r.get("one_thread", {}).get(b), r["cold"].get(b)
            if one and every and "run_ms" in one and "run_ms" in every:
                speedup = one["run_ms"] / every["run_ms"]
                row.append(f"{one['run_ms']:.3g} ms / {every['run_ms']:.3g} ms = {speedup:.2f}x")
            else:
                row.append("-")
        scaling.append(row)
    slowest = []
    for name, r in results.items():
        for b in backends:
            found = r.get("profile", {}).get(b, {}).get("profile")
            if found:
                steps = "<br>".join(profile_row_text(row) for row in found["rows"])
                inside = "<br>".join(profile_row_text(row) for row in found.get("stages", []))
                slowest.append([name, b, f"{found['total_ms']:.3g} ms", steps, inside or "-"])
    ort = [p for p in peers if p.startswith("ort")]
    exact = [[name, *(fmt_diff(r.get("vs_ort", {}).get(c, {}).get(p)) for c in backends
                      for p in ort)] for name, r in results.items()]  # fmt: skip
    return "\n\n".join([
        markdown(["model", "family", "wheel", "MB", "ONNX nodes", "nbyoc refuses"], models),
        markdown(["model", *(f"{b} cold" for b in backends), *(f"{b} warm" for b in backends),
                  *(f"{b} resized" for b in backends), *(f"{p} create" for p in peers)],
                 compiles),
        markdown(["model (run: median; check against the truth, max abs diff from ORT)",
                  *[*backends, *peers]], runs),
        *([markdown(["model (run: 1 thread / every core = speedup)",
                     *backends], scaling)]
          if any(r.get("one_thread") for r in results.values()) else []),
        *([markdown(["model", "backend", "profiled call",
                     f"where the time goes: the {PROFILE_ROWS} slowest steps (fn.profile)",
                     f"inside the regions: the {PROFILE_ROWS} slowest stages, each alone"],
                    slowest)] if slowest else []),
        *([markdown(["model (max abs diff from ONNX Runtime's result; exact: bit for bit)",
                     *(f"{c} vs {p}" for c in backends for p in ort)], exact)] if ort else []),
    ])  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="llvm,csource", help="comma-separated")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    parser.add_argument("--runs", type=int, default=20, help="timed runs (median)")
    parser.add_argument("--timeout", type=float, default=400.0, help="compile limit, s")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-cache runs")
    parser.add_argument("--no-peers", action="store_true", help="skip ONNX Runtime, OpenVINO")
    parser.add_argument("--no-one-thread", action="store_true",
                        help="skip the run on one thread (the scaling column)")  # fmt: skip
    parser.add_argument("--no-check", action="store_true", help="skip the accuracy check")
    parser.add_argument("--no-profile", action="store_true",
                        help="skip fn.profile's five slowest rows per model")  # fmt: skip
    parser.add_argument("--qdq", default="", help="QDQ readings (float,integer); default: "
                        "from_onnx's own")  # fmt: skip
    parser.add_argument("--ort-disabled", action="store_true",
                        help="also ONNX Runtime with its graph optimisations off")  # fmt: skip
    parser.add_argument("--json", default="real_models.json", help="where to write results")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    parser.add_argument("--resized", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.child:
        child(opts)
        return

    import onnx

    backends = [column_of(b, q) for b in opts.backends.split(",")
                for q in (opts.qdq.split(",") if opts.qdq else [""])]  # fmt: skip
    names = opts.models.split(",")
    unknown = set(names) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; the set: {', '.join(MODELS)}")
    peers = [] if opts.no_peers else ["ort", *(["ort-disabled"] if opts.ort_disabled else [])]
    notes = []
    if not opts.no_peers:
        import importlib.util

        if importlib.util.find_spec("openvino"):
            peers.append("openvino")
        else:
            notes.append("OpenVINO is not installed: no OpenVINO column (pip install openvino)")
    results: dict = {}
    for name in names:
        data = real_models.fetch(name)
        m = MODELS[name]
        nodes = len(onnx.load_from_string(data).graph.node)
        results[name] = {"nodes": nodes, "refused": m.refused, "cold": {}, "warm": {},
                         "resized": {}, "one_thread": {}, "profile": {}, "peers": {},
                         "checks": {}, "vs_ort": {}}  # fmt: skip
    runnable = [n for n in names if not MODELS[n].refused]
    work = Path(tempfile.mkdtemp(prefix="nbyoc-real-models-"))
    try:
        caches = {}
        print("cold (fresh process, empty cache):", flush=True)
        for name in runnable:
            for b in backends:
                caches[name, b] = work / f"cache-{name}-{b.replace(' qdq=', '-')}"
                caches[name, b].mkdir()
                results[name]["cold"][b] = run_child("nbyoc", name, b, caches[name, b], opts, work)
        if not opts.no_warm:
            runs, opts.runs = opts.runs, 0
            for phase, what in (
                ("warm", "the cache the cold one filled"),
                ("resized", "that cache, each input's first axis + 1"),
            ):
                print(f"{phase} (fresh process, {what}):", flush=True)
                for name in runnable:
                    for b in backends:
                        if "cold_s" in results[name]["cold"][b]:
                            rep = run_child("nbyoc", name, b, caches[name, b], opts, work, phase)
                            rep.pop("outputs", None)
                            results[name][phase][b] = rep
            opts.runs = runs
        if not opts.no_one_thread and (os.cpu_count() or 1) > 1:
            # What the second core buys: the same model on one thread (its code may
            # differ: task counts follow the threads, so this phase compiles afresh).
            print("1 thread (fresh process, NUMBA_NUM_THREADS=1):", flush=True)
            for name in runnable:
                for b in backends:
                    if "cold_s" in results[name]["cold"][b]:
                        rep = run_child("nbyoc", name, b, caches[name, b], opts, work,
                                        "1-thread", threads=1)  # fmt: skip
                        rep.pop("outputs", None)
                        results[name]["one_thread"][b] = rep
        if not opts.no_profile:
            print("profile (fresh process, the cold one's cache, fn.profile):", flush=True)
            for name in runnable:
                for b in backends:
                    if "cold_s" in results[name]["cold"][b]:
                        rep = run_child("nbyoc", name, b, caches[name, b], opts, work, "profile")
                        rep.pop("outputs", None)
                        results[name]["profile"][b] = rep
        for peer in peers:
            print(f"{peer} (fresh process):", flush=True)
            for name in names:  # refused ones too: what the peer makes of them
                results[name]["peers"][peer] = run_child(peer, name, "", None, opts, work)
        for name in runnable:
            for b in backends:
                outputs = results[name]["cold"][b].get("outputs")
                results[name]["vs_ort"][b] = against_peers(outputs, results[name]["peers"])
        if not opts.no_check:
            print("checking against the float64 truth:", flush=True)
            for name in runnable:
                for c in [*backends, *peers]:
                    rep = results[name]["cold"].get(c) or results[name]["peers"].get(c)
                    verdict = check(name, rep.pop("outputs", None) if rep else None)
                    if verdict is not None:
                        results[name]["checks"][c] = verdict
                        if not verdict["ok"]:
                            print(f"  {name} on {c}: {verdict.get('worst', verdict.get('why'))}")
        for r in results.values():  # nothing but numbers and text in the JSON
            for group in ("cold", "warm", "resized", "one_thread", "profile", "peers"):
                for rep in r[group].values():
                    rep.pop("outputs", None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(tables(results, backends, peers))
    for note in notes:
        print(f"\n{note}")
    machine = {"cpus": os.cpu_count(), "python": sys.version.split()[0],
               "load_average_at_end": os.getloadavg()}  # fmt: skip
    out = {"machine": machine, "backends": backends, "peers": peers, "notes": notes,
           "runs": opts.runs, "timeout_s": opts.timeout, "models": results}  # fmt: skip
    Path(opts.json).write_text(json.dumps(out, indent=1, default=float))
    print(f"\nwrote {opts.json}")


if __name__ == "__main__":
    main()
