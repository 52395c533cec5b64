"""Run times of one ONNX recurrent layer (LSTM, GRU or RNN) on nbyoc's backends and on
ONNX Runtime, each in a fresh process: the median of ``--runs`` warm calls, and the
first call with an empty cache (compile included) or with the cache filled.

    python bench/recurrent.py [--op LSTM] [--seq 100] [--batch 8] [--input 64]
                              [--hidden 128] [--direction forward] [--runs 50]
                              [--backends llvm,host,ort]

The README's recurrent numbers come from its defaults (and ``--seq 16 --batch 1
--input 512 --hidden 512 --direction bidirectional``, ddddocr's layer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def layer(op: str, seq: int, batch: int, inputs: int, hidden: int, direction: str):
    """The model (bytes) of one recurrent layer with seeded weights, and its input."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    d, g = (2 if direction == "bidirectional" else 1), GATES[op]
    weights = {
        "W": rng.uniform(-1, 1, (d, g * hidden, inputs)) / np.sqrt(hidden),
        "R": rng.uniform(-1, 1, (d, g * hidden, hidden)) / np.sqrt(hidden),
        "B": rng.uniform(-1, 1, (d, 2 * g * hidden)) / np.sqrt(hidden),
    }
    outputs = ["Y", "Y_h", "Y_c"][: 3 if op == "LSTM" else 2]
    node = helper.make_node(op, ["X", *weights], outputs, hidden_size=hidden, direction=direction)
    graph = helper.make_graph(
        [node], "recurrent",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, batch, inputs])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        [numpy_helper.from_array(w.astype(np.float32), name) for name, w in weights.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    x = rng.standard_normal((seq, batch, inputs)).astype(np.float32)
    return model.SerializeToString(), x


def measure(args) -> dict:
    """This process's measurement of ``args.backend`` (a child's job)."""
    data, x = layer(args.op, args.seq, args.batch, args.input, args.hidden, args.direction)
    began = time.perf_counter()
    if args.backend == "ort":
        import onnxruntime

        session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
        call = lambda: session.run(None, {"X": x})  # noqa: E731
    else:
        import nbyoc

        fn = nbyoc.compile(nbyoc.from_onnx(data), args.backend)
        call = lambda: fn(x)  # noqa: E731
    call()
    first = time.perf_counter() - began
    for _ in range(5):
        call()
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return {"first_call_s": first, "run_ms": statistics.median(times) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="LSTM", choices=sorted(GATES))
    for name, default in (("seq", 100), ("batch", 8), ("input", 64), ("hidden", 128)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--direction", default="forward")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--backends", default="llvm,host,ort")
    parser.add_argument("--backend", help=argparse.SUPPRESS)  # (a child's)
    args = parser.parse_args()
    if args.backend:
        print(json.dumps(measure(args)))
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NBYOC_PROGRESS": "0"}
    report = {}
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory() as cache:
            runs = []
            for _ in range(2):  # an empty cache, then the one the first run filled
                command = [sys.executable, __file__, *sys.argv[1:], "--backend", backend]
                done = subprocess.run(command, env={**env, "NBYOC_CACHE_DIR": cache},
                                      capture_output=True, text=True, check=True)  # fmt: skip
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        report[backend] = {
            "run_ms": round(runs[1]["run_ms"], 4),  # (the warm process's median)
            "cold_first_call_s": round(runs[0]["first_call_s"], 3),
            "warm_first_call_s": round(runs[1]["first_call_s"], 3),
        }
        print(backend, report[backend], flush=True)


if __name__ == "__main__":
    main()
