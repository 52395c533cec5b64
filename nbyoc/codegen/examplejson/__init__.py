"""The ``examplejson`` backend: an external function becomes ExampleJSON text (the BYOC
guide's graph format, written and read by ``format`` and ``parse``), run by an
interpreter runtime (``nbyoc.codegen.examplejson.module``) that calls one JIT kernel per node.

The per-node kernels are the llvm backend's, so it takes the same ops on the same
terms: its support is llvm's public ``support_rules()`` table.

>>> import nbyoc
>>> nbyoc.codegen.supports("examplejson", nbyoc.exp(nbyoc.var("x", (3,))))
True
"""

from __future__ import annotations

from ...ir.nodes import Function
from ...runtime.module import builtin_module_class
from ...transform.support import register_op_support
from .. import llvm
from ..registry import register_codegen
from .format import FROM_GUIDE, GUIDE_NAMES, to_examplejson

__all__ = ["BACKEND", "FROM_GUIDE", "GUIDE_NAMES", "examplejson_codegen", "to_examplejson"]

BACKEND = "examplejson"


@register_codegen(BACKEND)
def examplejson_codegen(func: Function):
    """The examplejson codegen: ExampleJSON text, run by the interpreter runtime."""
    return builtin_module_class(BACKEND)(to_examplejson(func))


for _op, _condition in llvm.support_rules().items():
    register_op_support(BACKEND, _op, _condition)
