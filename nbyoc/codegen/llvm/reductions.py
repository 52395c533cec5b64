"""The reductions the llvm lowering computes, one row each: the dtype it accumulates
in, its identity, its update step and how the result is finished. Row groups
(``rows``, ``row_blocks``), reduction stages (``reduce``) and max pools
(``windows``) all read this table, so a reduction means the same everywhere.

The steps are reassociable (``nbyoc.runtime.llvm.vecmath``: ``add_step``,
``multiply_step``, ``maximum``, ``minimum``, imported by ``rows.ROWS_IMPORT``), so
LLVM may keep several partial results and vectorise. Float sums, means and products
accumulate in float64 (float32 sums come out more accurate than NumPy's pairwise
ones), integer sums in int64, integer products in the result's dtype (wrapping as
NumPy's do); ``max`` and ``min`` keep the operand's value dtype and let NaN win, as
NumPy does.

>>> import nbyoc
>>> x = nbyoc.var("x", (4, 8), "float32")
>>> reduction_code(nbyoc.sum(x, axis=1), "x[i]", 8, "acc")
('acc = np.float64(0)', 'acc = add_step(acc, np.float64(x[i]))', 'np.float32(acc)')
>>> reduction_code(nbyoc.max(x, axis=1), "x[i]", 8, "acc")[:2]
('acc = np.float32(-np.inf)', 'acc = maximum(acc, x[i])')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir.dtypes import dtype_info
from ...ir.nodes import Call
from . import rules


@dataclass(frozen=True)
class Reduction:
    """One reduction: ``accumulator(value dtype, result dtype)`` is the dtype it
    accumulates in; ``identity(acc dtype)`` its start value; ``step(acc, value, acc
    dtype)`` the accumulator's next value (``value`` in the operand's value dtype);
    ``finish(acc, divisor)`` the result before its cast to the result's dtype
    (``divisor``: how many values were reduced, as source)."""

    accumulator: Callable[[str, str], str]
    identity: Callable[[str], str]
    step: Callable[[str, str, str], str]
    finish: Callable[[str, str], str] = lambda acc, divisor: acc


def _sum_dtype(value_dtype: str, result_dtype: str) -> str:
    return "int64" if dtype_info(value_dtype).is_integer else "float64"


def _mean_dtype(value_dtype: str, result_dtype: str) -> str:
    return "float64"  # as NumPy's mean of integers: no int64 overflow


def _product_dtype(value_dtype: str, result_dtype: str) -> str:
    return "float64" if dtype_info(value_dtype).is_float else result_dtype


def _same_dtype(value_dtype: str, result_dtype: str) -> str:
    return value_dtype


def _add(acc: str, value: str, dtype: str) -> str:
    value = rules.cast(value, dtype)
    return f"{acc} + {value}" if dtype_info(dtype).is_integer else f"add_step({acc}, {value})"


def _multiply(acc: str, value: str, dtype: str) -> str:
    if dtype_info(dtype).is_float:
        return f"multiply_step({acc}, {rules.cast(value, dtype)})"
    # Numba widens small integers: back to the dtype, wrapping as NumPy does.
    return rules.cast(f"{acc} * {rules.cast(value, dtype)}", dtype)


def _extreme(largest: bool) -> tuple[Callable, Callable]:
    """(identity, step) of max (``largest``) or min."""

    def identity(dtype: str) -> str:
        info = dtype_info(dtype)
        if info.kind == "bool":
            return str(not largest)
        if info.is_float:
            return rules.cast("-np.inf" if largest else "np.inf", dtype)
        return rules.cast(str(info.min if largest else info.max), dtype)

    def step(acc: str, value: str, dtype: str) -> str:
        if dtype_info(dtype).is_float:  # NaN wins (vecmath's maximum and minimum)
            return f"{'maximum' if largest else 'minimum'}({acc}, {value})"
        return f"{'max' if largest else 'min'}({acc}, {value})"

    return identity, step


REDUCTIONS: dict[str, Reduction] = {
    "sum": Reduction(_sum_dtype, lambda dtype: rules.cast("0", dtype), _add),
    "mean": Reduction(
        _mean_dtype,
        lambda dtype: rules.cast("0", dtype),
        _add,
        lambda acc, divisor: f"{acc} / {divisor}",
    ),
    "prod": Reduction(_product_dtype, lambda dtype: rules.cast("1", dtype), _multiply),
    "max": Reduction(_same_dtype, *_extreme(True)),
    "min": Reduction(_same_dtype, *_extreme(False)),
}


def accumulator_dtype(node: Call) -> str:
    """The dtype reduction ``node`` accumulates in (see the module docstring)."""
    value_dtype = rules.value_dtype(node.args[0].type.dtype)
    return REDUCTIONS[node.op.name].accumulator(value_dtype, node.type.dtype)


def reduction_code(node: Call, value: str, count, acc: str) -> tuple[str, str, str]:
    """(start line, update line, result expression) of reduction ``node`` with
    accumulator ``acc`` (a local, or an element of an accumulator array) over ``count``
    values (an int, or a size read at run time, as source), each ``value``."""
    reduction = REDUCTIONS[node.op.name]
    dtype = accumulator_dtype(node)
    # (a count read at run time divides as an int: the same float64 division)
    divisor = f"{float(count)!r}" if isinstance(count, int) else str(count)
    return (
        f"{acc} = {reduction.identity(dtype)}",
        f"{acc} = {reduction.step(acc, value, dtype)}",
        rules.cast(reduction.finish(acc, divisor), node.type.dtype),
    )
