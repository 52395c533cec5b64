"""The builder API: operators, scalars, tuples, functions, immutability, deep graphs."""

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import IRError, NbyocTypeError, WellFormednessError
from nbyoc.ir import Call, Constant, Tuple, TupleGetItem


@pytest.fixture
def ab():
    return nbyoc.var("a", (2, 3)), nbyoc.var("b", (2, 3))


@pytest.mark.parametrize(
    "build,op",
    [
        (lambda a, b: a + b, "add"),
        (lambda a, b: a - b, "subtract"),
        (lambda a, b: a * b, "multiply"),
        (lambda a, b: a / b, "divide"),
        (lambda a, b: a**b, "power"),
        (lambda a, b: a @ nbyoc.transpose(b), "matmul"),
        (lambda a, b: -a, "negative"),
        (lambda a, b: abs(a), "abs"),
    ],
)
def test_operators_build_calls(ab, build, op):
    y = build(*ab)
    assert isinstance(y, Call) and y.op.name == op


def test_reflected_operators_keep_operand_order(ab):
    a, _ = ab
    y = 2 - a
    assert y.op.name == "subtract"
    assert isinstance(y.args[0], Constant) and y.args[1] is a
    assert float(y.args[0].data) == 2.0 and y.args[0].type.dtype == "float32"


def test_numpy_arrays_on_the_left_hand_their_operation_to_the_expression(ab):
    a, _ = ab
    y = np.ones((2, 3), np.float32) * a
    assert isinstance(y, Call) and y.op.name == "multiply" and y.args[1] is a


def test_const_copies_and_freezes_its_data():
    data = np.arange(4, dtype=np.float32)
    c = nbyoc.const(data)
    data[0] = 99
    assert c.data[0] == 0
    with pytest.raises(ValueError):
        c.data[0] = 1
    assert nbyoc.const([1, 2], "int32").type == nbyoc.ir.TensorType((2,), "int32")


def test_const_refuses_unsupported_data():
    with pytest.raises(NbyocTypeError):
        nbyoc.const(np.ones(3, np.complex64))
    with pytest.raises(NbyocTypeError):
        nbyoc.const(["a", "b"])
    assert nbyoc.const([True, False]).type.dtype == "bool"
    assert nbyoc.const(np.ones(3, np.float16)).type.dtype == "float16"


def test_tuples_indexing_and_unpacking(ab):
    a, b = ab
    t = nbyoc.tuple([a, b + 1])
    assert isinstance(t, Tuple) and len(t.type.fields) == 2
    first, second = t
    assert isinstance(first, TupleGetItem) and first.index == 0 and second.index == 1
    assert t[-1].index == 1
    with pytest.raises(NbyocTypeError, match="out of range"):
        t[2]
    assert a[0].op.name == "reshape"  # a tensor is indexed like an array: tests/ir/test_index.py
    rows = list(a)  # (and iterated like an array, over its first axis)
    assert len(rows) == a.type.shape[0] and rows[0].type.shape == a.type.shape[1:]


def test_function_with_several_outputs(ab):
    a, b = ab
    f = nbyoc.function([a, b], [a + b, a * b, a])
    assert isinstance(f.body, Tuple) and len(f.ret_type.fields) == 3
    assert f.params == (a, b)


def test_function_rejects_free_variables_and_repeated_parameters(ab):
    a, b = ab
    with pytest.raises(WellFormednessError, match="%b is used but is not a parameter"):
        nbyoc.function([a], a + b)
    with pytest.raises(WellFormednessError, match="listed twice"):
        nbyoc.function([a, a], a + 1)
    with pytest.raises(IRError, match="must be Vars"):
        nbyoc.function([a + 1], a)


def test_nodes_are_immutable(ab):
    a, b = ab
    y = a + b
    for node, field in [(a, "name_hint"), (y, "args"), (y, "type")]:
        with pytest.raises(AttributeError, match="immutable"):
            setattr(node, field, None)
    with pytest.raises(TypeError):
        y.attrs["axis"] = 1


def test_nodes_compare_by_identity(ab):
    a, b = ab
    assert (a + b) is not (a + b)
    assert len({a + b, a + b}) == 2


def test_expression_properties(ab):
    a, _ = ab
    assert a.shape == (2, 3) and a.dtype == "float32"
    assert nbyoc.sum(a).shape == ()


def test_deep_graphs_need_no_recursion():
    x = nbyoc.var("x", (2,))
    y = x
    for _ in range(5_000):  # far beyond Python's recursion limit
        y = y + 1.0
    f = nbyoc.function([x], y)
    text = str(f)
    assert nbyoc.structural_equal(nbyoc.parse(text), f)
    assert nbyoc.structural_equal(nbyoc.from_json(nbyoc.to_json(f)), f)
    out = nbyoc.compile(f, backend="host")(np.zeros(2, np.float32))
    np.testing.assert_array_equal(out, [5_000, 5_000])
