"""Strided convs of the conv sweep (bench/conv_layers.py) compiled two ways in ONE
process, their gathered columns (``conv._im2col``, as before) and stride phases over
wide rows (``conv._wide_tiled_conv``), timed in turn beside ONNX Runtime (without
spinning threads, which would take the cores from the next call), so that load falls
on all three alike.

    python bench/strided_side_by_side.py [--layers a,b] [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import onnx
import onnxruntime
from conv_layers import LAYERS, onnx_model, sample

import nbyoc
from nbyoc.codegen.llvm import conv
from nbyoc.runtime.threads import start_threads

DEFAULT = "audio-3x3s2-32to64,resnet18-stem-7x7s2,mobilenetv2-stem-3x3s2,resnet18-3x3s2-128"


def gathered(g) -> bool:
    """The choice before stride phases: wide rows only at unit strides."""
    return all(s == 1 for s in g.strides) and not g.pointwise()


def compile_way(path: Path, wide_strided: bool):
    original = conv._runs_wide
    if not wide_strided:
        conv._runs_wide = gathered
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
        want = calls["ort"](x)
        for key in ("before", "after"):
            got = np.asarray(calls[key](x))
            scale = np.abs(want).max()
            assert np.abs(got - want).max() <= 1e-4 * scale, (name, key)
        times = {key: [] for key in calls}
        for _ in range(3):
            for call in calls.values():
                call(x)
        for _ in range(args.runs):
            for key, call in calls.items():
                t = time.perf_counter()
                call(x)
                times[key].append(1e3 * (time.perf_counter() - t))
        m = {key: statistics.median(v) for key, v in times.items()}
        print(
            f"{name} | {m['before']:.3f} | {m['after']:.3f} | {m['ort']:.3f} | "
            f"{m['before'] / m['after']:.2f}x | {m['ort'] / m['after']:.2f}"
        )


if __name__ == "__main__":
    main()
