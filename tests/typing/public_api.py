"""The public API used as the documentation uses it, for mypy --strict
(``check_public_api.py``): every call type-checks, and ``assert_type`` pins what the
docs promise each call returns, so an annotation that is missing, wrong or ``Any``
where a type is promised fails the check. Never run; only type-checked (the calls
need files and models that are not here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from typing_extensions import assert_type

import nbyoc
from nbyoc.explanation import Explanation
from nbyoc.ir import Call, Constant, Expr, Function, IRModule, Var
from nbyoc.runtime import HostFunction, Module, destination_passing


def build_and_compile(array: np.ndarray) -> None:
    a = assert_type(nbyoc.var("a", (10, 10), "float32"), Var)
    b = nbyoc.var("b", (10, 10))
    k = assert_type(nbyoc.const(np.ones((10, 10), np.float32)), Constant)
    assert_type(nbyoc.const([1, 2, 3], "float32"), Constant)
    assert_type(nbyoc.call_op("add", a, b), Call)
    assert_type(nbyoc.tuple([a, b]), Expr)
    f = assert_type(nbyoc.function([a, b], nbyoc.call_op("multiply", a, k)), Function)
    nbyoc.function([a, b], [a, b], {"name": "two"})
    assert_type(nbyoc.einsum("ij,jk->ik", a, b), Expr)
    assert_type(nbyoc.norm(a), Expr)
    assert_type(nbyoc.top_k(a, 3), tuple[Expr, Expr])
    assert_type(nbyoc.split(a, 2), tuple[Expr, ...])
    assert_type(nbyoc.parse(str(f)), Function | IRModule)
    assert_type(nbyoc.to_json(f), str)
    assert_type(nbyoc.from_json(nbyoc.to_json(f)), Function | IRModule)
    assert_type(nbyoc.structural_equal(f, f), bool)
    assert_type(nbyoc.structural_hash(f), int)
    nbyoc.verify(f)

    fn = assert_type(nbyoc.compile(f, backend="llvm"), nbyoc.Executable)
    nbyoc.compile(f, ["csource", "llvm"], min_size=2)
    out = fn(array, array)  # an array, or a tuple of them for several outputs
    assert_type(fn.module, IRModule)
    assert_type(fn.get_source(), str)
    fn.save("model.nbyoc")
    assert_type(nbyoc.load("model.nbyoc"), nbyoc.Executable)
    assert_type(fn.explain(), Explanation)
    assert_type(fn.verify(array, array).ok, bool)
    print(fn.profile(array, array, repeat=3), out)
    assert_type(nbyoc.partition(f, "csource"), IRModule)
    assert_type(nbyoc.explain(f, ["csource", "llvm"]), Explanation)


def frontends() -> None:
    f = assert_type(nbyoc.from_onnx("model.onnx", shapes={"x": (1, 3, 224, 224)}), Function)
    nbyoc.from_onnx(b"bytes", constants={"n": np.array(3)}, base_dir=".", qdq="float")

    @nbyoc.jit
    def g(a: np.ndarray, b: np.ndarray) -> Any:
        return np.exp(a) * b

    @nbyoc.jit(backend="csource", static_argnames=["axis"])
    def h(a: np.ndarray, axis: int) -> Any:
        return a.sum(axis=axis)

    print(g(np.ones(3), np.ones(3)), h(np.ones((2, 3)), axis=1), f)
    backend = nbyoc.frontend.onnx.backend.Backend
    rep = backend.prepare("model.onnx", backend="llvm")
    print(rep.run([np.ones(3, np.float32)]), backend.supports_device("CPU"))


def bring_your_own_codegen() -> None:
    nbyoc.register_op_support("mine", "add")
    # (``call.type`` is a tuple's type for an op of several results: ``call.dtype`` is the
    # dtype of a tensor-typed call, as the docs' ``call.type.dtype``, and type-checks)
    nbyoc.register_op_support("mine", "relu", lambda call: call.dtype == "float32")

    class MyModule(Module):
        type_key = "my_module"

        def __init__(self, func: Function) -> None:
            self.func, self.run = func, HostFunction(func)

        def get_function(self, symbol: str) -> Callable[..., None]:
            def impl(inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
                np.copyto(outputs[0], self.run(*inputs))

            return destination_passing(self.func, impl)

    @nbyoc.register_codegen("mine")
    def codegen(func: Function) -> Module:
        return MyModule(func)

    @nbyoc.register_loader("my_module")
    def load(data: bytes) -> Module:
        raise nbyoc.errors.LoadError("not savable")

    f = nbyoc.function([x := nbyoc.var("x", (3,))], nbyoc.call_op("relu", x))
    assert_type(codegen(f), Module)  # (the decorators keep the functions' types)
    assert_type(load(b""), Module)
    assert_type(nbyoc.load_module("sub.examplejson", "examplejson"), Module)


def configuration() -> None:
    nbyoc.show_config()
    nbyoc.show_config(as_json=True)
    assert_type(nbyoc.cache.info(), dict[str, Any])
    with nbyoc.limits.override(folded_bytes=2**20):
        pass
    with nbyoc.progress.progress(3, "compiling") as bar:
        bar.update()
