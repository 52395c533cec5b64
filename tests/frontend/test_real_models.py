"""The real-model set (tests/real_models.py: pretrained models from wheels on PyPI)
against ONNX Runtime, on every backend: each backend's result and ONNX Runtime's
(graph optimisations off) are held against the float64 truth, the model run in
float64 on nbyoc's host (``real_models.accuracy`` says how: as accurate as the float32
results of ONNX Runtime and the host within a factor 4, a tolerance that follows from
the model's own rounding).

By default: the host on every model, csource on three small ones (CHEAP); llvm,
examplejson and the rest with --run-slow. A model nbyoc refuses, or a backend
recorded as failing on it, is a strict xfail: when a change makes it work the test
fails until its record in tests/real_models.py is updated.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import nbyoc
from nbyoc.errors import ModelImportError

from .. import real_models
from ..real_models import (
    BACKENDS,
    EPS32,
    MODELS,
    Unavailable,
    accuracy,
    as_list,
    fetch,
    reference,
)

#: models csource runs in the default slice: small, and among them depthwise convs,
#: hard-sigmoid, a conv STFT with pow and log, int32 inputs with equal, cast and tanh.
CHEAP = ("ppocr-cls", "oww-melspectrogram", "magika-v3")
#: ONNX op types -> the sums of products they become (every one must come in).
PRODUCTS = {"Conv": "conv", "ConvTranspose": "conv_transpose", "MatMul": "matmul", "Gemm": "gemm",
            "ConvInteger": "conv", "QLinearConv": "conv", "MatMulInteger": "matmul",
            "QLinearMatMul": "matmul", "LSTM": "lstm", "GRU": "gru", "RNN": "rnn",
            "DynamicQuantizeLSTM": "lstm"}  # fmt: skip


def model_bytes(name: str) -> bytes:
    try:
        return fetch(name)
    except Unavailable as e:
        pytest.skip(str(e))


def import_model(name: str) -> nbyoc.ir.Function:
    """``name`` as an nbyoc function; a refusal must be the recorded one."""
    model = MODELS[name]
    data = model_bytes(name)
    try:
        return nbyoc.from_onnx(data, shapes=model.shapes, constants=model.constants)
    except ModelImportError as e:
        # (the record holds the error's start: tests/real_models.py)
        assert str(e).startswith(model.refused), f"{name} is refused otherwise than recorded"
        raise


def products(graph: onnx.GraphProto) -> tuple[int, int]:
    """The fewest and the most sums of products (``PRODUCTS``) ``graph`` computes: its
    nodes', and of each If's branches the one with fewer, or more."""
    fewest = most = 0
    for node in graph.node:
        fewest += node.op_type in PRODUCTS
        most += node.op_type in PRODUCTS
        if node.op_type == "If":
            branches = [
                products(a.g) for a in node.attribute if a.type == onnx.AttributeProto.GRAPH
            ]
            fewest += min(b[0] for b in branches)
            most += max(b[1] for b in branches)
    return fewest, most


def cases(backends=BACKENDS, refused: bool = True) -> list:
    """One case per model and backend (``refused``: with the models nbyoc refuses, as
    strict xfails)."""
    params = []
    for name, model in MODELS.items():
        if model.refused and not refused:
            continue
        for backend in backends:
            marks = []
            if backend != "host" and not (backend == "csource" and name in CHEAP):
                marks.append(pytest.mark.slow)
            if model.refused:
                marks.append(pytest.mark.xfail(raises=ModelImportError, strict=True,
                                               reason=model.refused))  # fmt: skip
            elif backend in model.failures:
                marks.append(pytest.mark.xfail(strict=True, reason=model.failures[backend]))
            params.append(pytest.param(name, backend, marks=marks, id=f"{name}-{backend}"))
    return params


@pytest.mark.parametrize(("name", "backend"), cases())
def test_real_model_matches_onnx_runtime(name, backend, tmp_path):
    """The model imported, compiled for ``backend``, saved and loaded again, against
    ONNX Runtime (the host: its own result, and that of its saved executable)."""
    f = import_model(name)
    ref = reference(name)
    fn = nbyoc.compile(f, backend=backend)
    if backend == "host":  # the host's result is the reference's own
        graph = onnx.load_from_string(model_bytes(name)).graph
        calls = [n for n in nbyoc.ir.post_order([f.body]) if isinstance(n, nbyoc.ir.Call)]
        fewest, most = products(graph)
        # the whole network came in (of an If, one branch)
        assert fewest <= sum(c.op.name in PRODUCTS.values() for c in calls) <= most
    else:
        assert fn.runtime_modules  # something ran on the backend
    fn.save(tmp_path / "model.nbyoc")
    got = as_list(nbyoc.load(tmp_path / "model.nbyoc")(*ref.inputs))
    if backend == "host":
        for mine, theirs in zip(got, ref.host):
            np.testing.assert_array_equal(mine, theirs)
    assert len(got) == len(ref.ort)
    for i, (out, ort, host, truth) in enumerate(zip(got, ref.ort, ref.host, ref.truth)):
        what = f"{name} on {backend}, output {i}"
        assert (out.dtype, out.shape) == (ort.dtype, ort.shape), what
        if out.dtype.kind != "f":
            np.testing.assert_array_equal(out, ort, err_msg=what)
            continue
        acc = accuracy(out, ort, host, truth, ref.quantised_tolerance)
        assert acc.truth_agrees, f"{what}: nbyoc's float64 reading is not ONNX Runtime's: {acc}"
        assert acc.ok, f"{what}: {acc}"


def test_the_text_detector_runs_no_op_on_the_host_on_llvm():
    """PP-OCRv4's detector upsamples with conv_transpose: on llvm it runs as phase convs
    (``transform.conv_transpose``), so the whole model is llvm's."""
    report = nbyoc.explain(import_model("ppocrv4-det"), backend="llvm")
    assert [row.op for row in report.ops if row.target == "host"] == []
    assert "conv_transpose" not in {row.op for row in report.ops}


def test_the_set_is_pinned_and_varied():
    """Ten or more models, each from an exact release with a digest, of several kinds."""
    assert len(MODELS) >= 10
    assert all("==" in m.wheel and len(m.sha256) == 64 for m in MODELS.values())
    families = {m.family.split(":")[0] for m in MODELS.values()}
    assert {"vision", "detection", "ocr", "audio", "layout", "dense"} <= families
    assert len({m.path for m in MODELS.values()}) == len(MODELS)  # no two share a cache file


def symbolic_import(name: str) -> nbyoc.ir.Function:
    return real_models.symbolic_import(name, model_bytes(name))


@pytest.mark.parametrize(("name", "backend"), cases(("host", "llvm"), refused=False))
def test_one_executable_runs_two_batch_sizes_and_matches_onnx_runtime(name, backend):
    """The model compiled once with its dynamic dims symbolic runs the record's inputs
    and a batch of three of them (each sample is independent, so the truth is the
    record's, three times), both as accurate as ``accuracy`` asks."""
    from ..real_models import ort_session

    if MODELS[name].fixed_batch:  # (until the record says otherwise)
        with pytest.raises(ModelImportError) as refusal:
            symbolic_import(name)
        assert str(refusal.value).startswith(MODELS[name].fixed_batch)
        return
    f = symbolic_import(name)
    ref = reference(name)
    fn = nbyoc.compile(f, backend=backend)
    axes = [i.batch_axis for k, i in MODELS[name].inputs.items() if k not in MODELS[name].constants]
    batched = [not isinstance(p.type.shape[axis], int) for p, axis in zip(f.params, axes)]
    if not any(batched):
        pytest.skip(f"{name} has a fixed batch: {f.params[0].type!r}")
    session = ort_session(model_bytes(name))
    names = [i.name for i in session.get_inputs() if i.name not in MODELS[name].constants]
    for copies in (1, 3):
        inputs = [np.concatenate([a] * copies, axis=axis) if b else a
                  for a, b, axis in zip(ref.inputs, batched, axes)]  # fmt: skip
        got = as_list(fn(*inputs))
        ort = session.run(None, {**dict(zip(names, inputs)), **MODELS[name].constants})
        for i, (out, o, host, truth) in enumerate(zip(got, ort, ref.host, ref.truth)):
            what = f"{name} on {backend} at {copies}x the batch, output {i}"
            assert (out.dtype, out.shape) == (o.dtype, o.shape), what
            if out.dtype.kind != "f":
                np.testing.assert_array_equal(out, o, err_msg=what)
                continue
            # (the output's batch axis: the one that grew, else the first)
            grown = [k for k in range(truth.ndim) if out.shape[k] == copies * truth.shape[k]]
            tile = [1] * truth.ndim
            if truth.ndim:
                tile[grown[0] if grown else 0] = copies
            acc = accuracy(out, o, np.tile(host, tile), np.tile(truth, tile),
                           ref.quantised_tolerance)  # fmt: skip
            assert acc.ok, f"{what}: {acc}"
    assert len(fn.specializations) == 2


@pytest.mark.parametrize("backend", ["host", pytest.param("llvm", marks=pytest.mark.slow)])
def test_a_qdq_model_with_integer_products_is_onnx_runtime_optimised(backend):
    """Smart Turn imported with ``qdq="integer"``: its QDQ products become integer ones,
    as ONNX Runtime rewrites them with its optimisations on; 9e-4 apart from its float
    reading, the host matches optimised Runtime bit for bit at this input (llvm within an
    ulp: the same quantised logit through its own sigmoid). Not at every input: Runtime
    fuses more (QLinearSoftmax, SkipLayerNormalization) and has its own Erf, Sigmoid and
    exp, so at most inputs the last quantised logit is a step apart (README: the QDQ
    pattern)."""
    from ..real_models import ort_session

    name = "smart-turn-v3"
    model, data = MODELS[name], model_bytes(name)
    inputs = model.sample(8)
    optimised = ort_session(data, optimized=True).run(None, inputs)
    plain = ort_session(data).run(None, inputs)
    assert np.abs(optimised[0] - plain[0]).max() > 1e-4  # (the two readings differ)
    f = nbyoc.from_onnx(data, shapes=model.shapes, qdq="integer")
    (got,) = as_list(nbyoc.compile(f, backend)(*inputs.values()))
    if backend == "host":
        np.testing.assert_array_equal(got, optimised[0])
    else:
        np.testing.assert_allclose(got, optimised[0], rtol=4 * EPS32, atol=0)
