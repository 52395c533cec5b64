"""Strided convs of the conv sweep (bench/conv_layers.py) compiled two ways in ONE
process, their gathered columns (``conv._im2col``, as before) and stride phases over
wide rows (``conv._wide_tiled_conv``), timed in turn beside ONNX Runtime (without
spinning threads, which would take the cores from the next call), so that load falls
on all three alike. Wall time and the process's CPU time per call, medians.

    python bench/strided_side_by_side.py [--layers a,b] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# (no disk cache: each way's stage functions are compiled from its own text)
os.environ["NBYOC_CACHE"] = "0"

import numpy as np
import onnx
import onnxruntime
from conv_layers import LAYERS, onnx_model, sample

import nbyoc
from nbyoc.codegen.llvm import conv, module
from nbyoc.runtime.threads import start_threads
from nbyoc.runtime.tolerance import error_bounds

DEFAULT = "audio-3x3s2-32to64,resnet18-stem-7x7s2,mobilenetv2-stem-3x3s2,resnet18-3x3s2-128"


def gathered(g) -> bool:
    """The choice before stride phases: wide rows only at unit strides."""
    return all(s == 1 for s in g.strides) and not g.pointwise()


def compile_way(path: Path, wide_strided: bool):
    original = conv._runs_wide
    if not wide_strided:
        conv._runs_wide = gathered
    # (compiled kernels are kept in memory by the function's digest: the same graph
    # compiled the other way would be found there)
    module._LIVE.clear()
    module._RECENT.clear()
    try:
        return nbyoc.compile(nbyoc.from_onnx(str(path)), backend="llvm", strict=True)
    finally:
        conv._runs_wide = original


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", default=DEFAULT)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    start_threads()
    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    work = Path(tempfile.mkdtemp())
    print("layer | before ms | after ms | ORT ms | after/before | ORT/after (speed vs ORT)")
    for name in args.layers.split(","):
        layer = LAYERS[name]
        path = work / f"{name}.onnx"
        onnx.save(onnx_model(layer), str(path))
        x = sample(layer)
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        calls = {
            "before": compile_way(path, False),
            "after": compile_way(path, True),
            "ort": lambda x, session=session: session.run(None, {"x": x})[0],
        }
        sources = {key: calls[key].get_source() for key in ("before", "after")}
        assert "plane[ci, phase" in sources["after"] and sources["before"] != sources["after"]
        # Both within the first-order rounding bound of the exact result: within twice
        # it of each other (as bench/conv_sweep.py checks).
        want = calls["ort"](x).astype(np.float64)
        (bound,) = error_bounds(nbyoc.from_onnx(str(path)), [x])
        for key in ("before", "after"):
            got = np.asarray(calls[key](x), np.float64)
            assert (np.abs(got - want) <= 2 * np.asarray(bound)).all(), (name, key)
        times = {key: [] for key in calls}
        cpu = {key: [] for key in calls}
        for _ in range(3):
            for call in calls.values():
                call(x)
        for run in range(args.runs):
            # (each run in another order: the first call after another layer's finds its
            # caches cold, and the same one should not always pay for it)
            keys = list(calls)
            for key in keys[run % 3 :] + keys[: run % 3]:
                call = calls[key]
                t, c = time.perf_counter(), time.process_time()
                call(x)
                times[key].append(1e3 * (time.perf_counter() - t))
                cpu[key].append(1e3 * (time.process_time() - c))
        for label, values in (("wall", times), ("cpu", cpu)):
            m = {key: statistics.median(v) for key, v in values.items()}
            print(
                f"{name} {label} | {m['before']:.3f} | {m['after']:.3f} | {m['ort']:.3f} | "
                f"{m['before'] / m['after']:.2f}x | {m['ort'] / m['after']:.2f}"
            )


if __name__ == "__main__":
    main()
