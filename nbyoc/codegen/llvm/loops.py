"""Source of plain loop nests and subscripts, shared by the llvm kernel's stages.

>>> print("\\n".join(loops((2, 3), ["x[i, j] = 0"], False, ["i", "j"])))
for i in range(opaque(2)):
    for j in range(3):
        x[i, j] = 0
>>> subscript(["i"]), subscript([])
('i,', '()')
"""

from __future__ import annotations

#: A loop with loops inside it and at most this many iterations runs to an opaque
#: bound (``nbyoc.runtime.opaque``): LLVM would unroll it fully, and its schedulers
#: take time quadratic in the length of the block that makes.
UNROLLED_MAX = 64
#: The kernel module's import of ``opaque``.
OPAQUE_IMPORT = "from nbyoc.runtime.opaque import opaque"


def outer(n) -> str:
    """The bound of a loop that has loops inside it (see ``UNROLLED_MAX``).

    >>> outer(24), outer(1000), outer("hi")
    ('opaque(24)', '1000', 'hi')
    """
    return f"opaque({n})" if isinstance(n, int) and n <= UNROLLED_MAX else str(n)


def loops(shape, inner, parallel, names) -> list[str]:
    """Nested loops over ``shape`` with index names ``names`` around ``inner`` (the
    outermost a ``prange`` when ``parallel``)."""
    lines = []
    for d, (n, name) in enumerate(zip(shape, names)):
        loop = "prange" if parallel and d == 0 else "range"
        bound = outer(n) if d < len(shape) - 1 and loop == "range" else n
        lines.append("    " * d + f"for {name} in {loop}({bound}):")
    return lines + ["    " * len(shape) + line for line in inner]


def subscript(parts) -> str:
    """An index expression of ``parts`` (a 1-tuple keeps its comma; none is ``()``)."""
    if not parts:
        return "()"
    return ", ".join(parts) + ("," if len(parts) == 1 else "")
