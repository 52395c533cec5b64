"""The op catalog: every registered op by family, with the backends that run it. The
documentation's op table is this text (``python -m nbyoc ops``), and a test keeps them
equal.

A backend "runs" an op when it claims calls of it (its rules table has a row; a
support predicate may still leave some dtypes or sizes to others: no backend takes the
narrow storage dtypes, csource takes no bfloat16, llvm takes integer matmuls and those
with a 1-D operand only while small). An op with a decomposition that a backend lacks
runs there "decomposed"; anything else runs on the host.

>>> print(op_table().splitlines()[2])
| elementwise | `add` | yes | yes | yes |
"""

from __future__ import annotations

from .ir.op import get_op, list_ops
from .ir.ops import FAMILY_NAMES, FAMILY_OF
from .transform.support import declared_ops

BACKENDS = ("llvm", "csource", "examplejson")


def _cell(backend: str, name: str) -> str:
    if name in declared_ops(backend):
        return "yes"
    return "decomposed" if get_op(name).decompose is not None else "host"


def op_table() -> str:
    """The markdown table of every op nbyoc registers itself, family by family."""
    lines = ["| family | op | " + " | ".join(BACKENDS) + " |", "|---" * (2 + len(BACKENDS)) + "|"]
    for family in FAMILY_NAMES:
        for name in (n for n in list_ops() if FAMILY_OF.get(n) == family):
            cells = " | ".join(_cell(b, name) for b in BACKENDS)
            lines.append(f"| {family} | `{name}` | {cells} |")
    return "\n".join(lines)
