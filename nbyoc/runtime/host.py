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
from typing import Any, NamedTuple

import numpy as np

from ..errors import AllocationError, ExecutionError, NbyocError
from ..ir.nodes import Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var
from ..ir.op import Op
from ..ir.ops.control import CompiledBody
from ..ir.traversal import operands, post_order
from ..ir.types import TensorType, tensor_types


class _Step(NamedTuple):
    fn: Callable
    args: tuple[int, ...]
    kwargs: dict
    out: int
    release: tuple[int, ...]  # values last read here, dropped after the step
    reuse: int  # a dying temporary to write the result into (ufunc ``out=``), or -1
    #: Values a later step may write into, kept from it unless this step's result
    #: turns out private: the result itself, and each operand the result could be (a
    #: reference may return its input unchanged, as ``clip`` with no bound does).
    check: tuple[int, ...]
    label: str


def _make_tuple(*values):
    return values


def _as_array(fn: Callable) -> Callable:
    def array_result(*args, **kwargs):
        return np.asarray(fn(*args, **kwargs))

    return array_result


class HostFunction:
    """A callable that evaluates ``func`` on NumPy arrays (no argument checking:
    ``Executable`` checks arguments before they get here).

    ``callees`` maps module function names to callables, for calls through a
    ``GlobalVar``; ``bodies`` makes what runs a control-flow op's body (``cond``,
    ``loop``) from its function: an executable compiled for the same backends (the
    default evaluates it on the host).
    """

    def __init__(
        self,
        func: Function,
        callees: Mapping[str, Callable[..., Any]] | None = None,
        bodies: Callable[[Function], Callable[..., Any]] | None = None,
    ) -> None:
        callees = callees or {}
        slots: dict[Expr, int] = {p: i for i, p in enumerate(func.params)}
        nodes = [n for n in post_order([func.body]) if n not in slots]
        template: list = [None] * (len(slots) + len(nodes))
        computed = []
        for number, node in enumerate(nodes):
            slots[node] = out = len(func.params) + number
            if isinstance(node, Constant):
                template[out] = node.data
            elif isinstance(node, Var):
                raise NbyocError(f"free variable %{node.name_hint}; verify() the function first")
            else:
                computed.append(node)
        self._steps = _schedule(computed, slots, func.body, len(func.params), callees, bodies)
        self._nodes = tuple(computed)  # (the node of each step, for ``instrumented``)
        self._template = template
        self._types = {slots[n]: n.type for n in nodes}
        self._n_params = len(func.params)
        self._result = slots[func.body]

    def __call__(self, *args: Any) -> Any:
        values = self._template.copy()
        values[: self._n_params] = args
        shared: tuple[int, ...] = ()  # checked results that turned out not to be private
        step = None
        try:
            # Plain tuple unpacking: this loop is the whole per-call cost on small arrays.
            for step in self._steps:
                fn, arg_slots, kwargs, out, release, reuse, check, _ = step
                operands = [values[i] for i in arg_slots]
                if reuse < 0 or reuse in shared:
                    values[out] = result = fn(*operands, **kwargs)
                else:
                    values[out] = result = fn(*operands, out=values[reuse])
                if check and not _is_private(result, operands):
                    shared = (*shared, *check)
                for i in release:
                    values[i] = None
        except NbyocError:
            raise
        except MemoryError as e:
            raise self._allocation_error(step, e) from None
        except Exception as e:
            raise ExecutionError(f"{step.label} failed: {type(e).__name__}: {e}") from e
        return values[self._result]

    def instrumented(
        self, wrap: Callable[[Expr, Callable[..., Any], str], Callable[..., Any]]
    ) -> HostFunction:
        """A copy of this function whose steps run ``wrap(node, fn, label)`` in place of
        each step's callable ``fn`` (``label``: ``"%3 = exp(...)"``, as errors name the
        step). A profiler times steps this way: the hook lives in the copy only, so the
        function itself runs at no cost.

        >>> import numpy as np, nbyoc
        >>> x = nbyoc.var("x", (2,))
        >>> seen = []
        >>> def wrap(node, fn, label):
        ...     return lambda *args, **kwargs: seen.append(label) or fn(*args, **kwargs)
        >>> run = HostFunction(nbyoc.function([x], nbyoc.exp(x) * 2.0)).instrumented(wrap)
        >>> run(np.zeros(2, np.float32))
        array([2., 2.], dtype=float32)
        >>> seen
        ['%0 = exp(...)', 'the result = multiply(...)']
        """
        copy = object.__new__(HostFunction)
        copy.__dict__.update(self.__dict__)
        copy._steps = [
            step._replace(fn=wrap(node, step.fn, step.label))
            for node, step in zip(self._nodes, self._steps)
        ]
        return copy

    def _allocation_error(self, step: _Step, cause: MemoryError) -> AllocationError:
        from .outputs import allocation_error

        t = self._types[step.out]
        if isinstance(t, TensorType):
            return allocation_error(step.label, t.shape, np.dtype(t.dtype), cause)
        return AllocationError(f"{step.label} ran out of memory ({type(cause).__name__}: {cause})")


def _kernel(node: Expr, callees: Mapping[str, Callable], bodies=None) -> tuple[Callable, dict, str]:
    """What runs ``node``: a callable, its keyword arguments, and a label for errors."""
    if isinstance(node, Call) and isinstance(node.op, GlobalVar):
        name = node.op.name_hint
        if name not in callees:
            raise NbyocError(f"nothing to run @{name} with; is it a function of the module?")
        return callees[name], {}, f"@{name}(...)"
    if isinstance(node, Call):
        fn = node.op.reference
        if not node.op.takes_narrow and any(
            np.dtype(t.dtype) in WIDENED
            for t in [*(a.type for a in node.args), *tensor_types(node.type)]
        ):
            fn = _widened(fn, [t.dtype for t in tensor_types(node.type)])
        elif isinstance(node.type, TensorType) and node.type.shape == ():
            fn = _as_array(fn)  # references may return NumPy scalars for 0-d results
        attrs = dict(node.attrs)
        for key, value in attrs.items():
            if isinstance(value, Function):  # an op's body, made ready to run once here
                # (a control-flow body is compiled for the executable's backends; a
                # composite's is one backend's kernel fallen back to the host, which runs
                # it as it is: compiling it would match the same pattern again)
                make = bodies if bodies and node.op.kind == "control" else HostFunction
                attrs[key] = CompiledBody(value, make(value))
        return fn, attrs, f"{node.op.name}(...)"
    if isinstance(node, Tuple):
        return _make_tuple, {}, "(...)"
    if isinstance(node, TupleGetItem):
        return operator.itemgetter(node.index), {}, f"[...].{node.index}"
    raise NbyocError(f"the host executor cannot run {node!r}")


#: Dtypes whose ops compute in float32 and round each result (NumPy's own loops for
#: them, where ml_dtypes has any, round at every step of a sum or a product).
WIDENED = {np.dtype("bfloat16"): np.dtype("float32")}


def _widened(fn: Callable, result_dtypes: list[str]) -> Callable:
    """``fn`` computing on ``WIDENED`` operands in their wider dtype, each result rounded
    to its dtype once (``result_dtypes``: one per result)."""

    def widened(*args, **kwargs):
        args = [a.astype(WIDENED[a.dtype]) if a.dtype in WIDENED else a for a in args]
        result = fn(*args, **kwargs)
        if isinstance(result, tuple):
            return tuple(np.asarray(r).astype(d) for r, d in zip(result, result_dtypes))
        return np.asarray(result).astype(result_dtypes[0])

    return widened


def _is_private(result, operands) -> bool:
    """True if ``result`` is an array of its own: not one of the step's operands (a
    reference may return its input unchanged, as ``clip`` with no bound does) and
    no view of another array."""
    return (
        type(result) is np.ndarray
        and result.base is None
        and not any(result is operand for operand in operands)
    )


def _may_make_fresh_array(node: Expr) -> bool:
    """True if ``node``'s result can be a new array that shares memory with nothing
    (views, tuples and module calls may alias other values). Only "can": whether it
    is, ``_is_private`` checks at run time."""
    return (
        isinstance(node, Call)
        and isinstance(node.op, Op)
        and (node.op.kind != "layout" or node.op.name == "concatenate")
    )


def _schedule(
    nodes: list[Expr], slots: dict, result: Expr, n_params: int, callees, bodies=None
) -> list[_Step]:
    """Steps in evaluation order, each knowing which values die after it and
    whether it can write into one of them instead of allocating (what NumPy's
    own temporary elision does for ``(a + b) - c``). A step writes into a value only
    if the value's own step found it private when it ran (``_is_private``), and so did
    every step that read it before: a reader returning its operand unchanged (``clip``
    with no bound) made the two one array, and writing into the value overwrote the
    reader's result too."""
    last_use: dict[int, int] = {}
    readers: dict[int, list[Expr]] = {}
    for index, node in enumerate(nodes):
        for arg in operands(node):
            last_use[slots[arg]] = index
            readers.setdefault(slots[arg], []).append(node)
    fresh = {slots[n] for n in nodes if _may_make_fresh_array(n)}
    slot_type = {slots[n]: n.type for n in nodes}
    written: set[int] = set()  # values a later step writes into
    steps = []
    for index, node in enumerate(nodes):
        fn, kwargs, what = _kernel(node, callees, bodies)
        args = tuple(slots[a] for a in operands(node))
        release = tuple(sorted({s for s in args if last_use[s] == index} - {slots[result]}))
        reuse = -1
        if isinstance(fn, np.ufunc) and not kwargs:
            for s in release:
                private = s in fresh and all(_may_make_fresh_array(r) for r in readers[s])
                if private and slot_type[s] == node.type:
                    reuse = s
                    written.add(s)
                    break
        # Numbered as the printer numbers bindings, so an error points at a line of print(f).
        label = "the result" if node is result else f"%{slots[node] - n_params}"
        steps.append(_Step(fn, args, kwargs, slots[node], release, reuse, (), f"{label} = {what}"))
    return [
        step._replace(
            check=tuple(s for s in (step.out, *step.args) if s in written and s != step.reuse)
        )
        for step in steps
    ]
