"""A backend claims exactly the ops it can lower: its support comes from its rules
tables, so an op added to the IR with no backend rows runs on the host, right, on
every backend, instead of being claimed and then miscompiled."""

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen import supports
from nbyoc.codegen.llvm import lowerable_ops
from nbyoc.ir import op as op_registry
from nbyoc.ir.op import Op
from nbyoc.ir.ops.elementwise import same_type

BACKENDS = ["llvm", "csource", "examplejson"]


@pytest.fixture
def cube_op(monkeypatch):
    """An elementwise op only the IR knows, registered for one test."""
    summary = "x cubed: an op with no backend rows"
    cube = Op("test_cube", 1, same_type, lambda x: x * x * x, "elementwise", summary)
    monkeypatch.setitem(op_registry._REGISTRY, "test_cube", cube)
    return cube


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_op_without_backend_rows_runs_on_the_host_and_is_right(backend, cube_op):
    x = nbyoc.var("x", (4, 5))
    f = nbyoc.function([x], nbyoc.call_op("test_cube", x + 1.0) * 2.0)
    assert not supports(backend, f.body.args[0])
    fn = nbyoc.compile(f, backend=backend)
    offloaded = {
        node.op.name
        for name in fn.runtime_modules
        for node in nbyoc.ir.post_order([fn.module[name].body])
        if isinstance(node, nbyoc.ir.Call)
    }
    assert "test_cube" not in offloaded and {"add", "multiply"} & offloaded
    data = np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_allclose(fn(data), (data + 1) ** 3 * 2, rtol=1e-6)


@pytest.mark.parametrize("backend", ["llvm", "examplejson"])
def test_llvm_and_examplejson_claim_exactly_what_llvm_lowers(backend):
    claimed = set(nbyoc.transform.support.declared_ops(backend)) & set(nbyoc.ir.list_ops())
    assert claimed == set(lowerable_ops())
