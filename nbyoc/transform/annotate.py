"""``annotate_target``: tag every op call with the backend that will run it.

>>> import nbyoc
>>> nbyoc.register_op_support("doc_annotate", "add")
>>> a, b = nbyoc.var("a", (2,)), nbyoc.var("b", (2,))
>>> regions = annotate_target(nbyoc.function([a, b], nbyoc.exp(a + b)), ["doc_annotate"])
>>> sorted(regions.target.values())
['doc_annotate', 'host']
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import NbyocError
from ..ir.nodes import Function
from ..ir.traversal import post_order
from .regions import Regions, is_op_call
from .support import HOST, OperatorSupport


def annotate_target(func: Function, targets: str | Sequence[str] | OperatorSupport) -> Regions:
    """Tag each op call with the first of ``targets`` (backend names in priority order, or
    an ``OperatorSupport``) that supports it, else the host. Each tagged call starts in a
    region of its own."""
    support = targets if isinstance(targets, OperatorSupport) else OperatorSupport(targets)
    if not isinstance(func, Function):
        raise NbyocError(f"annotate_target takes an nbyoc Function, got {type(func).__name__}")
    tags, regions = {}, {}
    for node in post_order([func.body]):
        if is_op_call(node):
            tags[node] = support.target(node)
            if tags[node] != HOST:
                regions[node] = len(regions)
    return Regions(func, tags, regions)
