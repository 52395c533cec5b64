"""``nbyoc run MODEL.onnx``: an ONNX model imported, compiled and run on random inputs
(seeded, by each input's dtype) or on arrays from .npy files; each output's name, shape
and dtype, the import, compile and first-call times and the median time of a call, and
with ``--check`` each output against ONNX Runtime's on the same inputs
(``against_onnxruntime``: exit status 1 when one lies beyond its tolerance).

>>> import argparse
>>> commands = argparse.ArgumentParser(prog="nbyoc").add_subparsers()
>>> add_parser(commands)
>>> args = commands.choices["run"].parse_args(["m.onnx", "--input", "x=x.npy", "--check"])
>>> args.input, args.seed, args.repeat, args.check
(['x=x.npy'], 0, 10, True)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import NbyocError
from ..runtime.report_text import seconds_text, text_table
from .models import (
    Declared,
    add_model_arguments,
    check_shapes,
    declared,
    fits,
    load_onnx,
    parse_shapes,
    read_model,
    require_fixed_shapes,
    shape_text,
)


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="compile an ONNX model and run it on random or given inputs, timed, "
        "optionally checked against ONNX Runtime",
    )
    add_model_arguments(run)
    run.add_argument(
        "--input", action="append", metavar="NAME=FILE.npy",
        help="an input's values from a .npy file (repeatable; its shape fixes the input's "
        "dynamic dims); the other inputs are random",
    )  # fmt: skip
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    run.add_argument("--repeat", type=int, default=10, help="timed calls (default 10)")
    run.add_argument(
        "--check", action="store_true",
        help="run ONNX Runtime on the same inputs and compare each output with nbyoc's "
        "(exit status 1 when one differs beyond the tolerance)",
    )  # fmt: skip
    run.add_argument(
        "--tolerance", type=float, default=None, metavar="FRACTION",
        help="with --check: the difference allowed, as a fraction of each output's "
        "largest magnitude (default 1e-3; 32 ulps of a dtype narrower than float32)",
    )  # fmt: skip
    run.add_argument("--save-outputs", metavar="DIR", help="write each output to DIR/NAME.npy")
    run.add_argument("--json", action="store_true", help="print the results as JSON")
    run.set_defaults(run=run_command)


def run_command(args: argparse.Namespace) -> int:
    import nbyoc
    from nbyoc.codegen.registry import check_backend

    from .against_onnxruntime import require_onnxruntime

    backends = args.backend or ["llvm"]
    for backend in backends:
        check_backend(backend)
    if args.repeat < 1:
        raise NbyocError(f"run: repeat must be a positive int, got {args.repeat}")
    if args.tolerance is not None and not args.tolerance >= 0:
        raise NbyocError(f"--tolerance takes a fraction >= 0, got {args.tolerance}")
    if args.check:
        require_onnxruntime()  # (before the compile: say at once what is missing)
    shapes = parse_shapes(args.shapes)
    model = load_onnx(args.model)
    wanted, produced = declared(model)
    check_shapes(shapes, wanted)
    given = read_inputs(args.input, wanted)
    start = time.perf_counter()
    func = read_model(args.model, _shapes(shapes, given), model)
    imported = time.perf_counter() - start
    require_fixed_shapes(func)
    arrays = model_inputs(func, wanted, given, args.seed)
    start = time.perf_counter()
    fn = nbyoc.compile(func, backends)
    compiled = time.perf_counter() - start
    outputs, first, times = _timed_calls(fn, arrays, args.repeat)
    result: dict[str, Any] = {
        "model": args.model, "backends": backends,
        "inputs": [
            {"name": w.name, "shape": list(a.shape), "dtype": str(a.dtype),
             "values": given[w.name][1] if w.name in given else f"random (seed {args.seed})"}
            for w, a in zip(wanted, arrays)
        ],
        "outputs": [{"name": p.name, "shape": list(o.shape), "dtype": str(o.dtype)}
                    for p, o in zip(produced, outputs)],
        "import_seconds": imported, "compile_seconds": compiled, "first_call_seconds": first,
        "call_seconds": statistics.median(times), "repeat": args.repeat,
    }  # fmt: skip
    if args.save_outputs:
        for row, path in zip(result["outputs"], save_outputs(args.save_outputs, produced, outputs)):
            row["saved"] = path
    ok = True
    if args.check:
        result["check"] = _check(args, wanted, produced, arrays, outputs)
        ok = result["check"]["ok"]
    print(json.dumps(result, indent=1) if args.json else _text(result))
    return 0 if ok else 1


def _timed_calls(
    fn: Any, arrays: list[np.ndarray], repeat: int
) -> tuple[list[np.ndarray], float, list[float]]:
    """The outputs of a first call of ``fn`` and its time (it may finish compiling
    lazily: a backend's first call builds or loads), then the time of ``repeat`` more."""
    start = time.perf_counter()
    outputs = _as_list(fn(*arrays))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*arrays)
        times.append(time.perf_counter() - start)
    return outputs, first, times


def read_inputs(
    items: list[str] | None, wanted: list[Declared]
) -> dict[str, tuple[np.ndarray, str]]:
    """``NAME=FILE.npy`` per item: graph input name -> (the array, the file), each
    checked against the input's declared rank, fixed dims and dtype."""
    by_name = {w.name: w for w in wanted}
    given = {}
    for item in items or []:
        name, _, file = item.partition("=")
        if not name or not file:
            raise NbyocError(f"--input takes NAME=FILE.npy, got {item!r}")
        if name not in by_name:
            raise NbyocError(f"--input {name}: the model has no input {name!r} "
                             f"(its inputs: {', '.join(by_name)})")  # fmt: skip
        array = _load_npy(name, file)
        _check_declared(name, file, array, by_name[name])
        given[name] = (array, file)
    return given


def _load_npy(name: str, file: str) -> np.ndarray:
    """The array in the .npy file ``file`` (never a pickle: a file of another kind is
    refused by its first bytes, before NumPy would fall back to unpickling it)."""
    try:
        with open(file, "rb") as stream:
            if stream.read(6) != b"\x93NUMPY":
                raise NbyocError(f"--input {name}: {file} is not a .npy file")
            stream.seek(0)
            return np.load(stream, allow_pickle=False)
    except (OSError, ValueError) as e:  # (missing, unreadable, object arrays)
        raise NbyocError(f"--input {name}: cannot read {file} as a .npy array: {e}") from None


def _check_declared(name: str, file: str, array: np.ndarray, wanted: Declared) -> None:
    if not fits(array.shape, wanted.shape):
        raise NbyocError(f"--input {name}: {file} holds shape {array.shape}; input {name!r} "
                         f"has shape {shape_text(wanted.shape)} (named dims are free)")  # fmt: skip
    if str(array.dtype) != wanted.dtype:
        raise NbyocError(f"--input {name}: {file} holds {array.dtype}; input {name!r} takes "
                         f"{wanted.dtype}")  # fmt: skip


def _shapes(
    shapes: dict[str, tuple[int, ...]], given: dict[str, Any]
) -> dict[str, tuple[int, ...]]:
    """``--shapes`` and the shapes of the arrays given, which must agree."""
    merged = dict(shapes)
    for name, (array, file) in given.items():
        if name in shapes and tuple(shapes[name]) != array.shape:
            raise NbyocError(f"--shapes {name} is {shapes[name]}, but {file} holds "
                             f"shape {array.shape}")  # fmt: skip
        merged[name] = array.shape
    return merged


def model_inputs(
    func: Any, wanted: list[Declared], given: dict[str, Any], seed: int
) -> list[np.ndarray]:
    """The arrays to call ``func`` with: the arrays given by graph input name, random
    ones for the rest (``nbyoc.testing.inputs.random_inputs``: small values of each
    input's dtype, seeded)."""
    from ..testing.inputs import random_inputs

    # (the function's parameters are the graph inputs that are not initializers, in order)
    assert len(func.params) == len(wanted), (func.params, wanted)
    random = random_inputs(func, seed)
    return [given[w.name][0] if w.name in given else r for w, r in zip(wanted, random)]


def save_outputs(folder: str, produced: list[Declared], outputs: list[np.ndarray]) -> list[str]:
    """Write each output to ``folder/NAME.npy`` (the output's name made a file name);
    the paths written."""
    from ..frontend.onnx.importer import identifiers

    directory = Path(folder)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, array in zip(identifiers([p.name for p in produced]), outputs):
        path = directory / f"{name}.npy"
        np.save(path, array, allow_pickle=False)
        paths.append(str(path))
    return paths


def _check(args: argparse.Namespace, wanted: list[Declared], produced: list[Declared],
           arrays: list[np.ndarray], outputs: list[np.ndarray]) -> dict[str, Any]:  # fmt: skip
    from .against_onnxruntime import TOLERANCE, compare, onnxruntime_outputs, runtime_name

    fraction = TOLERANCE if args.tolerance is None else args.tolerance
    theirs = onnxruntime_outputs(args.model, {w.name: a for w, a in zip(wanted, arrays)})
    rows = [compare(p.name, mine, other, fraction)
            for p, mine, other in zip(produced, outputs, theirs)]  # fmt: skip
    return {
        "against": runtime_name(), "tolerance": fraction, "ok": all(row.ok for row in rows),
        "outputs": [{**asdict(row), "shape": list(row.shape), "ok": row.ok} for row in rows],
    }  # fmt: skip


def _text(result: dict[str, Any]) -> str:
    lines = [
        f"{result['model']} on {', '.join(result['backends'])}: imported in "
        f"{seconds_text(result['import_seconds'])}, compiled in "
        f"{seconds_text(result['compile_seconds'])}, first call "
        f"{seconds_text(result['first_call_seconds'])}; a call takes "
        f"{seconds_text(result['call_seconds'])} (median of {result['repeat']})",
        "",
        text_table(["input", "shape", "dtype", "values"],
                   [[i["name"], shape_text(i["shape"]), i["dtype"], i["values"]]
                    for i in result["inputs"]]),
        "",
    ]  # fmt: skip
    saved = any("saved" in o for o in result["outputs"])
    header = ["output", "shape", "dtype", *(["saved to"] if saved else [])]
    rows = [[o["name"], shape_text(o["shape"]), o["dtype"], *([o["saved"]] if saved else [])]
            for o in result["outputs"]]  # fmt: skip
    lines.append(text_table(header, rows))
    if "check" in result:
        check = result["check"]
        lines += ["", f"against {check['against']} on the same inputs (tolerance: "
                  f"{check['tolerance']:g} of each output's largest magnitude)"]  # fmt: skip
        rows = [[o["name"], f"{o['max_abs_diff']:.3g}", f"{o['max_rel_diff']:.3g}",
                 f"{o['tolerance']:.3g}", str(o["beyond"]),
                 "ok" if o["ok"] else f"FAIL {o['error']}".strip()]
                for o in check["outputs"]]  # fmt: skip
        header = ["output", "max abs diff", "max rel diff", "tolerance", "beyond", "ok"]
        lines.append(text_table(header, rows))
        lines.append("check: " + ("ok" if check["ok"] else "FAILED"))
    return "\n".join(lines)


def _as_list(result: Any) -> list[np.ndarray]:
    return list(result) if isinstance(result, tuple) else [result]
