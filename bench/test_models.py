"""Whole ONNX models, side by side in one process: ONNX Runtime with its default
settings (what a user of the model would otherwise run), the transformer layers
written in jax.numpy under jax.jit (when JAX is installed), nbyoc's host executor
(NumPy op by op) and nbyoc on llvm and csource.

The models are the ONNX issue's (tests/frontend/models.py) at batch sizes where the
work is more than call overhead, an attention block (a transformer encoder layer at
256 tokens of width 256, four heads), and the pretrained PP-OCR text-direction
classifier when the tests have cached it (``NBYOC_TEST_MODELS``, see
tests/real_models.py; skipped otherwise). They run at their native
size only (a ``--bench-quick`` run: the tests' small sizes, without the attention
block and the pretrained model); ``extra_info`` marks them kind "run" with no
NumPy case, so the report's table against ONNX Runtime holds them.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

import nbyoc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
onnx = pytest.importorskip("onnx", reason="the model benchmarks need onnx (pip install '.[bench]')")
import onnx_graphs  # noqa: E402

from tests import real_models  # noqa: E402
from tests.frontend import models  # noqa: E402

#: model -> (builder, input shape)
MODELS = {
    "mlp": (models.mlp, (4096, 16)),
    "cnn": (models.cnn, (64, 3, 16, 16)),
    "transformer": (models.transformer, (64, 8, 16)),
    "attention": (functools.partial(models.transformer, 256, 256, 4), (4, 256, 256)),
}
PRETRAINED = "ppocr-cls"  # of the real-model set (tests/real_models.py)
CASES = ["onnxruntime", "jax.jit", "host", "llvm", "csource"]
#: The models written out in jax.numpy (``jax_transformer``), by name -> heads.
JAX_MODELS = {"transformer": 2, "attention": 4}


def jax_transformer(weights: dict[str, np.ndarray], heads: int):
    """tests/frontend/models.py's transformer layer written in ``jax.numpy`` with the
    model's weights, under ``jax.jit``: pre-norm attention and a residual, then a
    pre-norm GELU (erf) MLP and a residual, as a JAX user writes it."""
    import jax
    import jax.numpy as jnp

    w = {name: jnp.asarray(value) for name, value in weights.items()}

    def norm(x, scale, shift):
        centred = x - x.mean(axis=-1, keepdims=True)
        var = (centred * centred).mean(axis=-1, keepdims=True)
        return centred / jnp.sqrt(var + 1e-5) * scale + shift

    def layer(x):
        n, t, width = x.shape
        dh = width // heads
        normed = norm(x, w["ln1_g"], w["ln1_b"])

        def split(name):
            return (normed @ w[name]).reshape(n, t, heads, dh).transpose(0, 2, 1, 3)

        q, k, v = split("wq"), split("wk"), split("wv")
        probs = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(dh)), axis=-1)
        merged = (probs @ v).transpose(0, 2, 1, 3).reshape(n, t, width)
        h = x + merged @ w["wo"]
        up = norm(h, w["ln2_g"], w["ln2_b"]) @ w["w_up"] + w["b_up"]
        return h + jax.nn.gelu(up, approximate=False) @ w["w_down"]

    compiled = jax.jit(layer)
    return lambda x: np.asarray(compiled(x).block_until_ready())


def _pretrained():
    path = real_models.MODELS[PRETRAINED].path
    if not path.exists():
        pytest.skip(f"{PRETRAINED} is not cached: run tests/frontend/test_real_models.py once")
    return onnx.load_from_string(path.read_bytes())


@functools.lru_cache(maxsize=1)
def prepared(name: str, quick: bool):
    if name == "ppocr_cls":
        if quick:
            pytest.skip("a quick run leaves out the pretrained model (its llvm compile is long)")
        model, shape = _pretrained(), (8, 3, 48, 192)
    elif quick:  # the tests' sizes
        if name not in models.MODELS:
            pytest.skip(f"a quick run leaves out {name}")
        build, shape = models.MODELS[name]
        model = build()
    else:
        build, shape = MODELS[name]
        model = build()
    x = np.random.default_rng(3).uniform(-1, 1, shape).astype(np.float32)
    expected = onnx_graphs.session(model)(x)
    return model, shape, x, expected


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", [*MODELS, "ppocr_cls"])
def test_model(benchmark, warm, request, name, case):
    model, shape, x, expected = prepared(name, request.config.getoption("--bench-quick"))
    if case == "onnxruntime":
        fn = onnx_graphs.session(model)
    elif case == "jax.jit":
        if name not in JAX_MODELS:
            pytest.skip(f"{name} has no jax.numpy version")
        pytest.importorskip("jax", reason="jax.jit is measured when JAX is installed")
        fn = jax_transformer(onnx_graphs.weights(model), JAX_MODELS[name])
    else:
        fn = nbyoc.compile(nbyoc.from_onnx(model, shapes={"x": shape}), backend=case)
    # Scaled: the attention block's activations reach the hundreds, and ONNX Runtime's
    # fused kernels sum in another order.
    atol = 1e-5 * float(np.abs(expected).max())
    np.testing.assert_allclose(fn(x), expected, rtol=1e-3, atol=atol)
    label = "x".join(map(str, shape))
    benchmark.group = f"model {name} {label}"
    benchmark.extra_info.update(kind="run", graph=f"model {name}", shape=label, case=case)
    warm(fn, x)
    benchmark(fn, x)
