"""Building one region again from the runtime, which imports no codegen: verify's
bisection compiles pieces of a region for its backend, and a region whose module fails
its first call is built for the next backend. ``nbyoc.codegen.fallback`` registers how
(``register_region_builder``), as ``nbyoc.compiler`` registers the specializer of
``runtime.sizes``.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (2,))
>>> region = nbyoc.function([x], x * 2.0).with_attrs(Compiler="examplejson",
...                                                 global_symbol="examplejson_0")
>>> supported("examplejson", region), supported("csource", nbyoc.function([x], x @ x))
(True, False)
>>> run = callable_of(build_region(region, {}), region)
>>> run(np.ones(2, np.float32))
array([2., 2.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..errors import NbyocError
from ..ir.nodes import Function
from .module import Module

#: ``(name, func, options) -> Module`` (the codegen's build of one external function,
#: its failures raised as ``CodegenError``) and ``(backend, func) -> bool`` (whether the
#: backend takes every call of ``func``); set by ``nbyoc.codegen.fallback``.
_BUILDER: list[tuple[Callable, Callable]] = []


def register_region_builder(build_one: Callable, supports_all: Callable) -> None:
    """Set how one external function is built, and how support for it is asked."""
    _BUILDER[:] = [(build_one, supports_all)]


def _builder() -> tuple[Callable, Callable]:
    if not _BUILDER:
        raise NbyocError("import nbyoc to build regions (it registers the codegens)")
    return _BUILDER[0]


def build_region(func: Function, options: Mapping) -> Module:
    """The runtime module its ``Compiler`` attribute's codegen makes of ``func`` (an
    external function), with ``options`` (by backend) as ``nbyoc.compile`` has them."""
    build_one, _ = _builder()
    return build_one(func.attrs["global_symbol"], func, options)


def supported(backend: str, func: Function) -> bool:
    """Whether ``backend`` declares support for every call of ``func``."""
    _, supports_all = _builder()
    return supports_all(backend, func)


def callable_of(module: Module, func: Function) -> Callable:
    """``func``'s function in ``module``, allocating its outputs: inputs in, an array or a
    (nested) tuple of arrays out, as the host plan calls it."""
    from .executable import _allocating

    symbol = func.attrs["global_symbol"]
    return _allocating(module.get_function(symbol), func.ret_type)
