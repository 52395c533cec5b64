"""The converter table: ONNX op type -> the functions turning one node into nbyoc
values, each valid from an opset on (``since``), so a model gets the meaning its
opset gives the op (Softmax before 13 flattens to 2-D; ReduceSum's axes moved from
an attribute to an input at 13, the other reductions' at 18; Clip's bounds at 11).

A converter takes a ``Node`` and returns its outputs: nbyoc expressions, or NumPy
arrays when they are known while importing (``Shape``, ``ConstantOfShape``).
Adding an op is one decorated function in the family's module.

>>> converter_for("Softmax", 11).__name__, converter_for("Softmax", 13).__name__
('softmax_2d', 'softmax')
>>> converter_for("Relu", 14) is not None and converter_for("Loop", 14) is None
True
"""

from __future__ import annotations

from collections.abc import Callable

#: op type -> [(since opset, converter)], sorted by opset.
CONVERTERS: dict[str, list[tuple[int, Callable]]] = {}


def converter(*op_types: str, since: int = 1):
    """Register the decorated function as the converter of ``op_types`` from opset
    ``since`` on."""

    def register(fn):
        for op_type in op_types:
            rows = CONVERTERS.setdefault(op_type, [])
            if any(s == since for s, _ in rows):
                raise ValueError(f"two converters for {op_type} since opset {since}")
            rows.append((since, fn))
            rows.sort(key=lambda row: row[0])
        return fn

    return register


def converter_for(op_type: str, opset: int) -> Callable | None:
    """The converter of ``op_type`` in a model of default-domain ``opset``, or None."""
    chosen = None
    for since, fn in CONVERTERS.get(op_type, ()):
        if since <= opset:
            chosen = fn
    return chosen


from . import elementwise, nn, quantize, recurrent, reduce, tensor  # noqa: E402, F401 - register their rows
