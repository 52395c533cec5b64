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
        nbyoc.compile(f, backend="t_raising", strict=True)
    f = register_broken("t_not_a_module", lambda func: "source text")
    with pytest.raises(CompileError, match=r"must return a nbyoc\.runtime\.Module"):
        nbyoc.compile(f, backend="t_not_a_module", strict=True)

    class Empty(NumpyModule):
        def get_function(self, symbol):
            raise NbyocError(f"no {symbol} here")

    f = register_broken("t_empty", Empty)
    with pytest.raises(CompileError, match="does not provide it: no t_empty_0 here"):
        nbyoc.compile(f, backend="t_empty", strict=True)


class RunOnly(Module):
    """The least a backend's module implements: get_function."""

    type_key = "t_run_only_module"

    def __init__(self, func):
        self.func = func

    def get_function(self, symbol):
        run = nbyoc.runtime.HostFunction(self.func)
        return destination_passing(self.func, lambda ins, outs: np.copyto(outs[0], run(*ins)))


def test_a_module_without_saving_compiles_runs_and_refuses_to_save(tmp_path):
    f = register_broken("t_run_only", RunOnly)
    fn = nbyoc.compile(f, backend="t_run_only")
    np.testing.assert_array_equal(fn(np.ones(2, np.float32)), [2, 2])
    path = tmp_path / "run_only.nbyoc"
    with pytest.raises(NbyocError) as info:
        fn.save(path)
    message = str(info.value)
    assert "cannot save @t_run_only_0" in message and "'t_run_only_module'" in message
    assert "implement save_to_bytes()" in message and "register_loader" in message
    assert not path.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(NbyocError, match="does not implement load_from_bytes"):
        nbyoc.register_loader("t_run_only_module")(RunOnly)


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
        LoadError, match=r"no loader for module type 'nope'; loadable here: .*numpy_test"
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


# -- a user's first hour: errors a user can act on ------------------------------------


def test_registrations_can_be_replaced_when_asked():
    f = register_broken("t_replaced", lambda func: NumpyModule(func))
    nbyoc.register_op_support("t_replaced", "add", lambda call: False, replace=True)
    assert list(nbyoc.partition(f, "t_replaced").functions) == ["main"]  # the new predicate
    nbyoc.register_op_support("t_replaced", "add", replace=True)
    calls = []

    def counting(func):
        calls.append(func.attrs["global_symbol"])
        return NumpyModule(func)

    nbyoc.register_codegen("t_replaced", replace=True)(counting)
    nbyoc.compile(f, backend="t_replaced")
    assert calls == ["t_replaced_0"]
    loader = nbyoc.register_loader(TYPE_KEY, replace=True)(NumpyModule)
    assert loader is NumpyModule and get_loader(TYPE_KEY) == NumpyModule.load_from_bytes


def test_a_codegen_error_names_backend_and_function_and_chains_the_original():
    class VendorError(NbyocError):
        pass

    def raising(func):
        raise VendorError("unsupported tile size")

    f = register_broken("t_vendor", raising)
    with pytest.raises(CompileError) as info:
        nbyoc.compile(f, backend="t_vendor", strict=True)
    assert str(info.value) == (
        "the 't_vendor' codegen failed on @t_vendor_0: VendorError: unsupported tile size"
    )
    assert isinstance(info.value.__cause__, VendorError)


@pytest.mark.parametrize(
    "options,needle",
    [
        ({"llvm": False}, r"options\['llvm'\] must be a dict of keyword arguments"),
        (
            {"lvm": {"fuse": False}},
            "options name backend 'lvm', which this compile does not use .*did you mean 'llvm'",
        ),
        (
            {"csource": {"fused": True}},
            "backend 'csource', which this compile does not use \\(it uses llvm\\)",
        ),
        ([("llvm", {})], "options must map backend names to keyword arguments"),
        ({"llvm": {"fusion": False}}, "unknown option for the 'llvm' codegen"),
    ],
)
def test_compile_options_are_checked(options, needle):
    x = nbyoc.var("x", (3,))
    with pytest.raises(NbyocError, match=needle):
        nbyoc.compile(nbyoc.function([x], x * 2.0), options=options)


def test_function_params_must_be_a_list():
    x = nbyoc.var("x", (3,))
    with pytest.raises(
        NbyocError, match=r"must be a list of variables, e.g. nbyoc.function\(\[x\]"
    ):
        nbyoc.function(x, x * 2.0)


def test_an_external_function_compiles_as_a_plain_function():
    x = nbyoc.var("x", (3,))
    module = nbyoc.partition(nbyoc.function([x], nbyoc.exp(x) * 2.0), ARITH)
    ext = module["t_arith_0"]
    assert dict(ext.attrs) == {"Compiler": ARITH, "global_symbol": "t_arith_0"}
    for backend in ["host", ARITH]:
        fn = nbyoc.compile(ext, backend=backend)
        assert "global_symbol" not in fn.module["main"].attrs
        np.testing.assert_allclose(fn(np.ones(3, np.float32)), [2, 2, 2])


def test_the_parser_suggests_the_op_other_tools_name_differently():
    with pytest.raises(nbyoc.errors.ParseError, match="unknown op 'mul'; did you mean 'multiply'"):
        nbyoc.parse("fn (%a: Tensor[(2,), float32]) { mul(%a, %a) }")
    with pytest.raises(UnknownOpError, match="did you mean 'concatenate'"):
        nbyoc.ir.get_op("concat")


def test_get_source_is_one_readable_string():
    x = nbyoc.var("x", (3,))
    f = nbyoc.function([x], nbyoc.exp(x * 2.0) + 1.0)
    fn = nbyoc.compile(f, backend=ARITH)
    assert list(fn.sources) == ["t_arith_0", "t_arith_1"]
    text = fn.get_source()
    assert text.startswith("// ---- @t_arith_0: backend t_arith, module type numpy_test ----\n")
    assert "// ---- @t_arith_1: backend t_arith, module type numpy_test ----\n" in text
    assert fn.sources["t_arith_1"] in text and "\\n" not in text
    assert fn.get_source("t_arith_0") == fn.sources["t_arith_0"]
    with pytest.raises(
        NbyocError, match="no external function 'nope'; this executable has t_arith_0, t_arith_1"
    ):
        fn.get_source("nope")
    assert nbyoc.compile(f, backend="host").get_source() == ""
