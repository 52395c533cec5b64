"""Whole models against ONNX Runtime (graph optimisations off, as the oracle): an
MLP, a CNN and a transformer encoder block built with onnx.helper, on every backend
after a save -> load round trip. Real pretrained models (from wheels on PyPI) are in
test_real_models.py."""

import numpy as np
import pytest

import nbyoc

from ..helpers import reload
from ..real_models import ort_session
from .models import MODELS

BACKENDS = ["host", "llvm", "csource", "examplejson"]


def onnx_runtime(model, x: np.ndarray) -> np.ndarray:
    session = ort_session(model)
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
