"""What each backend supports, and the codegen that turns its functions into runtime modules.

A backend ("compiler", in the reference design's words) is known by name. It
declares op support, optionally with a predicate on the typed call, and
registers one codegen: a function from an external ``ir.Function`` to a
``nbyoc.runtime.Module``.

>>> import nbyoc
>>> nbyoc.register_op_support("doc_backend", "add")
>>> nbyoc.register_op_support("doc_backend", "relu", lambda call: call.type.dtype == "float32")
>>> x = nbyoc.var("x", (2,), "int32")
>>> supports("doc_backend", x + x), supports("doc_backend", nbyoc.relu(x))
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import (
    DuplicateRegistrationError,
    IRError,
    NbyocError,
    UndecidableSizeError,
    UnknownBackendError,
)
from ..ir.names import check_backend_name, check_symbol
from ..ir.nodes import Call, Function
from ..ir.op import Op, get_op

#: The name of the NumPy host executor, which runs whatever no backend takes.
HOST = "host"

Predicate = Callable[[Call], bool]
_SUPPORT: dict[str, dict[str, Predicate | None]] = {}
_CODEGENS: dict[str, Callable] = {}


def _check_backend_name(compiler) -> str:
    check_backend_name(compiler)
    if compiler == HOST:
        raise DuplicateRegistrationError(f"{HOST!r} is the built-in NumPy executor's name")
    return compiler


def register_op_support(
    compiler: str, op: str, predicate: Predicate | None = None, replace: bool = False
) -> None:
    """Declare that ``compiler`` runs ``op`` (only where ``predicate(call)`` is true, if given).

    The call handed to the predicate is typed, so it can look at
    ``call.type``, ``call.args[i].type`` and ``call.attrs``. A second
    declaration for the same backend and op is refused unless ``replace=True``.
    """
    _check_backend_name(compiler)
    get_op(op)  # refuses unknown ops, suggesting close names
    if predicate is not None and not callable(predicate):
        raise NbyocError(f"the predicate for {compiler}/{op} must be callable, got {predicate!r}")
    ops = _SUPPORT.setdefault(compiler, {})
    if op in ops and not replace:
        raise DuplicateRegistrationError(
            f"support for op {op!r} on {compiler!r} is already registered; pass replace=True "
            f"to replace it"
        )
    ops[op] = predicate


def register_codegen(compiler: str, replace: bool = False):
    """Decorator registering the codegen of ``compiler``.

    The codegen takes one external function (attrs ``Compiler`` and
    ``global_symbol``) and returns a ``nbyoc.runtime.Module`` whose
    ``get_function(global_symbol)`` runs it. A second codegen for the same
    backend is refused unless ``replace=True`` (e.g. re-running a notebook cell).
    """
    _check_backend_name(compiler)

    def register(codegen: Callable[[Function], object]):
        if compiler in _CODEGENS and not replace:
            raise DuplicateRegistrationError(
                f"a codegen for {compiler!r} is already registered; pass replace=True to replace it"
            )
        if not callable(codegen):
            raise NbyocError(f"the codegen for {compiler!r} must be callable, got {codegen!r}")
        _CODEGENS[compiler] = codegen
        return codegen

    return register


def registered_backends() -> list[str]:
    """Names accepted by ``nbyoc.compile``: the host, then every backend with a codegen."""
    return [HOST, *_CODEGENS]


def check_backend(compiler: str) -> str:
    """``compiler`` if it can be compiled for, else an error listing the registered ones."""
    if compiler != HOST and compiler not in _CODEGENS:
        hint = " (it declares op support but has no codegen)" if compiler in _SUPPORT else ""
        raise UnknownBackendError(
            f"unknown backend {compiler!r}{hint}; registered backends: "
            f"{', '.join(registered_backends())}"
        )
    return compiler


def check_known(compiler: str) -> str:
    """``compiler`` if it declared op support or has a codegen (enough to partition for)."""
    if compiler not in _SUPPORT and compiler not in _CODEGENS:
        raise UnknownBackendError(
            f"unknown backend {compiler!r}: it declares no op support; registered backends: "
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


def declared_ops(compiler: str) -> list[str]:
    """The ops ``compiler`` declared support for (each may carry a predicate).

    >>> "add" in declared_ops("csource"), "matmul" in declared_ops("csource")
    (True, False)
    """
    return list(_SUPPORT.get(compiler, {}))


def supports(compiler: str, call: Call) -> bool:
    """True if ``compiler`` declared support for ``call``'s op and its predicate accepts it."""
    if not isinstance(call.op, Op):
        return False
    ops = _SUPPORT.get(compiler, {})
    if call.op.name not in ops:
        return False
    predicate = ops[call.op.name]
    if predicate is None:
        return True
    try:
        return bool(predicate(call))
    except UndecidableSizeError:
        # A condition on sizes only the call's binding settles: the host takes the op (a
        # binding the backend would take is built from the concrete function instead).
        return False
    except Exception as e:
        raise NbyocError(
            f"the op-support predicate of {compiler}/{call.op.name} failed on {call!r}: {e}"
        ) from e


def symbol_prefix(compiler: str) -> str:
    """``compiler`` made into a C identifier, to prefix global symbols ``<prefix>_<n>``
    (prefixed with ``b_`` when it would start as generated code's names do).

    >>> symbol_prefix("my-backend.v2"), symbol_prefix("3d"), symbol_prefix("nbyoc_x")
    ('my_backend_v2', '_3d', 'b_nbyoc_x')
    """
    name = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in compiler)
    name = name if not name[0].isdigit() else "_" + name
    try:
        check_symbol(f"{name}_0")
    except IRError:
        name = f"b_{name}"
    return name
