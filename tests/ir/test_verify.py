"""verify() catches what node constructors cannot see, including forged nodes."""

import pytest

import nbyoc
from nbyoc.errors import WellFormednessError
from nbyoc.ir import Call, Function, GlobalVar, IRModule, TensorType


def forge(node, **fields):
    """Overwrite fields of an immutable node, as a buggy pass might."""
    for name, value in fields.items():
        object.__setattr__(node, name, value)
    return node


def test_good_function_and_module_pass():
    x = nbyoc.var("x", (3,))
    f = nbyoc.function([x], nbyoc.exp(x))
    assert nbyoc.verify(f) is f
    mod = IRModule({"main": f})
    assert nbyoc.verify(mod) is mod


def test_free_variable():
    x, y = nbyoc.var("x", (3,)), nbyoc.var("y", (3,))
    with pytest.raises(WellFormednessError, match="%y is used but is not a parameter"):
        nbyoc.verify(Function([x], x + y))


def test_type_drift_is_caught():
    x = nbyoc.var("x", (3,))
    y = forge(x + 1.0, type=TensorType((4,), "float32"))
    with pytest.raises(WellFormednessError, match="claims type Tensor\\[\\(4,\\), float32\\]"):
        nbyoc.verify(Function([x], y))


def test_attributes_must_be_normal():
    x = nbyoc.var("x", (3, 2))
    s = nbyoc.sum(x, axis=1)
    forge(s, attrs={"axis": (-1,), "keepdims": False})
    with pytest.raises(WellFormednessError, match="normal form"):
        nbyoc.verify(Function([x], s))


def test_operands_that_no_longer_type_check():
    x = nbyoc.var("x", (3,))
    y = forge(x + 1.0, args=(x, nbyoc.var("z", (4,))))
    with pytest.raises(WellFormednessError):
        nbyoc.verify(Function([x], y))


def module_with_call(callee_name="f", claimed_type=None):
    """main calls @callee_name, claiming ``claimed_type`` for it (default: the true type)."""
    p = nbyoc.var("p", (3,))
    callee = nbyoc.function([p], p * 2.0)
    a = nbyoc.var("a", (3,))
    call = Call(GlobalVar(callee_name, callee.type), [a])
    if claimed_type is not None:
        forge(call, op=GlobalVar(callee_name, claimed_type))
    return {"main": Function([a], call), "f": callee}


def test_module_calls_must_resolve():
    nbyoc.verify(IRModule(module_with_call()))
    with pytest.raises(WellFormednessError, match="@g, which is not a function of the module"):
        nbyoc.verify(IRModule(module_with_call(callee_name="g")))


def test_module_call_types_must_agree():
    wrong = nbyoc.ir.FuncType([TensorType((3,))], TensorType((), "float32"))
    with pytest.raises(WellFormednessError, match="calls @f as"):
        nbyoc.verify(IRModule(module_with_call(claimed_type=wrong)))


def test_parameters_are_not_shared_between_functions():
    x = nbyoc.var("x", (3,))
    f = nbyoc.function([x], x + 1.0)
    g = nbyoc.function([x], x * 2.0)
    with pytest.raises(WellFormednessError, match="parameter of both"):
        nbyoc.verify(IRModule({"main": f, "g": g}))


def test_call_cycles_are_rejected():
    t = TensorType((3,))
    ftype = nbyoc.ir.FuncType([t], t)
    a, b = nbyoc.var("a", (3,)), nbyoc.var("b", (3,))
    f = Function([a], Call(GlobalVar("g", ftype), [a]))
    g = Function([b], Call(GlobalVar("main", ftype), [b]))
    with pytest.raises(WellFormednessError, match="cycle"):
        nbyoc.verify(IRModule({"main": f, "g": g}))


def test_verify_rejects_other_objects():
    with pytest.raises(WellFormednessError, match="takes a Function or an IRModule"):
        nbyoc.verify(nbyoc.var("x", (1,)))
