"""Call-time range checks for the Python ints ``nbyoc.jit`` traces as weak scalars.

NumPy 2 (NEP 50) refuses a Python int that does not fit the dtype it meets:
``uint8_array + -1`` raises ``OverflowError: Python integer -1 out of bounds for
uint8``. A traced function has no value to check at compile time: it has a 0-d
int64 input, cast to the partner's dtype where the two meet. So every such cast
of a weak int (the argument itself, or a Python-int expression of arguments such
as ``n * 2``) becomes a check made before each call, and a value out of range
raises ``ValueOutOfRangeError`` (an ``OverflowError``) as NumPy would, instead of
wrapping around in the kernel.

Python ints themselves are computed in int64 inside the graph, so an argument
beyond int64 is refused too, with the same error.

>>> import numpy as np, nbyoc
>>> add = nbyoc.jit(lambda x, n: x + n)
>>> add(np.array([1, 2], np.uint8), 3)
array([4, 5], dtype=uint8)
>>> add(np.array([1, 2], np.uint8), -1)
Traceback (most recent call last):
    ...
nbyoc.errors.ValueOutOfRangeError: Python integer -1 out of bounds for uint8 (argument n, ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...errors import ValueOutOfRangeError
from ...ir.builder import function, weak_kind
from ...ir.nodes import Call, Expr, Function
from ...ir.op import Op
from ...ir.traversal import post_order

INT64 = np.iinfo(np.int64)


def integer_casts(func: Function) -> list[tuple[Expr, np.dtype]]:
    """Each Python-int value of ``func`` that it casts to an integer dtype, with that
    dtype (only weak promotion makes such casts: a traced graph cannot cast a Python
    int any other way)."""
    casts = []
    for node in post_order([func.body]):
        if isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == "cast":
            (source,) = node.args
            target = np.dtype(node.attrs["to"])
            if weak_kind(source) is int and target.kind in "iu" and target != np.int64:
                casts.append((source, target))
    return casts


def range_checker(func: Function, names: Sequence[str]) -> Callable[[list], None] | None:
    """A function of the values of ``func``'s parameters (in order; Python ints as
    they were passed) that raises ``ValueOutOfRangeError`` where NumPy would, or None
    when ``func`` casts no Python int. ``names`` are the parameters' names."""
    casts = integer_casts(func)
    if not casts:
        return None
    position = {id(p): k for k, p in enumerate(func.params)}
    direct = [(position[id(s)], t) for s, t in casts if id(s) in position]
    computed = [(s, t) for s, t in casts if id(s) not in position]
    evaluate = None
    if computed:
        from ...runtime.host import HostFunction

        evaluate = HostFunction(function(list(func.params), [s for s, _ in computed]))

    def check(values: list) -> None:
        for k, dtype in direct:
            _check(int(values[k]), dtype, f"argument {names[k]}")
        if evaluate is not None:
            results = evaluate(*[np.asarray(v) for v in values])
            for result, (_, dtype) in zip(results, computed):
                _check(int(result), dtype, "a Python-int expression of the arguments")

    return check


def check_int64(value: int, name: str) -> None:
    """Refuse a Python int argument that int64 (what the graph computes it in) cannot hold."""
    if not INT64.min <= value <= INT64.max:
        raise ValueOutOfRangeError(
            f"Python integer {value} out of bounds for int64 (argument {name}): nbyoc.jit "
            f"computes Python ints as int64; pass a float, or an array of a wider dtype"
        )


def _check(value: int, dtype: np.dtype, what: str) -> None:
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise ValueOutOfRangeError(
            f"Python integer {value} out of bounds for {dtype} ({what}, beside an array of "
            f"{dtype}), as NumPy 2 refuses it; convert the array to a wider dtype first "
            f"(.astype(np.int64))"
        )
