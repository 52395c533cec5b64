"""The recurrent ops' type rules, normal form and NumPy references (their ONNX semantics
against ONNX Runtime: tests/frontend/test_onnx_recurrent.py)."""

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.examplejson.format import to_examplejson
from nbyoc.codegen.examplejson.parse import parse_examplejson
from nbyoc.errors import NbyocTypeError


def z(*shape, dtype="float32"):
    return nbyoc.const(np.zeros(shape, dtype))


def lstm_operands(seq=5, batch=2, inputs=3, hidden=4, dirs=1):
    x = nbyoc.var("x", (seq, batch, inputs))
    g = 4 * hidden
    return [x, z(dirs, g, inputs), z(dirs, g, hidden), z(dirs, 2 * g), z(dirs, batch, hidden),
            z(dirs, batch, hidden), z(dirs, 3 * hidden)]  # fmt: skip


def test_the_result_packs_every_output_and_sizes_stay_symbolic():
    x = nbyoc.var("x", ("t", "b", 3))
    h0 = nbyoc.var("h0", (1, "b", 2))
    y = nbyoc.gru(x, z(1, 6, 3), z(1, 6, 2), z(1, 12), h0)
    assert str(y.type) == "Tensor[(t + 1, 1, b, 2), float32]"
    y = nbyoc.lstm(*lstm_operands(dirs=2), direction="bidirectional")
    assert y.type.shape == (5 + 2, 2, 2, 4)


def test_attributes_reach_one_normal_form_and_every_format_keeps_it():
    y = nbyoc.lstm(*lstm_operands(dirs=2), direction="bidirectional",
                   activations=("hardsigmoid", "Tanh", "relu"), activation_alpha=(0.3,))  # fmt: skip
    assert y.attrs["activations"] == ("HardSigmoid", "Tanh", "Relu") * 2
    assert y.attrs["activation_alpha"] == (0.3, 0.2)  # the second HardSigmoid's default
    assert y.attrs["activation_beta"] == (0.5, 0.5)
    f = nbyoc.function([y.args[0]], y)
    assert nbyoc.parse(str(f)).body.attrs == y.attrs
    assert nbyoc.from_json(nbyoc.to_json(f)).body.attrs == y.attrs
    ext = f.with_attrs(global_symbol="subgraph_0")
    assert parse_examplejson(to_examplejson(ext))["subgraph_0"].body.attrs == y.attrs


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: nbyoc.call_op("lstm", *lstm_operands()[:6]), r"lstm takes 7 operands"),
        (lambda: nbyoc.lstm(*lstm_operands(), direction="bidirectional"),
         r"w must have shape \(2, 16, 3\) for bidirectional"),
        (lambda: nbyoc.rnn(nbyoc.var("x", (2, 2, 3), "int32"), z(1, 1, 3), z(1, 1, 1), z(1, 2),
                           z(1, 2, 1)), r"x must be floating point"),
        (lambda: nbyoc.rnn(nbyoc.var("x", (2, 2, 3)), z(1, 1, 3), z(1, 1, 1), z(1, 2),
                           z(1, 2, 1, dtype="float64")), r"initial_h is .*float64.*must be float32"),
        (lambda: nbyoc.rnn(nbyoc.var("x", (2, 2, 3)), z(1, 1, 3), z(1, 1, 1), z(1, 2), z(1, 2, 1),
                           z(3, dtype="int32")), r"size 3 must equal 2|sequence_lens"),
        (lambda: nbyoc.lstm(*lstm_operands(), activations=("Tanh",)), r"activations needs 3 names"),
        (lambda: nbyoc.rnn(nbyoc.var("x", (2, 2, 3)), z(1, 1, 3), z(1, 1, 1), z(1, 2), z(1, 2, 1),
                           activation_alpha=(1.0,)), r"1 values for the 0 activation"),
        (lambda: nbyoc.lstm(*lstm_operands(), clip=-1.0), r"clip must be positive"),
        (lambda: nbyoc.lstm(*lstm_operands(), direction="sideways"), r"direction must be one of"),
    ],
)  # fmt: skip
def test_bad_recurrent_calls_are_type_errors_saying_what_is_wrong(build, message):
    with pytest.raises(NbyocTypeError, match=message):
        build()


def test_an_rnn_of_one_unit_follows_its_equation_step_by_step():
    # h_t = tanh(w x_t + r h_{t-1} + wb + rb), by hand
    x = np.array([[[0.5]], [[-1.0]], [[2.0]]], np.float32)  # (seq 3, batch 1, input 1)
    w, r, b = 0.8, -0.6, (0.1, 0.2)
    f = nbyoc.function(
        [v := nbyoc.var("x", (3, 1, 1))],
        nbyoc.rnn(v, nbyoc.const(np.full((1, 1, 1), w, np.float32)),
                  nbyoc.const(np.full((1, 1, 1), r, np.float32)),
                  nbyoc.const(np.array([b], np.float32)), z(1, 1, 1)),
    )  # fmt: skip
    h, expected = 0.0, []
    for t in range(3):
        h = np.tanh(w * x[t, 0, 0] + r * h + sum(b))
        expected.append(h)
    got = nbyoc.compile(f, "host")(x)
    np.testing.assert_allclose(got[:3, 0, 0, 0], expected, rtol=1e-6)
    np.testing.assert_allclose(got[3, 0, 0, 0], expected[-1], rtol=1e-6)  # Y_h
