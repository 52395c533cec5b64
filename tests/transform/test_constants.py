"""``fold_constant_layout``: layout ops of constants are laid out once, at compile time,
exactly as the op would lay them out at run time."""

import numpy as np
import pytest

import nbyoc
from nbyoc.ir import Call, post_order
from nbyoc.transform.constants import fold_constant_layout
from nbyoc.transform.regions import is_op_call


def calls(func):
    """The ops ``func`` calls (not the module functions it calls)."""
    return [n.op.name for n in post_order([func.body]) if isinstance(n, Call) and is_op_call(n)]


def test_a_transposed_weight_becomes_a_contiguous_constant():
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = nbyoc.var("x", (2, 3))
    folded = fold_constant_layout(nbyoc.function([x], x @ nbyoc.transpose(nbyoc.const(w))))
    assert calls(folded) == ["matmul"]
    weight = folded.body.args[1]
    np.testing.assert_array_equal(weight.data, w.T)
    assert weight.data.flags["C_CONTIGUOUS"] and weight.data.flags["OWNDATA"]


def test_chains_of_layout_ops_fold_whole():
    w = nbyoc.const(np.arange(24, dtype=np.int16).reshape(2, 3, 4))
    chain = nbyoc.reshape(nbyoc.transpose(w, axes=(2, 0, 1)), (4, 6))
    x = nbyoc.var("x", (4, 6), "int16")
    folded = fold_constant_layout(nbyoc.function([x], x + chain))
    assert calls(folded) == ["add"]
    expected = np.arange(24, dtype=np.int16).reshape(2, 3, 4).transpose(2, 0, 1).reshape(4, 6)
    np.testing.assert_array_equal(folded.body.args[1].data, expected)


def test_narrow_dtypes_move_bit_for_bit():
    from nbyoc.ir.dtypes import dtype_info

    data = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    narrow = data.astype(dtype_info("float8_e4m3fn").numpy)
    x = nbyoc.var("x", (3, 2), "float8_e4m3fn")
    f = nbyoc.function([x], nbyoc.concatenate([x, nbyoc.transpose(nbyoc.const(narrow))]))
    folded = fold_constant_layout(f)
    assert calls(folded) == ["concatenate"]
    weight = folded.body.args[1]
    assert weight.type.dtype == "float8_e4m3fn"
    np.testing.assert_array_equal(weight.data.view("uint8"), narrow.view("uint8").T)


def test_what_would_grow_or_reads_a_variable_stays():
    x = nbyoc.var("x", (3, 4))
    grown = nbyoc.broadcast_to(nbyoc.const(np.ones(4, np.float32)), (3, 4))
    f = nbyoc.function([x], (x + grown) + nbyoc.transpose(nbyoc.transpose(x)))
    assert fold_constant_layout(f) is f


@pytest.mark.parametrize("backend", ["llvm", "csource", "examplejson"])
def test_a_gemm_with_a_transposed_weight_computes_the_same(backend):
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((7, 5), np.float32), rng.standard_normal(7, np.float32)
    x = nbyoc.var("x", (3, 5))
    f = nbyoc.function([x], nbyoc.gemm(x, nbyoc.const(w), nbyoc.const(b), trans_b=True))
    fn = nbyoc.compile(f, backend=backend)
    assert "transpose" not in {op for name, g in fn.module.functions.items() for op in calls(g)}
    data = rng.standard_normal((3, 5), np.float32)
    np.testing.assert_allclose(fn(data), data @ w.T + b, rtol=1e-5, atol=1e-5)
