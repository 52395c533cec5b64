"""Choosing the blocks: how each axis label is cut, and which reductions run as trees.

The inputs' own chunks are the starting point: each label takes the chunks of the
largest input that has it cut (the others are rechunked to match). Then each cut label
is checked against what the ops need (``nbyoc.dask.axes``):

- a *pinned* label (an op needs the whole axis) is made whole, if a block with the
  whole axis stays within the block budget; otherwise that is an error naming every
  op and axis concerned;
- a *reduced* label (sum, mean, max, min, prod, a matmul's ``k``) is made whole when
  that fits the budget (one pass, no combining), otherwise it stays cut and its
  reductions run as trees of partial results;
- any other label stays as the inputs have it.

>>> import nbyoc
>>> from nbyoc.dask.axes import analyse
>>> x = nbyoc.var("x", (1024, 64))
>>> f = nbyoc.function([x], x.sum(axis=0))
>>> labels = analyse(f)
>>> chunks = [((256,) * 4, (64,))]
>>> plan_blocks(f, labels, chunks, budget=1 << 20).tree        # the whole axis: 256 KiB
[]
>>> p = plan_blocks(f, labels, chunks, budget=128 << 10)
>>> p.tree == [labels.of(x)[0]], p.chunks[labels.of(x)[0]]
(True, (256, 256, 256, 256))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import NbyocError
from ..ir.nodes import Function
from ..ir.traversal import post_order
from ..ir.types import TensorType
from .axes import AxisLabels


class BlockError(NbyocError):
    """The function cannot run on these blocks (an op needs an axis whole that does
    not fit the block budget)."""


@dataclass
class Plan:
    """Each cut label's chunks (a label not listed is whole) and the labels whose
    reductions run as trees."""

    chunks: dict[int, tuple[int, ...]] = field(default_factory=dict)
    tree: list[int] = field(default_factory=list)


def plan_blocks(func: Function, labels: AxisLabels, input_chunks, budget: int) -> Plan:
    """The plan for ``func`` on inputs chunked as ``input_chunks`` (per parameter: Dask's
    chunks, a tuple of block lengths per axis; None for a scalar) with blocks of at most
    ``budget`` bytes where an axis must be whole (see the module docstring)."""
    plan = Plan()
    largest: dict[int, int] = {}
    for param, chunks in zip(func.params, input_chunks):
        if chunks is None:
            continue
        nbytes = math.prod(param.type.shape) * np.dtype(param.type.dtype).itemsize
        for label, axis_chunks in zip(labels.of(param), chunks):
            if len(axis_chunks) > 1 and nbytes > largest.get(label, -1):
                largest[label] = nbytes
                plan.chunks[label] = tuple(axis_chunks)
    tensors = [
        (labels.of(n), np.dtype(n.type.dtype).itemsize)
        for n in post_order([func.body, *func.params])
        if isinstance(n.type, TensorType)
    ]
    too_big = []
    for label in sorted(plan.chunks):
        facts = labels.facts(label)
        if not (facts.pins or facts.tree_ops):
            continue
        whole = _largest_block(tensors, labels, plan.chunks, without=label)
        if whole <= budget:
            del plan.chunks[label]
        elif facts.pins:
            too_big.append((label, whole))
        else:
            plan.tree.append(label)
    if too_big:
        raise BlockError(_too_big_message(too_big, labels, budget))
    return plan


def _largest_block(tensors, labels, chunks, without: int) -> int:
    """The bytes of the largest block of any tensor of the function if label ``without``
    were whole."""

    def length(c):
        return labels.facts(c).size if c == without or c not in chunks else max(chunks[c])

    return max(itemsize * math.prod(length(c) for c in own) for own, itemsize in tensors)


def _too_big_message(too_big, labels, budget) -> str:
    lines = []
    for label, whole in too_big:
        reasons = list(dict.fromkeys(labels.facts(label).pins))
        shown = "; ".join(reasons[:4]) + (
            f"; and {len(reasons) - 4} more" if len(reasons) > 4 else ""
        )
        lines.append(
            f"  an axis of length {labels.facts(label).size} must be whole for: {shown} "
            f"(a whole block would be {_bytes(whole)}, over the budget of {_bytes(budget)})"
        )
    return (
        "nbyoc.dask: these ops need whole axes that do not fit in one block:\n"
        + "\n".join(lines)
        + "\n  cut the other axes into smaller chunks, or raise block_bytes"
    )


def _bytes(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
