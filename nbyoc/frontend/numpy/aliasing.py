"""What a traced array's name stands for once the function updates arrays in place.

NumPy's ``y[i] = v`` and ``y += v`` change the array ``y`` names, and with it every
name bound to the same array and every view of it (``z = y[1:]``, ``y.T``). Graph
values are immutable, so while ``nbyoc.jit`` traces, an ``Aliasing`` record keeps, per
array the function updated, its latest value: a graph value that computes the array
after the updates so far. Every call built later reads that value instead (the IR's
``resolving_arguments`` hook), and so do the results; calls built before the update
keep reading the old value, as NumPy's computations done before it did.

A view is recorded with how it was taken from its base (``take``) and, when NumPy lets
one write through it, how a new value of the view changes the base (``put``): reading
a view after its base changed takes it again from the base's latest value, and
updating a view updates its base. Where NumPy's answer depends on memory layout (a
reshape of a view may be a view or a copy) or NumPy refuses (``broadcast_to`` is
read-only), a write through the view, or a read of it after its base changed, is
refused rather than guessed.

>>> import numpy as np, nbyoc
>>> @nbyoc.jit
... def shifted(x):
...     y = x * 1.0
...     first = y[0]       # a view of y's first row
...     y[0, 0] = 10.0     # NumPy: first sees it too
...     return first + 1
>>> shifted(np.zeros((2, 2)))
array([11.,  1.])
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import NbyocTypeError
from ...ir import ops
from ...ir.nodes import Expr, Var, resolving_arguments


@dataclass(frozen=True)
class View:
    """A view ``base`` gave: ``take`` takes it from a value of the base; ``put``, given the
    base's value and a new value of the view, returns the base's new value (None where
    NumPy's writes through it are not followed: ``refusal`` says why)."""

    base: Expr
    taken_from: Expr  # (the value of base the view was taken from)
    take: Callable[[Expr], Expr]
    put: Callable[[Expr, Expr], Expr] | None
    refusal: str = ""
    #: False where NumPy's result may be a copy instead (by memory layout): a read
    #: after the base changed is refused too.
    certain: bool = True
    #: The basic index that took it (``base[key]``), if one did.
    key: tuple | None = None
    #: Where the user's code took it (for a view that may be refused later).
    taken_at: str = ""


class Aliasing:
    """One trace's arrays updated in place (their latest values) and views."""

    def __init__(self, scalars=()) -> None:
        self.latest: dict[Expr, Expr] = {}
        self.views: dict[Expr, View] = {}
        self._retaken: dict[Expr, tuple[Expr, Expr]] = {}
        self._scalars = set(scalars)

    def is_scalar_argument(self, node) -> bool:
        """Whether ``node`` is a parameter standing for a Python number or a NumPy scalar
        (immutable: an update binds a new value)."""
        return isinstance(node, Expr) and node in self._scalars

    def is_array(self, node) -> bool:
        """Whether a 0-d ``node`` is an array NumPy updates in place (a 0-d array
        argument, or a view such as ``y[0, ...]``) rather than a NumPy scalar."""
        if not isinstance(node, Expr):
            return False
        return (isinstance(node, Var) and node not in self._scalars) or node in self.views

    def writes_back(self, value, target, key) -> bool:
        """Whether ``target[key] = value`` stores what ``value``, a view taken as
        ``target[key]``, already holds: Python's second step of ``y[i] += v``."""
        view = self.views.get(value) if isinstance(value, Expr) else None
        return view is not None and view.base is target and _same_key(view.key, key)

    def value(self, node):
        """What ``node`` stands for now: its latest value after the updates so far."""
        if not isinstance(node, Expr):
            return node
        view = self.views.get(node)
        if view is None:
            return self.latest.get(node, node)
        base = self.value(view.base)
        if base is view.taken_from:
            return node
        if not view.certain:
            raise NbyocTypeError(
                f"an array used after the array it was taken from changed in place: "
                f"{view.refusal}; take a copy before the update (z = np.copy(...)) or take "
                f"it again after (the array was taken {view.taken_at})"
            )
        cached = self._retaken.get(node)
        if cached is None or cached[0] is not base:
            cached = (base, view.take(base))
            self._retaken[node] = cached
        return cached[1]

    def store(self, target: Expr, new: Expr, what: str) -> None:
        """Make ``target`` (and whatever it views) hold ``new`` from here on; ``what``
        names the update in errors (``y[0] = ...``)."""
        view = self.views.get(target)
        if view is None:
            if isinstance(target, Var):
                raise NbyocTypeError(
                    f"{what} updates the argument {target.name_hint!r} in place: NumPy "
                    f"would change the caller's array, and a jitted function does not; "
                    f"update a copy (y = np.copy({target.name_hint}); y[...] = ...) and "
                    f"return it"
                )
            self.latest[target] = new
            return
        if view.put is None:
            raise NbyocTypeError(f"{what} writes through a view: {view.refusal}")
        self.store(view.base, view.put(self.value(view.base), new), what)

    def add_view(self, view, base: Expr, take, put, refusal="", certain=True, key=None):
        """Record ``view``, just taken from ``base`` by ``take``; returns ``view``."""
        if view is not base and isinstance(view, Expr):
            where = "" if certain else _user_frame()
            self.views[view] = View(base, self.value(base), take, put, refusal, certain, key, where)
        return view


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _user_frame() -> str:
    """Where the innermost caller outside nbyoc (and NumPy's dispatch) is."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith((_PACKAGE, os.path.dirname(np.__file__))):
            return f'at File "{frame.f_code.co_filename}", line {frame.f_lineno}'
        frame = frame.f_back
    return "while tracing"


def _same_key(a, b) -> bool:
    """Whether basic indices ``a`` and ``b`` are the same (ints, slices, None, ...)."""
    if a is None:
        return False
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    simple = (int, slice, type(None), type(Ellipsis))
    return (
        len(a) == len(b)
        and all(isinstance(k, simple) for k in a + b)
        and all(type(x) is type(y) and x == y for x, y in zip(a, b))
    )


_ACTIVE: contextvars.ContextVar[Aliasing | None] = contextvars.ContextVar(
    "nbyoc_aliasing", default=None
)


@contextlib.contextmanager
def tracking(scalars=()):
    """Within it (``nbyoc.jit``'s trace), in-place updates are followed: yields the
    ``Aliasing`` record, through which every new call reads its arguments; ``scalars``
    are the parameters standing for Python numbers and NumPy scalars."""
    record = Aliasing(scalars)
    token = _ACTIVE.set(record)
    try:
        with resolving_arguments(record.value):
            yield record
    finally:
        _ACTIVE.reset(token)


def active() -> Aliasing | None:
    """The record of the trace in progress (None outside ``nbyoc.jit``'s tracing)."""
    return _ACTIVE.get()


def current(node):
    """``node``'s latest value in the trace in progress (itself outside one)."""
    record = _ACTIVE.get()
    return node if record is None else record.value(node)


def fresh(result, inputs):
    """``result`` as a new array: NumPy's functions return a new array (or a view,
    recorded as one), never an input itself, and an update of the input must not show
    in the result; while a trace follows updates, an input returned as it is (np.clip
    without bounds, np.positive) becomes a copy."""
    if _ACTIVE.get() is not None and any(result is i for i in inputs):
        return ops.identity(result)
    return result


def is_view(node) -> bool:
    """Whether ``node`` was taken as a view in the trace in progress."""
    record = _ACTIVE.get()
    return record is not None and node in record.views


def view(put=None, refusal: str = "", certain=None):
    """Decorate builder ``take(base, *args, **kwargs)`` of one of NumPy's views: while a
    trace follows updates, its result is recorded as a view of ``base``. ``put(base,
    new, *args, **kwargs)`` returns the base with the view's elements replaced by
    ``new`` (None: writes through it refused, ``refusal`` saying why); ``certain(base)``
    says whether NumPy's result is a view whatever the memory layout (``View.certain``;
    default: always)."""

    def decorate(take):
        @functools.wraps(take)
        def build(base, *args, **kwargs):
            result = take(base, *args, **kwargs)
            record = _ACTIVE.get()
            if record is not None and isinstance(base, Expr):
                sure = certain is None or certain(base)
                writer = None
                if put is not None and sure:
                    writer = lambda b, new: put(b, new, *args, **kwargs)  # noqa: E731
                record.add_view(
                    result, base, lambda b: take(b, *args, **kwargs), writer, refusal, sure
                )
            return result

        return build

    return decorate
