"""The llvm kernel's scans (``cumsum``, ``cumprod``, ``cummax``, ``cummin``,
``logcumsumexp``): each sees its operand as ``(outer, axis, inner)`` blocks, as the
reductions do (``reduce``), and runs in parallel over the other axes.

With no inner axes, each outer index scans one contiguous run, one task per run.
With inner axes, values next to each other in memory belong to different scans: each
task takes a block of ``COLUMN_BLOCK`` inner indices of one outer index and steps one
accumulator per lane along the axis, which vectorises across the lanes without
reordering anything. Each lane's steps run in NumPy's order, in the result's dtype
(float16 computed in float32 and rounded after every step, as NumPy's float16 loops
do), so sums and products match NumPy's accumulate to the bit.

What each scan starts from and steps by is one table, ``SCANS``.

>>> import nbyoc
>>> x = nbyoc.var("x", (3, 5), "float32")
>>> print("\\n".join(scan_stage(nbyoc.cumsum(x, axis=1, exclusive=True), ["a"], "b", True)))
a_blocks = a.reshape((3, 5, 1))
b_scanned = b.reshape((3, 5, 1))
for o in prange(3):
    acc = np.float32(0)
    for k in range(5):
        v = a_blocks[o, k, 0]
        b_scanned[o, k, 0] = acc
        acc = np.float32(acc + v)
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...ir.dtypes import dtype_info
from ...ir.nodes import Call
from . import rules
from .reduce import COLUMN_BLOCK, _column_tasks


def _infix(symbol: str) -> Callable[[str, str, str], str]:
    # Numba widens small integers: the cast brings the value back, wrapping as NumPy's.
    return lambda acc, value, dtype: rules.cast(f"{acc} {symbol} {value}", dtype)


def _extreme(largest: bool) -> Callable[[str, str, str], str]:
    def step(acc: str, value: str, dtype: str) -> str:
        info = dtype_info(dtype)
        if info.kind == "bool":
            return f"np.bool_({acc} {'|' if largest else '&'} {value})"
        if info.is_float:  # NaN propagates, as np.maximum / np.minimum
            return rules.cast(f"np.{'maximum' if largest else 'minimum'}({acc}, {value})", dtype)
        return rules.cast(f"{'max' if largest else 'min'}({acc}, {value})", dtype)

    return step


def _end(largest: bool) -> Callable[[str], str]:
    """The identity of a running max (the dtype's lowest value) or min (its highest)."""

    def identity(dtype: str) -> str:
        info = dtype_info(dtype)
        if info.kind == "bool":
            return f"np.bool_({not largest})"
        if info.is_float:
            return rules.cast("-np.inf" if largest else "np.inf", dtype)
        return rules.cast(str(info.min if largest else info.max), dtype)

    return identity


#: scan op -> (identity of the result dtype, step(acc, value, result dtype)).
SCANS: dict[str, tuple[Callable[[str], str], Callable[[str, str, str], str]]] = {
    "cumsum": (lambda dtype: rules.cast("0", dtype), _infix("+")),
    "cumprod": (lambda dtype: rules.cast("1", dtype), _infix("*")),
    "cummax": (_end(True), _extreme(True)),
    "cummin": (_end(False), _extreme(False)),
    "logcumsumexp": (
        lambda dtype: rules.cast("-np.inf", dtype),
        lambda acc, value, dtype: rules.cast(f"np.logaddexp({acc}, {value})", dtype),
    ),
}


def _step_lines(node: Call, value: str, acc: str, target: str) -> list[str]:
    """One step: read ``value`` (converted to the result's dtype), then write the
    accumulator to ``target`` and step it (exclusive), or step it and write it."""
    dtype = node.type.dtype
    step = SCANS[node.op.name][1]
    read = f"v = {rules.cast(value, dtype) if node.args[0].type.dtype != dtype else value}"
    write = f"{target} = {rules.store(acc, dtype)}"
    update = f"{acc} = {step(acc, 'v', dtype)}"
    return [read, *((write, update) if node.attrs["exclusive"] else (update, write))]


def scan_stage(node: Call, sources: list[str], dest: str, parallel: bool) -> list[str]:
    """The scan ``node`` of its operand (contiguous: ``emit`` copies a strided one first)
    along its axis into ``dest`` (see the module docstring)."""
    (source,) = sources
    shape = node.args[0].type.shape
    axis = node.attrs["axis"]
    outer, length, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
    identity = SCANS[node.op.name][0](node.type.dtype)
    in_dtype = node.args[0].type.dtype
    # (reversed: step k reads the k-th element from the end)
    index = f"{length} - 1 - k" if node.attrs["reverse"] else "k"
    position = [] if index == "k" else [f"j = {index}"]
    at = "k" if index == "k" else "j"
    lines = [
        f"{source}_blocks = {source}.reshape(({outer}, {length}, {inner}))",
        f"{dest}_scanned = {dest}.reshape(({outer}, {length}, {inner}))",
    ]
    loop = "prange" if parallel else "range"
    if inner == 1:
        value = rules.load(f"{source}_blocks[o, {at}, 0]", in_dtype)
        body = _step_lines(node, value, "acc", f"{dest}_scanned[o, {at}, 0]")
        return [
            *lines,
            f"for o in {loop}({outer}):",
            f"    acc = {identity}",
            f"    for k in range({length}):",
            *(f"        {line}" for line in position + body),
        ]
    value = rules.load(f"{source}_blocks[o, {at}, first_column + c]", in_dtype)
    target = f"{dest}_scanned[o, {at}, first_column + c]"
    body = _step_lines(node, value, "acc[c]", target)
    acc_type = rules.NP_TYPES[rules.value_dtype(node.type.dtype)]
    return [
        *lines,
        *_column_tasks(outer, inner, loop),
        f"    acc = np.empty({COLUMN_BLOCK}, {acc_type})",
        "    for c in range(width):",
        f"        acc[c] = {identity}",
        f"    for k in range({length}):",
        *(f"        {line}" for line in position),
        "        for c in range(width):",
        *(f"            {line}" for line in body),
    ]
