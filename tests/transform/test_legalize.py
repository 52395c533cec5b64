"""legalize: composite ops are decomposed for backends that lack them, kept whole when
no backend gains anything, and a wrong decomposition is a clear error."""

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocError
from nbyoc.ir import op as op_registry
from nbyoc.ir.op import Op
from nbyoc.ir.ops.elementwise import same_type
from nbyoc.transform import legalize
from tests.helpers import reload

from . import backends  # noqa: F401 - registers the test backends

BACKENDS = ["llvm", "csource", "examplejson", "host"]


def _ops(func) -> set[str]:
    return {n.op.name for n in nbyoc.ir.post_order([func.body]) if isinstance(n, nbyoc.ir.Call)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype, axis", [("float32", -1), ("float64", 0), ("int32", 1)])
def test_composite_ops_match_their_reference_on_every_backend(backend, name, dtype, axis):
    x = nbyoc.var("x", (3, 4, 5), dtype)
    f = nbyoc.function([x], nbyoc.call_op(name, x, axis=axis) * 2.0)
    fn = reload(nbyoc.compile(f, backend=backend))
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((3, 4, 5)) * 30).astype(dtype)  # large: exp would overflow
    want = nbyoc.ir.get_op(name).reference(data, axis=axis % 3) * 2.0
    got = fn(data)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == "float32" else 1e-12, atol=1e-30)


def test_llvm_fuses_a_decomposed_softmax_into_one_kernel():
    x = nbyoc.var("x", (8, 16))
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.softmax(x + 1.0)), backend="llvm")
    assert list(fn.runtime_modules) == ["llvm_0"]
    assert _ops(fn.module["llvm_0"]) == {"add", "max", "subtract", "exp", "sum", "divide"}


def test_a_composite_no_backend_gains_from_stays_whole_on_the_host():
    nbyoc.register_op_support("t_only_negative", "negative")
    x = nbyoc.var("x", (2, 3))
    f = nbyoc.function([x], nbyoc.softmax(x))
    assert legalize(f, ["t_only_negative"]) is f
    assert _ops(nbyoc.partition(f, "t_only_negative")["main"]) == {"softmax"}


def test_a_backend_that_takes_the_composite_gets_it_whole():
    nbyoc.register_op_support("t_softmax", "softmax")
    x = nbyoc.var("x", (2, 3))
    f = nbyoc.function([x], nbyoc.softmax(x))
    assert legalize(f, ["t_softmax", "llvm"]) is f


def test_legalize_keeps_what_it_does_not_touch():
    x = nbyoc.var("x", (2, 3))
    shared = x * 2.0
    f = nbyoc.function([x], [nbyoc.softmax(shared), shared + 1.0])
    out = legalize(f, ["llvm"])
    nbyoc.verify(out)
    soft, plus = out.body.fields
    assert plus is f.body.fields[1]  # untouched nodes are the same objects
    assert any(n is shared for n in nbyoc.ir.post_order([soft]))  # the decomposition reads it
    assert "softmax" not in _ops(out)


def _register(monkeypatch, name, decompose):
    op = Op(name, 1, same_type, np.copy, "elementwise", "test", decompose=decompose)
    monkeypatch.setitem(op_registry._REGISTRY, name, op)


def test_a_decomposition_of_the_wrong_type_is_an_error(monkeypatch):
    _register(monkeypatch, "test_wrong", lambda x: nbyoc.sum(x, axis=0))
    x = nbyoc.var("x", (2, 3))
    f = nbyoc.function([x], nbyoc.call_op("test_wrong", x))
    with pytest.raises(
        NbyocError, match=r"decomposition of test_wrong gives Tensor.*type rule says"
    ):
        nbyoc.compile(f, backend="llvm")


def test_a_decomposition_that_uses_its_own_op_is_an_error(monkeypatch):
    _register(monkeypatch, "test_loop", lambda x: nbyoc.call_op("test_loop", x))
    x = nbyoc.var("x", (2, 3))
    f = nbyoc.function([x], nbyoc.call_op("test_loop", x))
    with pytest.raises(NbyocError, match="nests more than 16 levels deep"):
        legalize(f, ["llvm"])


def test_an_identity_decomposition_is_fine(monkeypatch):
    _register(monkeypatch, "test_identity", lambda x: x)
    x = nbyoc.var("x", (2, 3))
    f = nbyoc.function([x], nbyoc.call_op("test_identity", x) + 1.0)
    fn = nbyoc.compile(f, backend="llvm")
    data = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(fn(data), data + 1)
