"""The activations: NumPy references checked against formulas written out here, and every
backend (running their decompositions) against the references, special values included."""

import math

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError
from nbyoc.ir.ops.nn import ACTIVATIONS, SELU_ALPHA, SELU_GAMMA
from tests.helpers import reload


def _erf(x):
    return np.vectorize(math.erf)(x)


# The test's own oracle, in float64 (kept apart from nbyoc's references).
FORMULAS = {
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "prelu": lambda x: np.where(x >= 0, x, 0.25 * x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": lambda x: SELU_GAMMA * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
    "softplus": lambda x: np.logaddexp(0, x),
    "hard_sigmoid": lambda x: np.clip(0.2 * x + 0.5, 0, 1),
    "hard_swish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
}
VALUES = np.array([-30, -3, -1, -0.5, -0.0, 0.0, 1e-3, 0.5, 1, 3, 30], np.float64)


def _build(name, x):
    if name == "prelu":
        return nbyoc.prelu(x, nbyoc.const(np.full(x.shape[-1:], 0.25, x.dtype)))
    return nbyoc.call_op(name, x)


def test_every_activation_has_a_formula():
    assert set(ACTIVATIONS) == set(FORMULAS) | {"gelu"}


@pytest.mark.parametrize("name", FORMULAS)
def test_references_match_the_formulas(name):
    x = nbyoc.var("x", VALUES.shape, "float64")
    got = nbyoc.compile(nbyoc.function([x], _build(name, x)), backend="host")(VALUES)
    np.testing.assert_allclose(got, FORMULAS[name](VALUES), rtol=1e-12, atol=1e-15)


def test_gelu_tanh_is_close_to_gelu():
    x = nbyoc.var("x", VALUES.shape, "float64")
    exact, approx = nbyoc.compile(
        nbyoc.function([x], [nbyoc.gelu(x), nbyoc.gelu(x, approximate="tanh")]), backend="host"
    )(VALUES)
    np.testing.assert_allclose(approx, exact, atol=1e-3)


@pytest.mark.parametrize("backend", ["llvm", "csource", "examplejson"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_every_backend_matches_the_references(backend, dtype):
    data = np.concatenate([VALUES, [np.nan, np.inf, -np.inf]]).astype(dtype)
    x = nbyoc.var("x", data.shape, dtype)
    outs = [_build(name, x) for name in ACTIVATIONS] + [nbyoc.gelu(x, approximate="tanh")]
    f = nbyoc.function([x], outs)
    with np.errstate(all="ignore"):
        want = nbyoc.compile(f, backend="host")(data)
        got = reload(nbyoc.compile(f, backend=backend))(data)
    # Absolute error allowed at the dtype's epsilon: 1 + tanh(x) cancels for x << 0, so a
    # one-ulp difference in tanh is a large relative one in gelu's result.
    eps = float(np.finfo(dtype).eps)
    for name, g, w in zip([*ACTIVATIONS, "gelu_tanh"], got, want):
        assert g.dtype == w.dtype, name
        np.testing.assert_allclose(g, w, rtol=8 * eps, atol=2 * eps, err_msg=name)


def test_llvm_runs_an_activation_chain_as_one_fused_kernel():
    x = nbyoc.var("x", (8, 16))
    f = nbyoc.function([x], nbyoc.gelu(nbyoc.leaky_relu(x * 2.0)) + nbyoc.hard_swish(x))
    fn = nbyoc.compile(f, backend="llvm")
    assert list(fn.runtime_modules) == ["llvm_0"]
    assert not [n for n in nbyoc.ir.post_order([fn.module["main"].body])
                if isinstance(n, nbyoc.ir.Call) and isinstance(n.op, nbyoc.ir.Op)]  # fmt: skip


def test_activations_take_floats():
    with pytest.raises(NbyocTypeError, match=r"activations take float tensors; cast the input"):
        nbyoc.elu(nbyoc.var("x", (3,), "int32"))
    with pytest.raises(NbyocTypeError, match="approximate must be one of 'none', 'tanh'"):
        nbyoc.gelu(nbyoc.var("x", (3,)), approximate="fast")
