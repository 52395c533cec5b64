"""Whole models against ONNX Runtime (graph optimisations off, as the oracle): an
MLP, a CNN and a transformer encoder block built with onnx.helper, on every backend
after a save -> load round trip; and a real pretrained model shipped inside a wheel
on the package registry (PP-OCR's text-direction classifier, a MobileNetV3 with
depthwise convs, batch norm, hard-sigmoid and clip), fetched once and cached."""

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import nbyoc

from ..helpers import reload
from .models import MODELS

BACKENDS = ["host", "llvm", "csource", "examplejson"]

#: The pretrained model: which wheel ships it, where inside, and its digest.
PRETRAINED_WHEEL = "rapidocr-onnxruntime==1.4.4"
PRETRAINED_MEMBER = "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"
PRETRAINED_SHA256 = "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"


def onnx_runtime(model, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, bytes) else model.SerializeToString()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_onnx_runtime(name, backend):
    build, shape = MODELS[name]
    model = build()
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    f = nbyoc.from_onnx(model, shapes={"x": shape})
    fn = reload(nbyoc.compile(f, backend=backend))
    if backend != "host":
        assert fn.runtime_modules  # something ran on the backend
    np.testing.assert_allclose(fn(x), onnx_runtime(model, x), rtol=1e-3, atol=1e-5)


@pytest.fixture(scope="session")
def pretrained(tmp_path_factory) -> bytes:
    """The pretrained model's bytes, from the wheel (downloaded once into
    NBYOC_TEST_MODELS, default ~/.cache/nbyoc-test-models); skipped when offline."""
    cache = Path(os.environ.get("NBYOC_TEST_MODELS", Path.home() / ".cache" / "nbyoc-test-models"))
    target = cache / Path(PRETRAINED_MEMBER).name
    if not target.exists():
        folder = tmp_path_factory.mktemp("wheel")
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder),
                   PRETRAINED_WHEEL]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip(f"could not download {PRETRAINED_WHEEL} in time (offline?)")
        wheels = list(folder.glob("*.whl"))
        if done.returncode or not wheels:
            pytest.skip(f"could not download {PRETRAINED_WHEEL} (offline?): {done.stderr[-300:]}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            data = wheel.read(PRETRAINED_MEMBER)
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        partial.write_bytes(data)
        os.replace(partial, target)
    data = target.read_bytes()
    assert hashlib.sha256(data).hexdigest() == PRETRAINED_SHA256, f"{target} is not the model"
    return data


@pytest.mark.parametrize(
    "backend",
    ["host", "csource", pytest.param("llvm", marks=pytest.mark.slow),
     pytest.param("examplejson", marks=pytest.mark.slow)],
)  # fmt: skip
def test_a_pretrained_model_matches_onnx_runtime(pretrained, backend):
    x = np.random.default_rng(8).uniform(-1, 1, (2, 3, 48, 192)).astype(np.float32)
    f = nbyoc.from_onnx(pretrained, shapes={"x": x.shape})
    convs = [n for n in nbyoc.ir.post_order([f.body]) if getattr(n, "op", None) is not None
             and str(n.op) == "Op(conv)"]  # fmt: skip
    assert len(convs) == 53  # the whole network came in
    fn = nbyoc.compile(f, backend=backend)
    want = onnx_runtime(pretrained, x)
    assert want.shape == (2, 2)
    np.testing.assert_allclose(fn(x), want, rtol=1e-3, atol=1e-5)
