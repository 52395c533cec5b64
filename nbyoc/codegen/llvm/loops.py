"""Source of plain loop nests and subscripts, shared by the llvm kernel's stages.

>>> subscript(["i"]), subscript([])
('i,', '()')
"""

from __future__ import annotations

import math
import re

from .sizes import value

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


def lead_axes(shape: tuple[int, ...], parallel: bool = True) -> int:
    """How many leading axes a nest's outer loop runs over: in parallel, enough to give
    every thread work (at least 256 iterations when the shape has them); serial, one,
    so that the inner axes are loops LLVM can vectorise (a (1, 8, 12, 96) multiply
    walked as one flat odometer took 3.6 ns an element).

    >>> lead_axes((1, 8, 12, 96)), lead_axes((1, 8, 12, 96), parallel=False)
    (4, 1)
    """
    if not parallel:
        return 1
    lead = 1
    while lead < len(shape) and math.prod(map(value, shape[:lead])) < 256:
        lead += 1
    return lead


#: The range of a stage function's outer loop (its bounds ``lo, hi``). Unsigned, so
#: that Numba indexes without the wraparound test for negative indices (it cannot
#: prove ``lo`` non-negative): 17% fewer instructions in chain10's loop and 7.8 -> 7.2
#: ms at 1024x1024.
UNSIGNED_RANGE = "np.uint64(lo), np.uint64(hi)"


def loop_nest(
    shape, inner: list[str], names=None, lead: str | None = None, axes: int | None = None
) -> list[str]:
    """Loops over ``shape`` around ``inner``, the one loop-nest emitter of the llvm
    kernels. Index names are ``names`` (``i0``, ``i1``, ... by default). Inner loops are
    plain ``range`` loops, any with loops inside it to an ``outer`` bound. ``lead`` says
    how the outer loop runs:

    - None: serially, as the others;
    - ``"first"``: the first axis as a ``prange`` when it has two iterations or more
      (Numba compiles every ``prange`` of a kernel as a function of its own, about a
      second each, and one over a single iteration shares nothing out; a detector at
      batch 1 had 30 of them, copying each operand of its concatenates);
    - ``"flat"``: the leading ``axes`` (by default ``lead_axes``: every thread gets
      work) flattened into one ``prange``, each index worked out from the flat one;
    - ``"span"``: the leading ``axes`` (by default ``lead_axes``) flattened, over the
      range ``lo, hi`` of a stage function's bounds: the indices are worked out from
      ``lo`` once, then counted on (an odometer: extents read at run time,
      ``sizes.Dim``, would otherwise cost a division per axis and element).

    >>> print("\\n".join(loop_nest((2, 3), ["x[i, j] = 0"], ["i", "j"])))
    for i in range(opaque(2)):
        for j in range(3):
            x[i, j] = 0
    >>> loop_nest((1, 8), ["x[i, j] = 0"], ["i", "j"], "first")[0]
    'for i in range(opaque(1)):'
    >>> loop_nest((2, 8), ["x[i, j] = 0"], ["i", "j"], "first")[0]
    'for i in prange(2):'
    >>> print("\\n".join(loop_nest((4, 300), ["x[i0, i1] = 0"], lead="flat")))
    for flat in prange(1200):
        i1 = flat % 300
        q1 = flat // 300
        i0 = q1
        x[i0, i1] = 0
    >>> print("\\n".join(loop_nest((2, 3), ["x[i0, i1] = 0"], lead="span", axes=2)))
    extent1 = np.uint64(3)
    i1 = np.uint64(lo) % extent1
    i0 = np.uint64(lo) // extent1
    for flat in range(np.uint64(lo), np.uint64(hi)):
        x[i0, i1] = 0
        i1 += np.uint64(1)
        if i1 == extent1:
            i1 = np.uint64(0)
            i0 += np.uint64(1)
    """
    names = list(names) if names is not None else [f"i{d}" for d in range(len(shape))]
    if not shape:
        return list(inner)
    if axes is None and lead in ("flat", "span"):
        axes = lead_axes(shape)
    if lead == "span":
        return _span_nest(shape, inner, names, axes)
    lines, depth = [], 0
    if lead == "flat":
        depth = axes
        lines.append(f"for flat in prange({math.prod(shape[:depth])}):")
        current = "flat"  # Numba forbids reassigning anything derived as the loop index
        for d in reversed(range(1, depth)):
            lines.append(f"    {names[d]} = {current} % {shape[d]}")
            lines.append(f"    q{d} = {current} // {shape[d]}")
            current = f"q{d}"
        lines.append(f"    {names[0]} = {current}")
    elif lead == "first" and not (isinstance(shape[0], int) and shape[0] < 2):
        lines.append(f"for {names[0]} in prange({shape[0]}):")
        depth = 1
    elif lead not in (None, "first"):
        raise ValueError(f"internal: no loop nest leads {lead!r}")
    pad = 1 if depth else 0  # (inside the prange's line)
    for d in range(depth, len(shape)):
        bound = outer(shape[d]) if d < len(shape) - 1 else shape[d]
        lines.append("    " * (d - depth + pad) + f"for {names[d]} in range({bound}):")
    return lines + ["    " * (len(shape) - depth + pad) + line for line in inner]


def parallel_first(parallel: bool) -> str | None:
    """``loop_nest``'s lead for an op whose first axis runs in a ``prange`` when it is
    large enough (``parallel``), else serially.

    >>> parallel_first(True), parallel_first(False)
    ('first', None)
    """
    return "first" if parallel else None


def _span_nest(shape, inner: list[str], names: list[str], lead: int) -> list[str]:
    """``loop_nest``'s ``"span"`` form: the ``lead`` leading axes over ``lo, hi``."""
    if lead == 1:
        lines = [f"for {names[0]} in range({UNSIGNED_RANGE}):"]
        count = []
    else:
        lines = [f"extent{d} = np.uint64({shape[d]})" for d in range(1, lead)]
        current = "np.uint64(lo)"
        for d in reversed(range(1, lead)):
            lines.append(f"{names[d]} = {current} % extent{d}")
            if d > 1:
                lines.append(f"q{d} = {current} // extent{d}")
                current = f"q{d}"
            else:
                lines.append(f"{names[0]} = {current} // extent{d}")
        lines.append(f"for flat in range({UNSIGNED_RANGE}):")
        count = [f"{names[lead - 1]} += np.uint64(1)"]
        for depth, d in enumerate(reversed(range(1, lead))):
            pad = "    " * depth
            count += [
                f"{pad}if {names[d]} == extent{d}:",
                f"{pad}    {names[d]} = np.uint64(0)",
                f"{pad}    {names[d - 1]} += np.uint64(1)",
            ]
    for d in range(lead, len(shape)):
        bound = outer(shape[d]) if d < len(shape) - 1 else shape[d]
        lines.append("    " * (d - lead + 1) + f"for {names[d]} in range({bound}):")
    pad = "    " * (len(shape) - lead + 1)
    return lines + [pad + line for line in inner] + ["    " + line for line in count]


def subscript(parts) -> str:
    """An index expression of ``parts`` (a 1-tuple keeps its comma; none is ``()``)."""
    if not parts:
        return "()"
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


def tap_outputs(names: tuple[str, str], q: str, outputs, last_input, stride, begin, dilation):
    """Lines binding ``names`` (first, last) to the outputs ``o`` of one window axis whose
    tap ``q`` reads inside the input: ``o * stride - begin + q * dilation`` in
    ``[0, extent)``, given ``last_input`` = ``extent - 1 + begin`` (a number, or a size
    read at run time). Floor divisions, as Python's (Numba's signed ``//`` rounds down too).

    >>> for line in tap_outputs(("first", "last"), "q1", 4, 8, 2, 1, 1):
    ...     print(line)
    first = max(0, -((q1 * 1 - 1) // 2))
    last = min(4, (8 - q1 * 1) // 2 + 1)
    """
    first, last = names
    return [
        f"{first} = max(0, -(({q} * {dilation} - {begin}) // {stride}))",
        f"{last} = min({outputs}, ({last_input} - {q} * {dilation}) // {stride} + 1)",
    ]
