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

#: op type -> [(since opset, converter)], sorted by opset: the default domain's ops.
CONVERTERS: dict[str, list[tuple[int, Callable]]] = {}
#: (domain, op type) -> converter: other domains' ops (ONNX Runtime's contrib ops, in
#: "com.microsoft", have one version each).
DOMAIN_CONVERTERS: dict[tuple[str, str], Callable] = {}
#: The names of the default domain.
DEFAULT_DOMAINS = ("", "ai.onnx")


def converter(*op_types: str, since: int = 1, domain: str = ""):
    """Register the decorated function as the converter of ``op_types`` from opset
    ``since`` on (of ``domain``'s ops, for another domain than ONNX's own)."""

    def register(fn):
        for op_type in op_types:
            if domain not in DEFAULT_DOMAINS:
                if (domain, op_type) in DOMAIN_CONVERTERS:
                    raise ValueError(f"two converters for {op_type} of {domain}")
                DOMAIN_CONVERTERS[(domain, op_type)] = fn
                continue
            rows = CONVERTERS.setdefault(op_type, [])
            if any(s == since for s, _ in rows):
                raise ValueError(f"two converters for {op_type} since opset {since}")
            rows.append((since, fn))
            rows.sort(key=lambda row: row[0])
        return fn

    return register


def converter_for(op_type: str, opset: int, domain: str = "") -> Callable | None:
    """The converter of ``op_type`` of ``domain`` in a model of default-domain ``opset``,
    or None.

    >>> converter_for("QLinearAdd", 13, "com.microsoft").__name__
    'qlinear_add'
    """
    if domain not in DEFAULT_DOMAINS:
        return DOMAIN_CONVERTERS.get((domain, op_type))
    chosen = None
    for since, fn in CONVERTERS.get(op_type, ()):
        if since <= opset:
            chosen = fn
    return chosen


from . import elementwise, linalg, nn, quantize, recurrent, reduce, scan, sort, tensor  # noqa: E402, F401 - register their rows
