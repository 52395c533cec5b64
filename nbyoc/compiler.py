"""``nbyoc.compile``: partition a function for a backend, build it, and wrap it
in an ``Executable`` you call with arrays.

>>> import numpy as np, nbyoc
>>> a, b = nbyoc.var("a", (2, 2)), nbyoc.var("b", (2, 2))
>>> fn = nbyoc.compile(nbyoc.function([a, b], a @ b + 1.0), backend="host")
>>> fn(np.eye(2, dtype=np.float32), np.full((2, 2), 3, np.float32))
array([[4., 4.],
       [4., 4.]], dtype=float32)
"""

from __future__ import annotations

import difflib
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .codegen.build import build
from .codegen.fallback import Fallbacks
from .codegen.registry import check_backend
from .errors import NbyocError, PerShapeWarning
from .ir.nodes import Call, Function, IRModule
from .ir.specialize import specialize
from .ir.traversal import post_order
from .ir.verify import verify as well_formed
from .runtime.executable import _GENERIC_BACKENDS, Executable
from .runtime.sizes import is_symbolic, register_specializer
from .transform.inline import inline_externals
from .transform.partition import plain
from .transform.pipeline import MAX_REGION_CALLS, partition
from .transform.support import HOST, supports


def compile(
    func: Function | IRModule,
    backend: str | Sequence[str] = "llvm",
    *,
    merge: bool = True,
    min_size: int = 1,
    bind_constants: bool = True,
    max_size: int | None = MAX_REGION_CALLS,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    strict: bool = False,
    verify: bool = False,
) -> Executable:
    """Compile ``func`` for ``backend`` (a registered name, or several in priority order;
    the default, ``"llvm"``, fuses what it can into Numba kernels).

    The function is partitioned (see ``nbyoc.partition`` for the options),
    every external function is built by its backend's codegen, and ``main``
    runs on the NumPy host executor, calling them. An ``IRModule`` is taken as
    already partitioned: its functions with a ``Compiler`` attribute are built.
    ``options`` maps a backend name to keyword arguments for its codegen, e.g.
    ``{"csource": {"fused": True}}``.
    Calling the result checks argument count, shapes and dtypes and returns an
    ndarray, or a tuple of them for several outputs.

    A region whose codegen raises, or whose module fails its first call, moves to the
    next backend of ``backend`` that takes it, else to the host, with a
    ``FallbackWarning`` (``fn.fallbacks`` lists the moves); ``strict=True`` raises
    instead. ``verify=True`` checks the first call's external functions against the host
    (``Executable.verify``) and raises ``VerificationError`` if one is off.
    """
    started = time.perf_counter()
    backends = [backend] if isinstance(backend, str) else list(backend)
    for name in backends:
        check_backend(name)
    if isinstance(func, IRModule):
        module = well_formed(func)
    elif isinstance(func, Function):
        func = plain(well_formed(func))
        offload = [b for b in backends if b != HOST]
        if offload:
            module = partition(
                func, offload, merge=merge, min_size=min_size,
                bind_constants=bind_constants, max_size=max_size,
            )  # fmt: skip
        else:
            module = IRModule({"main": func})
    else:
        raise NbyocError(
            f"compile() takes an nbyoc Function or IRModule, got {type(func).__name__}"
        )
    options = check_options(options, backends, module)
    backend = backend if isinstance(backend, str) else backends
    if is_symbolic(module):
        # Built for each binding of the sizes at its first call (SymbolicSizes): the
        # kernels are per structure, so a later size reuses what the first compiled.
        executable = Executable(module, {}, backend, options, strict=strict, verify=verify)
        if not executable.size_generic:
            _say_per_shape(module)
    else:
        executable = _built(module, backend, options, strict, verify, options)
    executable.compile_seconds = time.perf_counter() - started
    return executable


def _built(module: IRModule, backend, options, strict: bool, verify: bool,
           build_options) -> Executable:  # fmt: skip
    """The executable of ``module`` (partitioned, of fixed shapes), each region built with
    ``build_options`` (a region whose codegen fails moved elsewhere, unless ``strict``)."""
    fallback = None if strict else Fallbacks(backend, options)
    runtime_modules = build(module, build_options, fallback)
    if fallback is not None:
        module = fallback.apply(module)
    records = fallback.records if fallback is not None else ()
    return Executable(module, runtime_modules, backend, options, strict=strict,
                      fallbacks=records, verify=verify)  # fmt: skip


def _say_per_shape(module: IRModule) -> None:
    """Warn that a backend of ``module`` builds each binding of its sizes for its shapes."""
    per_shape = sorted(_backends_of(module) - set(SIZE_GENERIC))
    names = sorted(set().union(*(p.type.symbols for p in module["main"].params)))
    warnings.warn(
        f"{', '.join(per_shape)} builds code for fixed shapes: each new binding of the "
        f"symbolic size(s) {', '.join(names)} compiles there (llvm runs every size on the "
        f"kernels of its first; fn.size_generic says which)",
        PerShapeWarning,
        stacklevel=3,
    )


def _specialized(module: IRModule, binding, backend, options, generic: bool,
                 strict: bool = False, verify: bool = False) -> Executable:  # fmt: skip
    """``module`` (partitioned, symbolic) built for one binding of its sizes. ``generic``:
    a backend that can make its code size-generic is asked to (``SIZE_GENERIC``), and
    the executable's ``fixed_pays`` says whether a build for the binding's fixed shapes
    would run faster (a region small enough to be a compiled kernel rather than a
    program: ``runtime.sizes.STABLE_CALLS``). When the sizes change what a backend takes
    (a call the binding empties), the binding is partitioned for its own sizes instead
    (``inline_externals``)."""
    concrete = specialize(module, binding)
    if not _still_supported(concrete):
        return compile(inline_externals(concrete), backend, options=options, strict=strict,
                       verify=verify)  # fmt: skip
    if not generic:
        return _built(concrete, backend, options, strict, verify, options)
    used = [SIZE_GENERIC[name] for name in _backends_of(module) if name in SIZE_GENERIC]
    generic_options = dict(options)
    for generic_build in used:
        concrete = generic_build.prepare(module, concrete, binding)
        name = generic_build.backend
        generic_options[name] = {**generic_build.options, **options.get(name, {})}
    made = _built(concrete, backend, options, strict, verify, generic_options)
    made.fixed_pays = any(generic_build.fixed_pays(concrete) for generic_build in used)
    return made


def _backends_of(module: IRModule) -> set[str]:
    return {f.attrs["Compiler"] for f in module.functions.values() if "Compiler" in f.attrs}


def _still_supported(module: IRModule) -> bool:
    """Whether every call of every external function is one its backend takes."""
    for func in module.functions.values():
        backend = func.attrs.get("Compiler")
        if backend is not None:
            for node in post_order([func.body]):
                if isinstance(node, Call) and not supports(backend, node):
                    return False
    return True


@dataclass(frozen=True)
class GenericBuild:
    """How a backend builds code that serves every binding of a function's symbolic
    sizes: its codegen ``options``; ``prepare(symbolic, concrete, binding)``, the specialised
    module as its codegen wants it; ``fixed_pays(concrete)``, whether a build for the
    binding's fixed shapes would run faster (``runtime.sizes.STABLE_CALLS``)."""

    backend: str
    options: dict
    prepare: Callable
    fixed_pays: Callable


def _llvm_generic_build() -> GenericBuild:
    from .codegen.llvm import generic

    return GenericBuild("llvm", {"size_generic": True}, generic.mark_symbolic,
                        generic.fixed_build_faster)  # fmt: skip


#: The backends whose code serves every binding of a function's symbolic sizes (the
#: kernels of one binding are then those of every other), by name.
SIZE_GENERIC = {"llvm": _llvm_generic_build()}
_GENERIC_BACKENDS.update(dict.fromkeys(SIZE_GENERIC, True))


register_specializer(_specialized)


def check_options(options, backends: list[str], module: IRModule) -> dict:
    """``options`` if every key names a backend of this compile and every value is a
    mapping of keyword arguments; else an error saying which one is wrong."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise NbyocError(
            f"options must map backend names to keyword arguments, e.g. "
            f"{{'llvm': {{'fuse': False}}}}; got {options!r}"
        )
    used = {*backends, *(f.attrs["Compiler"] for f in module.functions.values()
                         if "Compiler" in f.attrs)}  # fmt: skip
    for name, kwargs in options.items():
        if name not in used:
            close = difflib.get_close_matches(str(name), sorted(used), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise NbyocError(
                f"options name backend {name!r}, which this compile does not use "
                f"(it uses {', '.join(sorted(used))}){hint}"
            )
        if not isinstance(kwargs, Mapping):
            raise NbyocError(
                f"options[{name!r}] must be a dict of keyword arguments for the {name} "
                f"codegen, e.g. {{'fuse': False}} for llvm; got {kwargs!r}"
            )
    return dict(options)
