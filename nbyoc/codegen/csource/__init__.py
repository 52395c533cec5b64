"""The ``csource`` backend: an external function becomes C source in the shape of the
BYOC guide's C codegen (``emit``), compiled by the system C compiler and called through
cffi (``nbyoc.codegen.csource.module``).

Its support is derived from its rules table (``rules.C_RULES``: op -> C expression)
and its C types (``rules.C_TYPES``): an op without a row, or a call of a dtype C lacks
(bfloat16, the narrow dtypes), is never offered to it, and runs elsewhere.

>>> import nbyoc
>>> x = nbyoc.var("x", (3,))
>>> nbyoc.codegen.supports("csource", nbyoc.exp(x)), nbyoc.codegen.supports("csource", x @ x)
(True, False)
"""

from __future__ import annotations

from ...ir.nodes import Function
from ...ir.types import tensor_types
from ...runtime.module import builtin_module_class
from ...transform.support import register_op_support
from ..registry import register_codegen
from .emit import Subgraph, emit_c
from .rules import C_RULES, C_TYPES

__all__ = ["BACKEND", "Subgraph", "csource_codegen", "emit_c", "lowerable_ops"]

BACKEND = "csource"


@register_codegen(BACKEND)
def csource_codegen(func: Function, fused: bool = False, native: bool = False):
    """The csource codegen: C source, compiled by the system C compiler on first use;
    ``fused`` for one loop nest instead of one per node, ``native`` to build for this
    machine's CPU (``-march=native``)."""
    return builtin_module_class(BACKEND)(func, fused=fused, native=native)


def lowerable_ops() -> list[str]:
    """The ops csource has a C rule for: exactly the ops it claims.

    >>> "add" in lowerable_ops(), "matmul" in lowerable_ops()
    (True, False)
    """
    return list(C_RULES)


def has_c_types(call) -> bool:
    """True if every operand and result of ``call`` has a C type (``rules.C_TYPES``).

    >>> import nbyoc
    >>> has_c_types(nbyoc.var("x", (2,)) + 1), has_c_types(nbyoc.var("x", (2,), "bfloat16") + 1)
    (True, False)
    """
    return all(t.dtype in C_TYPES for t in [*(a.type for a in call.args), *tensor_types(call.type)])


def c_support(call) -> bool | str:
    """csource's support predicate: True, or why not (a dtype C has no type for).

    >>> import nbyoc
    >>> c_support(nbyoc.var("x", (2,), "bfloat16") + 1)
    'dtype bfloat16 not supported (C has no type for it)'
    """
    if has_c_types(call):
        return True
    types = [*(a.type for a in call.args), *tensor_types(call.type)]
    unheld = dict.fromkeys(t.dtype for t in types if t.dtype not in C_TYPES)
    return f"dtype {', '.join(unheld)} not supported (C has no type for it)"


for _op in lowerable_ops():
    register_op_support(BACKEND, _op, c_support)
