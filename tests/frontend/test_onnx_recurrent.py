"""ONNX LSTM, GRU and RNN against ONNX Runtime: every direction, both layouts, initial
states given or not, per-sequence lengths, peepholes, clip, input_forget,
linear_before_reset and the other activations, on the host and on llvm, each after a
save -> load round trip; plus the forms exporters write (PyTorch's LSTM with its
states, a stacked bidirectional LSTM, Keras' batch-first layer with lengths).

The tolerance follows from the computation: each step's gates sum ``input + hidden``
float32 products, and a state carries the rounding of every earlier step, so the
bound is a few float32 ulps of that many terms per step, times the steps."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import nbyoc

from .test_onnx_import import make, tensor

ort = pytest.importorskip("onnxruntime")

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}
EPS32 = float(np.finfo(np.float32).eps)


def recurrent_model(op, seq, batch, inputs, hidden, *, direction="forward", layout=0,
                    states=True, lens=None, peepholes=False, bias=True, seed=0, **attrs):  # fmt: skip
    """One ``op`` node over X with random weights (initializers) and the given options;
    every output the op has is a graph output."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    inits = [
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (dirs, g * hidden, inputs)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (dirs, g * hidden, hidden)).astype(np.float32), "R"),
    ]  # fmt: skip
    names = ["X", "W", "R", "", "", "", "", ""][: 8 if op == "LSTM" else 6]
    graph_inputs = [tensor("X", [batch, seq, inputs] if layout else [seq, batch, inputs])]
    if bias:
        b = rng.uniform(-0.5, 0.5, (dirs, 2 * g * hidden)).astype(np.float32)
        inits.append(numpy_helper.from_array(b, "B"))
        names[3] = "B"
    if lens is not None:
        inits.append(numpy_helper.from_array(np.asarray(lens, np.int32), "L"))
        names[4] = "L"
    state_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    if states:
        names[5] = "H0"
        graph_inputs.append(tensor("H0", state_shape))
        if op == "LSTM":
            names[6] = "C0"
            graph_inputs.append(tensor("C0", state_shape))
    if peepholes:
        p = rng.uniform(-0.5, 0.5, (dirs, 3 * hidden)).astype(np.float32)
        inits.append(numpy_helper.from_array(p, "P"))
        names[7] = "P"
    while names and names[-1] == "":
        names.pop()
    node_attrs = {"direction": direction, "hidden_size": hidden, **attrs}
    if layout:
        node_attrs["layout"] = 1
    node = helper.make_node(op, names, OUTPUTS[op], **node_attrs)
    outputs = [tensor(o, None) for o in OUTPUTS[op]]
    return make([node], graph_inputs, outputs, inits, opset=14)


def feeds(model, seed=1):
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        out[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    return out


def bound(model, steps) -> float:
    """A few ulps of float32 per term a step sums (input and hidden), times the steps."""
    w, r = (numpy_helper.to_array(t) for t in model.graph.initializer[:2])
    return 16 * EPS32 * (w.shape[2] + r.shape[2] + 1) * steps


def expected_outputs(model, given, twin=None):
    """ONNX Runtime's outputs of ``model`` on ``given``. ONNX Runtime refuses
    ``layout=1``: a batch-first model is held against its ``layout=0`` ``twin`` (the
    same weights) on the inputs transposed, the outputs transposed back."""
    model = model if twin is None else twin
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    if twin is None:
        return session.run(None, given)
    swapped = {k: np.ascontiguousarray(v.transpose(1, 0, 2)) for k, v in given.items()}
    y, *finals = session.run(None, swapped)
    return [y.transpose(2, 0, 1, 3), *(f.transpose(1, 0, 2) for f in finals)]


def check(model, backends=("host", "llvm"), twin=None):
    given = feeds(model)
    expected = expected_outputs(model, given, twin)
    f = nbyoc.from_onnx(model)
    steps = max(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[:2])
    tolerance = bound(model, steps)
    for backend in backends:
        fn = _reloaded(nbyoc.compile(f, backend))
        got = fn(*[given[i.name] for i in model.graph.input])
        got = got if isinstance(got, tuple) else (got,)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape, (backend, k, g.shape, e.shape)
            np.testing.assert_allclose(g, e, rtol=tolerance, atol=tolerance,
                                       err_msg=f"{backend} output {k}")  # fmt: skip


def _reloaded(fn):
    """``fn`` saved and loaded back (every backend test runs a round trip)."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.nbyoc")
        fn.save(path)
        return nbyoc.load(path)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize(
    "direction, layout",
    [("forward", 0), ("reverse", 0), ("bidirectional", 0), ("bidirectional", 1),
     # (batch-first one way: with --run-slow; the layout's transposes are the same)
     pytest.param("forward", 1, marks=pytest.mark.slow),
     pytest.param("reverse", 1, marks=pytest.mark.slow)],
)  # fmt: skip
def test_every_direction_and_layout_matches_onnx_runtime(op, direction, layout):
    twin = recurrent_model(op, 5, 3, 4, 6, direction=direction) if layout else None
    check(recurrent_model(op, 5, 3, 4, 6, direction=direction, layout=layout), twin=twin)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lengths_stop_each_sequence_at_its_own_step(op, direction):
    # Y is zero past a sequence's length; Y_h holds its last step (a reversed one's
    # first); a length of zero leaves zeros everywhere.
    check(recurrent_model(op, 6, 4, 3, 5, direction=direction, lens=[6, 1, 3, 0]))


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("LSTM", {"clip": 0.5}),
        ("LSTM", {"input_forget": 1}),
        ("LSTM", {"activations": ["HardSigmoid", "LeakyRelu", "Softsign"],
                  "activation_alpha": [0.3, 0.05], "activation_beta": [0.4]}),
        ("GRU", {"linear_before_reset": 1}),
        ("GRU", {"clip": 0.25, "activations": ["Sigmoid", "Relu"]}),
        ("GRU", {"activations": ["Affine", "ScaledTanh"], "activation_alpha": [0.5, 0.8],
                 "activation_beta": [0.1, 1.2]}),
        ("RNN", {"activations": ["Elu"], "activation_alpha": [0.7]}),
        ("RNN", {"activations": ["Softplus"]}),
        ("RNN", {"activations": ["Relu"], "clip": 1.5}),
    ],
)  # fmt: skip
def test_activations_clip_and_cell_options_match_onnx_runtime(op, attrs):
    check(recurrent_model(op, 4, 2, 3, 4, peepholes=op == "LSTM", **attrs))


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_without_bias_or_states_the_defaults_are_zeros(op):
    check(recurrent_model(op, 4, 2, 3, 4, states=False, bias=False, direction="bidirectional"))


def test_pytorch_lstm_exports_two_bidirectional_layers_and_matches():
    # torch.nn.LSTM(num_layers=2, bidirectional=True) exports each layer as an LSTM
    # node, joined by Transpose + Reshape of its (seq, 2, batch, hidden) Y.
    rng = np.random.default_rng(5)
    seq, batch, inputs, hidden = 7, 2, 5, 4

    def weights(layer, width):
        return [numpy_helper.from_array(rng.uniform(-0.4, 0.4, shape).astype(np.float32), f"{n}{layer}")
                for n, shape in [("W", (2, 4 * hidden, width)), ("R", (2, 4 * hidden, hidden)),
                                 ("B", (2, 8 * hidden))]]  # fmt: skip

    inits = weights(0, inputs) + weights(1, 2 * hidden)
    inits.append(numpy_helper.from_array(np.array([seq, batch, 2 * hidden], np.int64), "shape"))
    nodes = [
        helper.make_node("Slice", ["h0", "s0", "s2", "ax"], ["h0a"]),
        helper.make_node("Slice", ["c0", "s0", "s2", "ax"], ["c0a"]),
        helper.make_node("Slice", ["h0", "s2", "s4", "ax"], ["h0b"]),
        helper.make_node("Slice", ["c0", "s2", "s4", "ax"], ["c0b"]),
        helper.make_node("LSTM", ["x", "W0", "R0", "B0", "", "h0a", "c0a"], ["y0", "hn0", "cn0"],
                         direction="bidirectional", hidden_size=hidden),
        helper.make_node("Transpose", ["y0"], ["y0t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y0t", "shape"], ["x1"]),
        helper.make_node("LSTM", ["x1", "W1", "R1", "B1", "", "h0b", "c0b"], ["y1", "hn1", "cn1"],
                         direction="bidirectional", hidden_size=hidden),
        helper.make_node("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y1t", "shape"], ["out"]),
        helper.make_node("Concat", ["hn0", "hn1"], ["hn"], axis=0),
        helper.make_node("Concat", ["cn0", "cn1"], ["cn"], axis=0),
    ]  # fmt: skip
    inits += [numpy_helper.from_array(np.array([v], np.int64), n)
              for n, v in [("s0", 0), ("s2", 2), ("s4", 4), ("ax", 0)]]  # fmt: skip
    model = make(nodes, [tensor("x", [seq, batch, inputs]), tensor("h0", [4, batch, hidden]),
                         tensor("c0", [4, batch, hidden])],
                 [tensor("out", None), tensor("hn", None), tensor("cn", None)], inits)  # fmt: skip
    check(model)


def test_keras_batch_first_lstm_with_lengths_and_a_symbolic_batch():
    # tf2onnx writes Keras' LSTM batch first, with the lengths and no initial states.
    model = recurrent_model("LSTM", 6, 3, 4, 5, layout=1, states=False, lens=[6, 4, 2])
    check(model, twin=recurrent_model("LSTM", 6, 3, 4, 5, states=False, lens=[6, 4, 2]))
    x = model.graph.input[0].type.tensor_type.shape.dim
    x[1].dim_param = "time"  # the sequence may be as long as it likes (the lengths fix batch)
    f = nbyoc.from_onnx(model)
    assert str(f.params[0].type) == "Tensor[(3, time, 4), float32]"
    got = nbyoc.compile(f)(np.ones((3, 9, 4), np.float32))
    assert got[0].shape == (3, 9, 1, 5)


def test_a_symbolic_sequence_length_runs_every_length_from_one_executable():
    model = recurrent_model("GRU", 5, 2, 3, 4, states=False)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "seq"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    fn = nbyoc.compile(nbyoc.from_onnx(model))
    for seq in (1, 4, 11):
        x = np.random.default_rng(seq).uniform(-1, 1, (seq, 2, 3)).astype(np.float32)
        for g, e in zip(fn(x), session.run(None, {"X": x})):
            np.testing.assert_allclose(g, e, rtol=bound(model, seq), atol=bound(model, seq))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(["LSTM", "GRU", "RNN"]),
    seq=st.integers(1, 6),
    batch=st.integers(1, 3),
    sizes=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    direction=st.sampled_from(["forward", "reverse", "bidirectional"]),
    layout=st.sampled_from([0, 1]),
    states=st.booleans(),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_random_recurrent_layers_match_onnx_runtime(op, seq, batch, sizes, direction, layout,
                                                    states, seed, data):  # fmt: skip
    lens = data.draw(st.none() | st.lists(st.integers(0, seq), min_size=batch, max_size=batch))
    options = dict(direction=direction, states=states, lens=lens, seed=seed)
    model = recurrent_model(op, seq, batch, *sizes, layout=layout, **options)
    twin = recurrent_model(op, seq, batch, *sizes, **options) if layout else None
    check(model, backends=("host",), twin=twin)


def test_bad_recurrent_nodes_are_refused_clearly():
    model = recurrent_model("LSTM", 3, 2, 3, 4, hidden_size=5)
    with pytest.raises(nbyoc.errors.ModelImportError, match=r"hidden_size=5 but r holds 4"):
        nbyoc.from_onnx(model)
    model = recurrent_model("GRU", 3, 2, 3, 4, activations=["Sigmoid", "Swish"])
    with pytest.raises(nbyoc.errors.ModelImportError, match=r"unknown activation 'Swish'"):
        nbyoc.from_onnx(model)
    model = recurrent_model("RNN", 3, 2, 3, 4, activations=["Tanh", "Tanh", "Tanh"])
    with pytest.raises(nbyoc.errors.ModelImportError, match=r"activations needs 1 names"):
        nbyoc.from_onnx(model)


def test_sequence_lengths_outside_the_sequence_are_an_error_at_call():
    x = nbyoc.var("x", (3, 2, 2))
    z = lambda *shape: nbyoc.const(np.zeros(shape, np.float32))  # noqa: E731
    lens = nbyoc.var("lens", (2,), "int32")
    f = nbyoc.function([x, lens], nbyoc.rnn(x, z(1, 1, 2), z(1, 1, 1), z(1, 2), z(1, 2, 1), lens))
    fn = nbyoc.compile(f, "host")
    with pytest.raises(
        nbyoc.errors.ExecutionError, match=r"sequence_lens \[4, 1\] must lie in \[0, 3\]"
    ):
        fn(np.ones((3, 2, 2), np.float32), np.array([4, 1], np.int32))
