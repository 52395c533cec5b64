"""Fallback at compile time: a region whose codegen fails moves to the next backend of
the compile that takes all of it, else to the host (``runtime.fallback`` says how, and
moves a region whose module fails its first call the same way).

A region moved to the host stays a function of the module, without its ``Compiler``:
the host executor runs it where ``main`` calls it, and an archive holds it as it is.

>>> import warnings, numpy as np, nbyoc
>>> from nbyoc.runtime import HostFunction, Module, destination_passing
>>> nbyoc.register_op_support("doc_flaky", "add", replace=True)
>>> @nbyoc.register_codegen("doc_flaky", replace=True)
... def flaky(func):
...     raise RuntimeError("no device")
>>> a = nbyoc.var("a", (2,))
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     fn = nbyoc.compile(nbyoc.function([a], (a + a) * 2.0), backend="doc_flaky")
>>> fn(np.ones(2, np.float32))
array([4., 4.], dtype=float32)
>>> print(*fn.fallbacks)
@doc_flaky_0: doc_flaky -> host at codegen (RuntimeError: no device)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..ir.nodes import Call, Function, IRModule
from ..ir.traversal import post_order
from ..runtime.fallback import Fallback, announce, move
from ..runtime.rebuild import register_region_builder
from ..transform.support import supports
from .build import _build_one


class Fallbacks:
    """``build``'s ``fallback``: moves each region whose codegen fails (``move``), warns,
    and remembers the moves; ``apply(module)`` is the module with them."""

    def __init__(self, backends: str | Sequence[str], options: Mapping):
        self.backends, self.options = backends, options
        self.moved: dict[str, Function] = {}
        self.records: list[Fallback] = []

    def __call__(self, name: str, func: Function, error: Exception):
        moved, module, record = move(func, error, self.backends, self.options, "codegen")
        self.moved[name] = moved
        self.records.append(record)
        announce(record, stacklevel=5)  # (the user's nbyoc.compile call)
        return module

    def apply(self, module: IRModule) -> IRModule:
        if not self.moved:
            return module
        return IRModule({**module.functions, **self.moved})


def supports_all(backend: str, func: Function) -> bool:
    """Whether ``backend`` declares support for every call of ``func``."""
    return all(
        supports(backend, node) for node in post_order([func.body]) if isinstance(node, Call)
    )


register_region_builder(_build_one, supports_all)
