"""Building: every external function of a module through its backend's codegen.

>>> import nbyoc
>>> from nbyoc.ir import IRModule
>>> x = nbyoc.var("x", (2,))
>>> build(IRModule({"main": nbyoc.function([x], -x)}))   # nothing external: nothing to build
{}
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping

from ..errors import CacheSecurityError, CodegenError, CompileError
from ..ir.nodes import Function, IRModule
from ..progress import progress
from ..runtime.module import Module
from .registry import get_codegen

#: The module ``build`` is building, for a codegen whose choice for one region depends on
#: the others (``module_being_built``).
_BUILDING: contextvars.ContextVar[IRModule | None] = contextvars.ContextVar(
    "nbyoc_building", default=None
)


def module_being_built() -> IRModule | None:
    """The module whose external functions ``build`` is building now (in this thread),
    or None outside a build: a codegen may weigh a region against the whole (the llvm
    backend runs a small region as a program in a large model, ``codegen.llvm.lower``).

    >>> module_being_built() is None
    True
    """
    return _BUILDING.get()


def build(
    module: IRModule, options: Mapping[str, Mapping] | None = None, fallback=None
) -> dict[str, Module]:
    """Run the codegen of each function with a ``Compiler`` attribute; return the
    runtime modules by global symbol. Every module must provide its symbol.

    ``options[backend]`` holds keyword arguments for that backend's codegen. A codegen
    that fails raises ``CodegenError``, unless ``fallback(name, func, error)`` is given:
    it returns the module built elsewhere, or None for the host (``codegen.fallback``).
    """
    options = dict(options or {})
    external = {n: f for n, f in module.functions.items() if f.attrs.get("Compiler") is not None}
    built = {}
    if not external:
        return built
    # Each region is one unit of the bar unless its backend counts its own (``progress``).
    token = _BUILDING.set(module)
    try:
        with progress(len(external), "compiling") as bar:
            for name, func in external.items():
                with bar.region(name):
                    try:
                        built[name] = _build_one(name, func, options)
                    except CodegenError as e:
                        if fallback is None:
                            raise
                        moved = fallback(name, func, e)
                        if moved is not None:
                            built[name] = moved
    finally:
        _BUILDING.reset(token)
    return built


def _build_one(name: str, func: Function, options: Mapping) -> Module:
    """The runtime module of external function ``name``, from its backend's codegen."""
    compiler = func.attrs["Compiler"]
    if func.attrs.get("global_symbol", name) != name:
        raise CompileError(f"@{name} has global_symbol {func.attrs['global_symbol']!r}")
    codegen = get_codegen(compiler)
    kwargs = dict(options.get(compiler, {}))
    if kwargs:
        import inspect  # only when options are given: it costs 10 ms of start-up

        try:
            inspect.signature(codegen).bind(func, **kwargs)
        except TypeError as e:
            raise CompileError(f"unknown option for the {compiler!r} codegen: {e}") from None
    try:
        runtime_module = codegen(func, **kwargs)
    except CacheSecurityError:
        raise  # not the codegen's failure: the cache's own message says what to fix
    except Exception as e:  # the original stays chained as __cause__
        raise CodegenError(
            f"the {compiler!r} codegen failed on @{name}: {type(e).__name__}: {e}"
        ) from e
    if not isinstance(runtime_module, Module):
        raise CodegenError(
            f"the {compiler!r} codegen returned {runtime_module!r}; it must return a "
            f"nbyoc.runtime.Module"
        )
    try:
        runtime_module.get_function(name)
    except Exception as e:
        raise CodegenError(
            f"the {compiler!r} module built for @{name} does not provide it: {e}"
        ) from e
    return runtime_module
