"""The codegen registry: each backend's codegen, which turns its external functions into
runtime modules. What a backend supports is declared with the passes
(``nbyoc.transform.support``); the names are re-exported here for the backends.

>>> import nbyoc
>>> @nbyoc.register_codegen("doc_backend")
... def codegen(func):
...     raise NotImplementedError
>>> "doc_backend" in registered_backends(), get_codegen("doc_backend") is codegen
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..errors import DuplicateRegistrationError, NbyocError, UnknownBackendError
from ..ir.names import symbol_prefix
from ..ir.nodes import Function
from ..transform.support import (
    _KNOWN,
    HOST,
    Predicate,
    check_known,
    check_new_backend_name,
    declare_backend,
    declared_ops,
    refusal,
    register_op_support,
    supports,
)

__all__ = [
    "HOST",
    "Predicate",
    "check_backend",
    "check_known",
    "declared_ops",
    "get_codegen",
    "refusal",
    "register_codegen",
    "register_op_support",
    "registered_backends",
    "supports",
    "symbol_prefix",
]

_CODEGENS: dict[str, Callable] = {}

#: What ``register_codegen`` decorates: a function of an external function.
CodegenT = TypeVar("CodegenT", bound=Callable[[Function], object])


def register_codegen(compiler: str, replace: bool = False) -> Callable[[CodegenT], CodegenT]:
    """Decorator registering the codegen of ``compiler``.

    The codegen takes one external function (attrs ``Compiler`` and
    ``global_symbol``) and returns a ``nbyoc.runtime.Module`` whose
    ``get_function(global_symbol)`` runs it. A second codegen for the same
    backend is refused unless ``replace=True`` (e.g. re-running a notebook cell).
    """
    check_new_backend_name(compiler)

    def register(codegen: Callable[[Function], object]):
        if compiler in _CODEGENS and not replace:
            raise DuplicateRegistrationError(
                f"a codegen for {compiler!r} is already registered; pass replace=True to replace it"
            )
        if not callable(codegen):
            raise NbyocError(f"the codegen for {compiler!r} must be callable, got {codegen!r}")
        _CODEGENS[compiler] = codegen
        declare_backend(compiler)
        return codegen

    return register


def registered_backends() -> list[str]:
    """Names accepted by ``nbyoc.compile``: the host, then every backend with a codegen."""
    return [HOST, *_CODEGENS]


def check_backend(compiler: str) -> str:
    """``compiler`` if it can be compiled for, else an error listing the registered ones."""
    if compiler != HOST and compiler not in _CODEGENS:
        hint = " (it declares op support but has no codegen)" if compiler in _KNOWN else ""
        raise UnknownBackendError(
            f"unknown backend {compiler!r}{hint}; registered backends: "
            f"{', '.join(registered_backends())}"
        )
    return compiler


def get_codegen(compiler: str) -> Callable:
    """The codegen registered for ``compiler``."""
    if compiler == HOST:
        raise UnknownBackendError(
            "the host has no codegen: its functions run on the NumPy executor"
        )
    check_backend(compiler)
    return _CODEGENS[compiler]
