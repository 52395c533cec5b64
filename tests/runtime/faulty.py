"""Backends that go wrong on purpose, for the verify and fallback tests: one computes an
op as another (``swap``), one whose module raises on an op (``crash_on``), one whose
codegen refuses an op (``refuse``). Their modules run the (swapped) function with the
NumPy reference and are savable, so a fresh process that imports this loads them."""

from __future__ import annotations

import json

import numpy as np

import nbyoc
from nbyoc.ir.nodes import Call, Function
from nbyoc.ir.traversal import operands, post_order, with_operands
from nbyoc.runtime import HostFunction, Module, destination_passing

TYPE_KEY = "tests_faulty_module"


def op_names(func: Function) -> set[str]:
    return {n.op.name for n in post_order([func.body]) if isinstance(n, Call)}


def swapped(func: Function, table: dict) -> Function:
    """``func`` with each call of an op in ``table`` made a call of the op it names."""
    new = {p: p for p in func.params}
    for node in post_order([func.body], leaves=set(func.params)):
        if node in new:
            continue
        args = [new[a] for a in operands(node)]
        if isinstance(node, Call) and node.op.name in table:
            new[node] = nbyoc.call_op(table[node.op.name], *args, **node.attrs)
        else:
            new[node] = with_operands(node, args)
    return Function(func.params, new[func.body], func.attrs)


@nbyoc.register_loader(TYPE_KEY, replace=True)
class FaultyModule(Module):
    type_key = TYPE_KEY

    def __init__(self, func: Function, swap=None, crash_on=None):
        self.func, self.swap, self.crash_on = func, dict(swap or {}), crash_on
        self.run = HostFunction(swapped(func, self.swap))
        self.calls = 0

    def get_function(self, symbol):
        crashes = self.crash_on in op_names(self.func)

        def impl(inputs, outputs):
            self.calls += 1
            if crashes:
                raise RuntimeError(f"the {self.crash_on} kernel crashed")
            results = self.run(*inputs)
            for out, value in zip(outputs, results if isinstance(results, tuple) else [results]):
                np.copyto(out, value)

        return destination_passing(self.func, impl)

    def save_to_bytes(self):
        doc = {"swap": self.swap, "crash_on": self.crash_on,
               "function": json.loads(nbyoc.to_json(self.func))}  # fmt: skip
        return json.dumps(doc).encode()

    @classmethod
    def load_from_bytes(cls, data):
        doc = json.loads(data)
        return cls(nbyoc.from_json(json.dumps(doc["function"])), doc["swap"], doc["crash_on"])


def register(name: str, ops, *, swap=None, crash_on=None, refuse=None, built=None):
    """Backend ``name`` declaring ``ops``: its codegen raises on a region holding the op
    ``refuse``; its modules compute ``swap``'s ops as others and raise on ``crash_on``.
    ``built`` (a list) collects every function the codegen is given."""
    for op in ops:
        nbyoc.register_op_support(name, op, replace=True)

    @nbyoc.register_codegen(name, replace=True)
    def codegen(func):
        if built is not None:
            built.append(func)
        if refuse in op_names(func):
            raise NotImplementedError(f"{refuse} is not written yet")
        return FaultyModule(func, swap, crash_on)

    return name
