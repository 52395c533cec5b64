"""Source of plain loop nests and subscripts, shared by the llvm kernel's stages.

>>> print("\\n".join(loops((2, 3), ["x[i, j] = 0"], False, ["i", "j"])))
for i in range(opaque(2)):
    for j in range(3):
        x[i, j] = 0
>>> subscript(["i"]), subscript([])
('i,', '()')
"""

from __future__ import annotations

import re

#: A loop with loops inside it and at most this many iterations runs to an opaque
#: bound (``nbyoc.runtime.llvm.opaque``): LLVM would unroll it fully, and its schedulers
#: take time quadratic in the length of the block that makes.
UNROLLED_MAX = 64
#: The kernel module's import of ``opaque``.
OPAQUE_IMPORT = "from nbyoc.runtime.llvm.opaque import opaque"
#: The kernel module's import of ``vector_width`` (see ``with_vector_width``).
VECTOR_WIDTH_IMPORT = "from nbyoc.runtime.llvm.vector_width import vector_width"
#: LLVM's own choice of width for the loops it vectorises, on every x86-64 CPU up to
#: AVX2 and on Intel's AVX-512 ones (there it prefers 256 bits on purpose).
DEFAULT_VECTOR_BITS = 256
#: A function's ``def`` line or a parallel loop's header (Numba compiles a ``prange``
#: body as a function of its own): where the width applies from.
_FUNCTION_START = re.compile(r"^(\s*)(def \w+\(.*\)|for \w+ in prange\(.*\)):$")


def with_vector_width(lines: list[str], bits: int) -> list[str]:
    """``lines`` of a kernel module with every function and ``prange`` body starting by
    ``vector_width(bits)`` (``nbyoc.runtime.llvm.vector_width``), when ``bits`` is wider than
    what LLVM picks by itself.

    >>> with_vector_width(["def f(a):", "    for i in prange(4):", "        a[i] = 0"], 512)
    ['def f(a):', '    vector_width(512)', '    for i in prange(4):', \
'        vector_width(512)', '        a[i] = 0']
    """
    if bits <= DEFAULT_VECTOR_BITS:
        return lines
    result = []
    for line in lines:
        result.append(line)
        start = _FUNCTION_START.match(line)
        if start:
            result.append(f"{start.group(1)}    vector_width({bits})")
    return result


def outer(n) -> str:
    """The bound of a loop that has loops inside it (see ``UNROLLED_MAX``).

    >>> outer(24), outer(1000), outer("hi")
    ('opaque(24)', '1000', 'hi')
    """
    return f"opaque({n})" if isinstance(n, int) and n <= UNROLLED_MAX else str(n)


def loops(shape, inner, parallel, names) -> list[str]:
    """Nested loops over ``shape`` with index names ``names`` around ``inner`` (the
    outermost a ``prange`` when ``parallel`` and it has two iterations or more: Numba
    compiles every ``prange`` of a kernel as a function of its own, about a second
    each, and one over a single iteration shares nothing out; a detector at batch 1
    had 30 of them, copying each operand of its concatenates).

    >>> loops((1, 8), ["x[i, j] = 0"], True, ["i", "j"])[0]
    'for i in range(opaque(1)):'
    >>> loops((2, 8), ["x[i, j] = 0"], True, ["i", "j"])[0]
    'for i in prange(2):'
    """
    lines = []
    for d, (n, name) in enumerate(zip(shape, names)):
        shared = parallel and d == 0 and not (isinstance(n, int) and n < 2)
        loop = "prange" if shared else "range"
        bound = outer(n) if d < len(shape) - 1 and loop == "range" else n
        lines.append("    " * d + f"for {name} in {loop}({bound}):")
    return lines + ["    " * len(shape) + line for line in inner]


def subscript(parts) -> str:
    """An index expression of ``parts`` (a 1-tuple keeps its comma; none is ``()``)."""
    if not parts:
        return "()"
    return ", ".join(parts) + ("," if len(parts) == 1 else "")
