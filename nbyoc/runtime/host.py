"""The host executor: runs an ``ir.Function`` with the NumPy reference ops.

The plan (which reference to call on which values, and when each value can be
dropped) is made once; a call then only walks a flat list of steps. Values are
released after their last use, so peak memory follows the graph's live set,
not its size.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (3,))
>>> run = HostFunction(nbyoc.function([x], [x + 1, x * x]))
>>> run(np.arange(3, dtype=np.float32))
(array([1., 2., 3.], dtype=float32), array([0., 1., 4.], dtype=float32))
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import NamedTuple

from ..errors import ExecutionError, NbyocError
from ..ir.nodes import Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var
from ..ir.traversal import operands, post_order


class _Step(NamedTuple):
    fn: Callable
    args: tuple[int, ...]
    kwargs: dict
    out: int
    release: tuple[int, ...]
    label: str


def _make_tuple(*values):
    return values


class HostFunction:
    """A callable that evaluates ``func`` on NumPy arrays (no argument checking:
    ``Executable`` checks arguments before they get here).

    ``callees`` maps module function names to callables, for calls through a
    ``GlobalVar``.
    """

    def __init__(self, func: Function, callees: Mapping[str, Callable] | None = None):
        callees = callees or {}
        slots: dict[Expr, int] = {p: i for i, p in enumerate(func.params)}
        nodes = [n for n in post_order([func.body]) if n not in slots]
        template: list = [None] * (len(slots) + len(nodes))
        planned = []
        for number, node in enumerate(nodes):
            slots[node] = out = len(func.params) + number
            label = f"%{number}" if node is not func.body else "the result"
            if isinstance(node, Constant):
                template[out] = node.data
            elif isinstance(node, Var):
                raise NbyocError(f"free variable %{node.name_hint}; verify() the function first")
            else:
                fn, kwargs, what = _kernel(node, callees)
                args = tuple(slots[a] for a in operands(node))
                planned.append((fn, args, kwargs, out, f"{label} = {what}"))
        self._steps = _with_releases(planned, keep=slots[func.body])
        self._template = template
        self._n_params = len(func.params)
        self._result = slots[func.body]

    def __call__(self, *args):
        values = self._template.copy()
        values[: self._n_params] = args
        step = None
        try:
            for step in self._steps:
                values[step.out] = step.fn(*[values[i] for i in step.args], **step.kwargs)
                for i in step.release:
                    values[i] = None
        except NbyocError:
            raise
        except Exception as e:
            raise ExecutionError(f"{step.label} failed: {type(e).__name__}: {e}") from e
        return values[self._result]


def _kernel(node: Expr, callees: Mapping[str, Callable]) -> tuple[Callable, dict, str]:
    """What runs ``node``: a callable, its keyword arguments, and a label for errors."""
    if isinstance(node, Call) and isinstance(node.op, GlobalVar):
        name = node.op.name_hint
        if name not in callees:
            raise NbyocError(f"nothing to run @{name} with; is it a function of the module?")
        return callees[name], {}, f"@{name}(...)"
    if isinstance(node, Call):
        return node.op.reference, dict(node.attrs), f"{node.op.name}(...)"
    if isinstance(node, Tuple):
        return _make_tuple, {}, "(...)"
    if isinstance(node, TupleGetItem):
        return operator.itemgetter(node.index), {}, f"[...].{node.index}"
    raise NbyocError(f"the host executor cannot run {node!r}")


def _with_releases(planned: list, keep: int) -> list[_Step]:
    """Attach to each step the values whose last reader it is (all but ``keep``)."""
    last_use: dict[int, int] = {}
    for index, (_, args, _, _, _) in enumerate(planned):
        for slot in args:
            last_use[slot] = index
    releases: dict[int, list[int]] = {}
    for slot, index in last_use.items():
        if slot != keep:
            releases.setdefault(index, []).append(slot)
    return [
        _Step(fn, args, kwargs, out, tuple(releases.get(index, ())), label)
        for index, (fn, args, kwargs, out, label) in enumerate(planned)
    ]
