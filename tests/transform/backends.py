"""Test backends: codegens whose runtime modules evaluate with NumPy, so the
passes and the Executable can be tested without a real compiler.

Each module counts its calls, so tests can see that work really was offloaded.
"""

from __future__ import annotations

import numpy as np

import nbyoc
from nbyoc.runtime import HostFunction, Module, destination_passing

TYPE_KEY = "numpy_test"


@nbyoc.register_loader(TYPE_KEY)
class NumpyModule(Module):
    """Runs one external function with the NumPy reference ops."""

    type_key = TYPE_KEY

    def __init__(self, func: nbyoc.ir.Function):
        self.func = func
        self.symbol = func.attrs["global_symbol"]
        self.calls = 0
        self._run = HostFunction(func)

    def _impl(self, inputs, outputs):
        self.calls += 1
        result = self._run(*inputs)
        results = result if isinstance(result, tuple) else (result,)
        for out, value in zip(outputs, results):
            np.copyto(out, value)

    def get_function(self, symbol: str):
        if symbol != self.symbol:
            raise nbyoc.NbyocError(f"this module has {self.symbol}, not {symbol}")
        return destination_passing(self.func, self._impl)

    def get_source(self) -> str:
        return str(self.func)

    def save_to_bytes(self) -> bytes:
        return nbyoc.to_json(self.func).encode()

    @classmethod
    def load_from_bytes(cls, data: bytes) -> NumpyModule:
        return cls(nbyoc.from_json(data))


def register(name: str, ops, predicate=None) -> str:
    """A backend called ``name`` that runs ``ops`` with NumPy."""
    for op in ops:
        nbyoc.register_op_support(name, op, predicate)
    nbyoc.register_codegen(name)(NumpyModule)
    return name


ARITH = register("t_arith", ["add", "subtract", "multiply", "divide", "maximum", "negative"])
TRANSC = register("t_transc", ["exp", "tanh", "add", "sigmoid"])
F32_ONLY = register("t_f32", ["add", "multiply"], lambda call: call.type.dtype == "float32")
REDUCE = register("t_reduce", ["sum", "max", "mean", "matmul", "relu"])
