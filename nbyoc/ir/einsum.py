"""``einsum``: Einstein summation as a graph of transpose, reshape, matmul, multiply and
sum, built by a contraction planner; einsum has no op of its own, so every backend that
runs those ops runs it, fused where it can.

The subscripts are NumPy's, all of them: implicit (``"ij,jk"``: the labels seen once,
in alphabetical order) or explicit (``"ij,jk->ik"``), ``...`` for broadcast axes, a
label repeated in one operand for its diagonal (``"ii->i"``, the trace ``"ii->"``),
axes of length 1 broadcasting against any length, and NumPy's other form of operands
interleaved with lists of ints (``einsum(a, [0, 1], b, [1, 2])``).

Planning: each operand first loses its repeated labels (a diagonal is a strided slice
of the flattened axes) and the labels no one else needs (summed away). The operands
are then contracted two at a time, in the order ``np.einsum_path``'s greedy search
picks (left to right where sizes are symbolic): the pair's shared labels that are
needed later are batch axes, the others are summed by one matmul of the two operands
reshaped to (batch, kept, summed) and (batch, summed, kept); a pair with nothing to sum
is a broadcast multiply. The result is the dtype NumPy's einsum gives (integer sums
computed wider then cast, which wraps as NumPy's own do).

>>> import nbyoc
>>> a, b = nbyoc.var("a", (2, 3)), nbyoc.var("b", (3, 4))
>>> y = einsum("ij,jk->ik", a, b)
>>> y.type, y.op.name
(Tensor[(2, 4), float32], 'reshape')
>>> einsum("ii->i", nbyoc.var("m", (5, 5))).shape, einsum("...ij->...ji", a).shape
((5,), (3, 2))
"""

from __future__ import annotations

import math
import string
from typing import Any

import numpy as np

from ..errors import NbyocTypeError
from . import ops
from .builder import const
from .dtypes import promote
from .nodes import Expr
from .symbols import SizeExpr

#: The labels of the string form; NumPy's other form numbers them in this order.
LETTERS = string.ascii_letters


def _fail(subscripts: str, why: str):
    raise NbyocTypeError(f"einsum({subscripts!r}): {why}")


def einsum(*operands: Any, optimize: object = None, **kwargs: Any) -> Expr:
    """``np.einsum(subscripts, *operands)`` as a graph (see the module docstring).

    >>> import nbyoc
    >>> einsum("i,i", nbyoc.var("a", (3,)), nbyoc.var("b", (3,))).shape
    ()
    """
    del optimize  # (the planner picks its own order)
    if kwargs:
        raise NbyocTypeError(
            f"einsum takes no {', '.join(sorted(kwargs))}= on graph values; cast the result"
        )
    subscripts, operands = _string_form(operands)
    values = [x if isinstance(x, Expr) else const(np.asarray(x)) for x in operands]
    terms, output = _parse(subscripts, [v.type.ndim for v in values])
    dtype = promote(*(v.type.dtype for v in values))
    result = _plan(subscripts, list(zip(values, terms)), output)
    return result if result.type.dtype == dtype else ops.cast(result, dtype)


def _string_form(operands) -> tuple[str, list]:
    """NumPy's two forms as (subscripts, operands): the string one as it is, the
    interleaved one (operand, list of ints, ..., [output list]) spelt with letters."""
    if not operands:
        raise NbyocTypeError("einsum needs subscripts and at least one operand")
    if isinstance(operands[0], str):
        return operands[0].replace(" ", ""), list(operands[1:])

    def spell(sublist) -> str:
        out = []
        for label in sublist:
            if label is Ellipsis:
                out.append("...")
            elif isinstance(label, (int, np.integer)) and 0 <= label < len(LETTERS):
                out.append(LETTERS[label])
            else:
                raise NbyocTypeError(
                    f"einsum: a subscript list holds ints in [0, {len(LETTERS)}) and ..., "
                    f"got {label!r}"
                )
        return "".join(out)

    pairs, rest = list(operands), []
    while len(pairs) >= 2:
        rest.append((pairs.pop(0), spell(pairs.pop(0))))
    text = ",".join(term for _, term in rest)
    if pairs:
        text += "->" + spell(pairs[0])
    return text, [x for x, _ in rest]


def _parse(subscripts: str, ndims: list[int]) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels (``...`` expanded into labels of its own, digits, the last
    axes sharing labels as broadcasting does) and the output's."""
    inputs, arrow, output = subscripts.partition("->")
    if "->" in output or (arrow and "-" in inputs + output):
        _fail(subscripts, "'->' may appear once, between the inputs and the output")
    texts = inputs.split(",")
    if len(texts) != len(ndims):
        _fail(subscripts, f"{len(texts)} input term(s) for {len(ndims)} operand(s)")
    broadcast = 0
    terms = []
    for text, ndim in zip(texts, ndims):
        letters = text.replace("...", "")
        bad = [c for c in letters if c not in LETTERS]
        if bad or text.count("...") > 1:
            _fail(subscripts, f"{text!r} is not letters with at most one '...'")
        extra = ndim - len(letters)
        if extra < 0 or (extra and "..." not in text):
            _fail(subscripts, f"{text!r} does not fit an operand of {ndim} dimension(s)")
        broadcast = max(broadcast, extra)
        terms.append((text, extra))
    dots = [str(d) for d in range(broadcast)]  # (the broadcast axes' labels: digits)
    expanded = []
    for text, extra in terms:
        before, _, after = text.partition("...")
        expanded.append([*before, *dots[broadcast - extra :], *after])
    counts = {}
    for term in expanded:
        for label in term:
            counts[label] = counts.get(label, 0) + 1
    if not arrow:  # implicit: the broadcast axes, then the labels seen once, sorted
        return expanded, [*dots, *sorted(c for c in LETTERS if counts.get(c) == 1)]
    letters = output.replace("...", "")
    if any(c not in LETTERS for c in letters) or output.count("...") > 1:
        _fail(subscripts, f"the output {output!r} is not letters with at most one '...'")
    if len(set(letters)) != len(letters):
        _fail(subscripts, f"the output {output!r} repeats a label")
    missing = [c for c in letters if c not in counts]
    if missing:
        _fail(subscripts, f"the output label(s) {''.join(missing)} appear in no input")
    if broadcast and "..." not in output:
        _fail(subscripts, "the inputs' '...' axes need a '...' in the output")
    before, _, after = output.partition("...")
    return expanded, [*before, *(dots if "..." in output else []), *after]


def _plan(subscripts: str, operands: list, output: list[str]):
    sizes: dict[str, object] = {}
    for value, labels in operands:
        for label, size in zip(labels, value.type.shape):
            known = sizes.get(label, 1)
            if size != 1 and known != 1 and size != known:
                _fail(subscripts, f"label {_shown(label)} has sizes {known} and {size}")
            if size != 1:
                sizes[label] = size
    order = _contraction_order(subscripts, operands)
    operands = [_diagonals(subscripts, value, labels) for value, labels in operands]
    for first, second in order:
        needed = {label for k, (_, labels) in enumerate(operands) if k not in (first, second)
                  for label in labels} | set(output)  # fmt: skip
        a, b = operands[first], operands[second]
        operands = [x for k, x in enumerate(operands) if k not in (first, second)]
        operands.append(_contract(a, b, needed))
    ((value, labels),) = operands
    value, labels = _sum_out(value, labels, set(output))
    if labels != output:
        value = ops.transpose(value, tuple(labels.index(label) for label in output))
    return value


def _shown(label: str) -> str:
    return "'...'" if label.isdigit() else repr(label)


def _contraction_order(subscripts: str, operands: list) -> list[tuple[int, int]]:
    """Pairs of positions to contract (the result goes last): NumPy's greedy path where
    every size is known, else left to right."""
    n = len(operands)
    shapes = [value.type.shape for value, _ in operands]
    if n > 2 and all(type(d) is int for s in shapes for d in s):
        # (zero-strided dummies: einsum_path reads only their shapes)
        dummies = [np.broadcast_to(np.zeros((), np.float32), s) for s in shapes]
        steps = [tuple(step) for step in np.einsum_path(subscripts, *dummies,
                                                        optimize="greedy")[0][1:]]  # fmt: skip
        if all(len(step) == 2 for step in steps):
            return steps
    return [(0, 1)] * (n - 1)


def _diagonals(subscripts: str, value, labels: list[str]):
    """``value`` without repeated labels: each repeated label's diagonal, its axes moved
    last, flattened and sliced with the stride that steps along the diagonal."""
    labels = list(labels)
    for label in dict.fromkeys(labels):
        axes = [k for k, x in enumerate(labels) if x == label]
        if len(axes) == 1:
            continue
        shape = value.type.shape
        size = shape[axes[0]]
        if any(shape[a] != size for a in axes):
            sizes = [shape[a] for a in axes]
            _fail(subscripts, f"the repeated label {_shown(label)} has sizes {sizes}; a "
                              f"diagonal needs equal ones")  # fmt: skip
        others = [k for k in range(len(labels)) if k not in axes]
        value = ops.transpose(value, (*others, *axes))
        kept = [value.type.shape[k] for k in range(len(others))]
        value = ops.reshape(value, (*kept, size ** len(axes)))
        if isinstance(size, SizeExpr):
            raise NbyocTypeError(
                f"einsum({subscripts!r}): a diagonal over a symbolic size needs its value; "
                f"fix that size"
            )
        step = sum(size**p for p in range(len(axes)))  # 1 + n + n**2 ...: the next (i, i, i)
        value = ops.slice(value, (0,), (step * size,), (len(kept),), (step,))
        labels = [labels[k] for k in others] + [label]
    return value, labels


def _sum_out(value, labels: list[str], needed: set[str]):
    """``value`` summed over its labels that no one needs."""
    gone = [k for k, label in enumerate(labels) if label not in needed]
    if not gone:
        return value, labels
    return ops.sum(value, axis=tuple(gone)), [x for x in labels if x in needed]


def _contract(a, b, needed: set[str]):
    """Two (value, labels) contracted over their shared labels not ``needed`` later."""
    (x, xl), (y, yl) = a, b
    shared = [label for label in xl if label in yl]
    x, xl = _sum_out(x, xl, needed | set(yl))
    y, yl = _sum_out(y, yl, needed | set(xl))
    summed = [label for label in shared if label not in needed]
    # A summed label of length 1 on one side and n on the other: sum the n first.
    for label in summed:
        nx, ny = x.type.shape[xl.index(label)], y.type.shape[yl.index(label)]
        if nx == 1 and ny != 1:
            y = ops.sum(y, axis=yl.index(label), keepdims=True)
        elif ny == 1 and nx != 1:
            x = ops.sum(x, axis=xl.index(label), keepdims=True)
    batch = [label for label in shared if label in needed]
    left = [label for label in xl if label not in shared]
    right = [label for label in yl if label not in shared]
    sx, sy = dict(zip(xl, x.type.shape)), dict(zip(yl, y.type.shape))
    if not summed or not (left or right):
        # Nothing to sum, or only sums (a dot per batch element): a broadcast multiply.
        x = _arranged(x, xl, [*batch, *left, *right, *summed])
        y = _arranged(y, yl, [*batch, *left, *right, *summed])
        product = ops.multiply(x, y)
        labels = [*batch, *left, *right, *summed]
        return _sum_out(product, labels, set(batch + left + right))
    x = ops.transpose(x, tuple(xl.index(label) for label in [*batch, *left, *summed]))
    y = ops.transpose(y, tuple(yl.index(label) for label in [*batch, *summed, *right]))
    inner = math.prod(sx[label] for label in summed)
    rows, columns = math.prod(sx[lb] for lb in left), math.prod(sy[lb] for lb in right)
    x = ops.reshape(x, (*(sx[lb] for lb in batch), rows, inner))
    y = ops.reshape(y, (*(sy[lb] for lb in batch), inner, columns))
    product = ops.matmul(x, y)
    batch_sizes = product.type.shape[: len(batch)]
    shape = (*batch_sizes, *(sx[lb] for lb in left), *(sy[lb] for lb in right))
    return ops.reshape(product, shape), [*batch, *left, *right]


def _arranged(value, labels: list[str], order: list[str]):
    """``value`` with its axes in ``order``, a length-1 axis for each label it lacks."""
    own = [label for label in order if label in labels]
    if own != labels:
        value = ops.transpose(value, tuple(labels.index(label) for label in own))
    shape = dict(zip(own, value.type.shape))
    full = tuple(shape.get(label, 1) for label in order)
    return value if full == value.type.shape else ops.reshape(value, full)
