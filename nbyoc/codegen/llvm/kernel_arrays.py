"""The arrays of an llvm kernel as its emitter names them, and how its loops index them.

>>> element_index((4, 8), (8,)), element_index((4, 8), (1, 8), invariant=True)
('i1,', '0, i1')
>>> shape_literal((2, 3)), shape_literal((5,))
('(2, 3)', '(5,)')
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.types import TensorType


@dataclass
class ArrayValue:
    """An array in the kernel: a parameter, an output, a scratch view or a view of those."""

    name: str
    type: TensorType
    contiguous: bool = True


def shape_literal(shape) -> str:
    items = ", ".join(str(d) for d in shape)
    return f"({items},)" if len(shape) == 1 else f"({items})"


def element_index(domain: tuple[int, ...], shape: tuple[int, ...], invariant: bool = False) -> str:
    """Index of an array of ``shape`` at the current element of ``domain`` (broadcasting).
    An ``invariant`` array (computed from constants alone: the same whatever the inputs'
    sizes) is read at 0 on every axis of extent 1, also where the domain's is 1: a
    batch of 1 then runs the code a batch of 2 does (a constant (1, 1, C) read at
    ``[i0, 0, i2]`` made a new stage function at every batch size but the first)."""
    pad = len(domain) - len(shape)
    parts = [
        "0" if shape[d] == 1 and (invariant or domain[pad + d] != 1) else f"i{pad + d}"
        for d in range(len(shape))
    ]
    if not parts:
        return "()"
    return ", ".join(parts) + ("," if len(parts) == 1 else "")
