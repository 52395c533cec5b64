"""The registries through which a backend is brought: op support, codegens, loaders;
and the checked destination-passing functions runtime modules hand out."""

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import (
    ArgumentError,
    CompileError,
    DuplicateRegistrationError,
    LoadError,
    NbyocError,
    ShapeMismatchError,
    UnknownBackendError,
    UnknownOpError,
)
from nbyoc.ir import IRModule
from nbyoc.runtime import Module, destination_passing, get_loader, load_module

from ..helpers import reload
from .backends import ARITH, TYPE_KEY, NumpyModule


def test_duplicate_registrations_are_refused():
    with pytest.raises(DuplicateRegistrationError, match="support for op 'add' on 't_arith'"):
        nbyoc.register_op_support(ARITH, "add")
    with pytest.raises(DuplicateRegistrationError, match="codegen for 't_arith'"):
        nbyoc.register_codegen(ARITH)(NumpyModule)
    with pytest.raises(DuplicateRegistrationError, match="loader for 'numpy_test'"):
        nbyoc.register_loader(TYPE_KEY)(NumpyModule)
    with pytest.raises(DuplicateRegistrationError, match="built-in"):
        nbyoc.register_op_support("host", "add")


def test_support_for_an_unknown_op_is_refused_with_a_suggestion():
    with pytest.raises(UnknownOpError, match="did you mean 'multiply'"):
        nbyoc.register_op_support("t_typo", "mutliply")


def test_unknown_backend_errors_list_the_registered_ones():
    f = nbyoc.function([a := nbyoc.var("a", (2,))], a + a)
    with pytest.raises(UnknownBackendError) as info:
        nbyoc.compile(f, backend="tpu")
    assert "registered backends: host" in str(info.value) and ARITH in str(info.value)
    with pytest.raises(UnknownBackendError, match="declares no op support"):
        nbyoc.partition(f, "tpu")
    nbyoc.register_op_support("t_support_only", "add")
    with pytest.raises(UnknownBackendError, match="declares op support but has no codegen"):
        nbyoc.compile(f, backend="t_support_only")
    assert list(nbyoc.partition(f, "t_support_only").functions) == ["main", "t_support_only_0"]


def test_a_failing_predicate_names_backend_and_op():
    nbyoc.register_op_support("t_bad_predicate", "add", lambda call: 1 / 0)
    f = nbyoc.function([a := nbyoc.var("a", (2,))], a + a)
    with pytest.raises(NbyocError, match="predicate of t_bad_predicate/add failed"):
        nbyoc.partition(f, "t_bad_predicate")


def register_broken(name, codegen):
    nbyoc.register_op_support(name, "add")
    nbyoc.register_codegen(name)(codegen)
    return nbyoc.function([a := nbyoc.var("a", (2,))], a + a)


def test_codegen_failures_become_compile_errors():
    def raising(func):
        raise RuntimeError("no hardware attached")

    f = register_broken("t_raising", raising)
    with pytest.raises(
        CompileError, match="'t_raising' codegen failed on @t_raising_0: RuntimeError"
    ):
        nbyoc.compile(f, backend="t_raising")
    f = register_broken("t_not_a_module", lambda func: "source text")
    with pytest.raises(CompileError, match=r"must return a nbyoc\.runtime\.Module"):
        nbyoc.compile(f, backend="t_not_a_module")

    class Empty(NumpyModule):
        def get_function(self, symbol):
            raise NbyocError(f"no {symbol} here")

    f = register_broken("t_empty", Empty)
    with pytest.raises(CompileError, match="does not provide it: no t_empty_0 here"):
        nbyoc.compile(f, backend="t_empty")


def test_module_base_class_requires_the_whole_interface():
    class Partial(Module):
        type_key = "partial"

        def get_function(self, symbol):
            return None

    with pytest.raises(TypeError, match="abstract"):
        Partial()


def test_loaders_and_load_module(tmp_path):
    x = nbyoc.var("x", (3,))
    ext = nbyoc.function([x], x * 2.0).with_attrs(Compiler=ARITH, global_symbol="t_arith_0")
    path = tmp_path / "sub.json"
    path.write_bytes(NumpyModule(ext).save_to_bytes())
    module = load_module(path, TYPE_KEY)
    out = np.empty(3, np.float32)
    module.get_function("t_arith_0")(np.ones(3, np.float32), out)
    np.testing.assert_array_equal(out, [2, 2, 2])
    with pytest.raises(
        LoadError, match=r"no loader for module type 'nope'; registered: .*numpy_test"
    ):
        get_loader("nope")
    with pytest.raises(LoadError, match="cannot read"):
        load_module(tmp_path / "missing.json", TYPE_KEY)


def test_hand_partitioned_modules_compile_as_they_are():
    x = nbyoc.var("x", (3,))
    ext = nbyoc.function([x], [x * 2.0, x + 1.0]).with_attrs(
        Compiler=ARITH, global_symbol="t_arith_0"
    )
    a = nbyoc.var("a", (3,))
    call = nbyoc.ir.Call(nbyoc.ir.GlobalVar("t_arith_0", ext.type), [a])
    mod = IRModule({"main": nbyoc.function([a], nbyoc.exp(call[0]) - call[1]), "t_arith_0": ext})
    fn = reload(nbyoc.compile(mod))
    data = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(fn(data), np.exp(data * 2) - (data + 1), rtol=1e-6)
    assert fn.runtime_modules["t_arith_0"].calls == 1


def destination():
    x = nbyoc.var("x", (2, 3))
    ext = nbyoc.function([x], [x * 2.0, nbyoc.sum(x)]).with_attrs(global_symbol="dp")
    seen = []

    def impl(inputs, outputs):
        seen.append(inputs[0].flags.c_contiguous)
        np.multiply(inputs[0], 2, out=outputs[0])
        outputs[1][...] = inputs[0].sum()

    return destination_passing(ext, impl), seen


def test_destination_passing_checks_every_array_before_running():
    run, seen = destination()
    good_in = np.ones((2, 3), np.float32)
    outs = [np.empty((2, 3), np.float32), np.empty((), np.float32)]
    run(good_in, *outs)
    assert outs[1] == 6 and seen == [True]
    run(np.ones((3, 2), np.float32).T, *outs)  # a strided input is made contiguous first
    assert seen[-1] is True
    with pytest.raises(ShapeMismatchError, match="dp outputs: argument 0 \\(out0\\)"):
        run(good_in, np.empty((3, 2), np.float32), outs[1])
    with pytest.raises(ArgumentError, match="dp outputs takes 2 argument"):
        run(good_in, outs[0])
    with pytest.raises(ArgumentError, match="C-contiguous and writeable"):
        run(good_in, np.empty((3, 2), np.float32).T, outs[1])
    frozen = np.empty((2, 3), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ArgumentError, match="C-contiguous and writeable"):
        run(good_in, frozen, outs[1])
    with pytest.raises(ArgumentError, match="overlaps another argument"):
        run(good_in, good_in, outs[1])
    assert len(seen) == 2, "nothing ran for the refused calls"
