"""What each backend supports: the op-support registry the passes ask, and why a backend
refuses a call.

A backend declares the ops it runs, each optionally with a predicate on the typed call.
A predicate answers ``True`` (taken), ``False`` (refused) or a string: the reason it
refuses, which ``nbyoc.explain`` shows next to the op. The passes (``legalize``,
``annotate_target``) are given an ``OperatorSupport`` for their backends, as torch.fx's
partitioner is given its ``OperatorSupport``; backends register into this module, and no
pass imports a codegen. An op no backend has a rule for may be rewritten into ops one has
(``register_rewrite``): its refusal then says why the rewrite left the call whole.

>>> import nbyoc
>>> nbyoc.register_op_support("doc_support", "add")
>>> nbyoc.register_op_support("doc_support", "relu",
...     lambda call: call.type.dtype == "float32" or f"dtype {call.type.dtype} not supported")
>>> x = nbyoc.var("x", (2,), "int32")
>>> supports("doc_support", x + x), refusal("doc_support", nbyoc.relu(x))
(True, 'dtype int32 not supported')
>>> refusal("doc_support", nbyoc.exp(x))
'no rule for op exp'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import (
    DuplicateRegistrationError,
    NbyocError,
    UndecidableSizeError,
    UnknownBackendError,
)
from ..ir.names import check_backend_name
from ..ir.nodes import Call
from ..ir.op import Op, get_op

#: The name of the NumPy host executor, which runs whatever no backend takes.
HOST = "host"

#: A predicate answers True (taken), False or None (refused), or a string: the reason it
#: refuses.
Predicate = Callable[[Call], "bool | str | None"]
_SUPPORT: dict[str, dict[str, Predicate | None]] = {}
#: Every backend name the passes know: those declaring op support and those with a
#: codegen (``codegen.registry`` declares its own here), in registration order.
_KNOWN: dict[str, None] = {}
#: Graph rewrites that replace calls of an op no backend has a rule for by calls a
#: backend may take (``transform.conv_transpose``: phase convs), by op name: each says why
#: it leaves a call whole for a backend (a string), or None when it rewrites it there.
WhyWhole = Callable[[Call, str], "str | None"]
_REWRITES: dict[str, WhyWhole] = {}


def check_new_backend_name(compiler) -> str:
    """``compiler`` if it can name a backend: a valid name that is not the host's."""
    check_backend_name(compiler)
    if compiler == HOST:
        raise DuplicateRegistrationError(f"{HOST!r} is the built-in NumPy executor's name")
    return compiler


def declare_backend(compiler: str) -> None:
    """Make ``compiler`` known to the passes (a backend with a codegen and maybe no ops)."""
    _KNOWN[check_new_backend_name(compiler)] = None


def register_op_support(
    compiler: str, op: str, predicate: Predicate | None = None, replace: bool = False
) -> None:
    """Declare that ``compiler`` runs ``op`` (only where ``predicate(call)`` is true, if given).

    The call handed to the predicate is typed, so it can look at ``call.type``,
    ``call.args[i].type`` and ``call.attrs``. It may return a string instead of
    ``False``: the reason it refuses, shown by ``nbyoc.explain``. A second declaration
    for the same backend and op is refused unless ``replace=True``.

    >>> import nbyoc
    >>> nbyoc.register_op_support("doc_register", "exp",
    ...     lambda call: call.type.ndim <= 2 or "rank above 2")
    >>> refusal("doc_register", nbyoc.exp(nbyoc.var("x", (1, 2, 3))))
    'rank above 2'
    """
    check_new_backend_name(compiler)
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
    _KNOWN[compiler] = None


def register_rewrite(op: str, why_whole: WhyWhole) -> None:
    """Declare that a graph rewrite replaces calls of ``op`` for the backends that take
    what it makes; ``why_whole(call, compiler)`` says why it does not for ``compiler``,
    which ``refusal`` adds to "no rule for op ..." (and ``nbyoc.explain`` shows).

    >>> import numpy as np, nbyoc
    >>> x = nbyoc.var("x", (1, 2, 4))
    >>> y = nbyoc.conv_transpose(x, nbyoc.const(np.ones((2, 2, 3), np.float32)))
    >>> refusal("csource", y)  # (transform.conv_transpose registers its rewrite)
    'no rule for op conv_transpose, and its phase convs are refused too: no rule for op conv'
    """
    get_op(op)
    if op in _REWRITES:
        raise DuplicateRegistrationError(f"a rewrite of op {op!r} is already registered")
    _REWRITES[op] = why_whole


def known_backends() -> list[str]:
    """Every backend the passes can partition for, in registration order."""
    return list(_KNOWN)


def check_known(compiler: str) -> str:
    """``compiler`` if it declared op support or has a codegen (enough to partition for)."""
    if compiler not in _KNOWN:
        raise UnknownBackendError(
            f"unknown backend {compiler!r}: it declares no op support; known backends: "
            f"{', '.join([HOST, *_KNOWN])}"
        )
    return compiler


def declared_ops(compiler: str) -> list[str]:
    """The ops ``compiler`` declared support for (each may carry a predicate).

    >>> "add" in declared_ops("csource"), "matmul" in declared_ops("csource")
    (True, False)
    """
    return list(_SUPPORT.get(compiler, {}))


def refusal(compiler: str, call: Call) -> str | None:
    """Why ``compiler`` does not take ``call``, or None when it does: "no rule for op
    ...", its predicate's reason, or "its predicate refused" when that gave none."""
    if not isinstance(call.op, Op):
        return "not an op call"
    ops = _SUPPORT.get(compiler, {})
    if call.op.name not in ops:
        said = f"no rule for op {call.op.name}"
        why_whole = _REWRITES.get(call.op.name)
        reason = None if why_whole is None else why_whole(call, compiler)
        return said if reason is None else f"{said}, and {reason}"
    predicate = ops[call.op.name]
    if predicate is None:
        return None
    try:
        answer = predicate(call)
    except UndecidableSizeError as e:
        # A condition on sizes only the call's binding settles: the host takes the op (a
        # binding the backend would take is built from the concrete function instead).
        return f"its condition depends on symbolic sizes only a binding settles ({e})"
    except Exception as e:
        raise NbyocError(
            f"the op-support predicate of {compiler}/{call.op.name} failed on {call!r}: {e}"
        ) from e
    if isinstance(answer, str):
        return answer or "its predicate refused"
    return None if answer else "its predicate refused"


def supports(compiler: str, call: Call) -> bool:
    """True if ``compiler`` declared support for ``call``'s op and its predicate accepts it."""
    return refusal(compiler, call) is None


class OperatorSupport:
    """What the passes ask: which of ``backends`` (in priority order) takes each call, and
    why each one before it refused.

    >>> import nbyoc
    >>> support = OperatorSupport(["csource", "llvm"])
    >>> a = nbyoc.var("a", (4, 4))
    >>> support.target(a @ a), support.refusals(a @ a)
    ('llvm', [('csource', 'no rule for op matmul')])
    """

    def __init__(self, backends: str | Sequence[str]):
        names = [backends] if isinstance(backends, str) else list(backends)
        self.backends = [check_known(b) for b in names if b != HOST]

    def __repr__(self) -> str:
        return f"OperatorSupport({self.backends!r})"

    def takes(self, call: Call) -> bool:
        """Whether any of the backends takes ``call``."""
        return any(supports(b, call) for b in self.backends)

    def target(self, call: Call) -> str:
        """The first backend that takes ``call``, else the host."""
        return next((b for b in self.backends if supports(b, call)), HOST)

    def refusals(self, call: Call) -> list[tuple[str, str]]:
        """(backend, reason) for each backend asked before the one that takes ``call``
        (every backend, when none does)."""
        said = []
        for backend in self.backends:
            reason = refusal(backend, call)
            if reason is None:
                break
            said.append((backend, reason))
        return said
