"""Source of plain loop nests and subscripts, shared by the llvm kernel's stages.

>>> print("\\n".join(loops((2, 3), ["x[i, j] = 0"], False, ["i", "j"])))
for i in range(2):
    for j in range(3):
        x[i, j] = 0
>>> subscript(["i"]), subscript([])
('i,', '()')
"""

from __future__ import annotations


def loops(shape, inner, parallel, names) -> list[str]:
    """Nested loops over ``shape`` with index names ``names`` around ``inner`` (the
    outermost a ``prange`` when ``parallel``)."""
    lines = []
    for d, (n, name) in enumerate(zip(shape, names)):
        loop = "prange" if parallel and d == 0 else "range"
        lines.append("    " * d + f"for {name} in {loop}({n}):")
    return lines + ["    " * len(shape) + line for line in inner]


def subscript(parts) -> str:
    """An index expression of ``parts`` (a 1-tuple keeps its comma; none is ``()``)."""
    if not parts:
        return "()"
    return ", ".join(parts) + ("," if len(parts) == 1 else "")
