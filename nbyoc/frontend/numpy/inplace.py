"""NumPy's in-place updates on graph values while ``nbyoc.jit`` traces: ``y[key] = v``
(``set_item``) and the augmented assignments ``y += v``, ``y *= v`` ... (``augmented``),
each a new value (``assignment``) that the trace's ``aliasing`` record binds to the array
``y`` names: every other name for the same array, and every view of it, sees the update
as in NumPy.

An augmented assignment keeps ``y``'s dtype with NumPy's casting rule (``same_kind``:
an int array ``+= 1.5`` raises, as NumPy's does). On a parameter of the traced function
(or a view of one) both are refused, since NumPy would change the caller's array, which
a jitted function does not; on a 0-d value (a NumPy scalar: a reduction's result, a
Python number argument) ``+=`` binds a new value, as Python does with NumPy's scalars.
Outside ``nbyoc.jit``, graph values are immutable: ``y[key] = v`` is refused and
``y += v`` binds a new value.

>>> import numpy as np, nbyoc
>>> @nbyoc.jit
... def clipped_copy(x):
...     y = x * 2
...     z = y              # another name for the same array
...     y[y > 3] = 3
...     y[0] += 10
...     return z
>>> clipped_copy(np.arange(4.0))
array([10.,  2.,  3.,  3.])
"""

from __future__ import annotations

import numpy as np

from ...errors import NbyocTypeError
from ...ir import ops
from ...ir.nodes import Expr
from . import aliasing
from .arithmetic import kept_in_place
from .assignment import assigned, assigned_values, integer_index
from .indexing import index


def augmented(binary: str, symbol: str):
    """The method for ``y <symbol> v``: ``y.<binary>(v)`` kept in ``y``'s dtype as NumPy's
    in-place operation keeps it."""

    def update(self, other):
        record = aliasing.active()
        name = _name(self)
        if record is not None and record.is_scalar_argument(self):
            record = None  # (a Python number or NumPy scalar: += binds a new one)
        result = getattr(self, binary)(other)
        if result is NotImplemented:
            return result
        result = kept_in_place(result, self.dtype, symbol, name)
        if record is None or (self.type.ndim == 0 and not record.is_array(self)):
            return result  # (immutable: Python binds the new value to the name)
        if result.type.shape != self.type.shape:
            raise NbyocTypeError(
                f"{name} {symbol} ...: the result's shape {result.type.shape} is not "
                f"{name}'s {self.type.shape} (NumPy's ValueError: non-broadcastable output "
                f"operand); write {name} = {name} {symbol[:-1]} ... for a new value"
            )
        record.store(self, result, f"{name} {symbol} ...")
        return self

    update.__name__ = f"__i{binary[2:]}"
    update.__doc__ = f"``y {symbol} v``: NumPy's in-place {symbol} as a new value."
    return update


def set_item(self, key, value) -> None:
    """``y[key] = value`` (``Expr.__setitem__``): within ``nbyoc.jit``'s trace, ``y``
    holds the update from here on (``assignment``, ``aliasing``); else refused."""
    record = aliasing.active()
    if record is None:
        # (graph values are immutable: an update is a new value, which Python's
        # ``y[i] = v`` cannot bind back to ``y`` outside a trace that follows it)
        raise NbyocTypeError(
            "a graph value cannot be updated in place (y[...] = v) outside nbyoc.jit: "
            "nbyoc's graph values are immutable; write the update as a new value: "
            "y = np.where(mask, v, y) for a boolean mask, or build y from slices with "
            "np.concatenate (in a function under nbyoc.jit, y[...] = v works as in NumPy)"
        )
    what = f"{_name(self)}[...] = ..."
    if record.is_scalar_argument(self) or (self.type.ndim == 0 and not record.is_array(self)):
        raise NbyocTypeError(
            f"{what}: a 0-d value here is a NumPy scalar (a reduction's result, a number "
            f"argument), which does not support item assignment; bind a new value instead"
        )
    if record.writes_back(value, self, key):
        return  # (y[i] += v: the view y[i] already wrote the update into y)
    record.store(self, assigned(record.value(self), key, value), what)


def _name(node: Expr) -> str:
    return getattr(node, "name_hint", None) or "y"


def into(out, result: Expr, name: str):
    """``ufunc(..., out=y)``: ``result`` cast into ``y`` as NumPy's ufuncs cast into
    ``out`` (``same_kind``), broadcast to its shape, and stored in it; returns ``y``."""
    targets = out if isinstance(out, tuple) else (out,)
    record = aliasing.active()
    if record is None or len(targets) != 1 or not isinstance(targets[0], Expr):
        raise NbyocTypeError(
            f"{name}(..., out=...) writes into an array, which a graph value is only within "
            f"nbyoc.jit (and a NumPy array never is while tracing); use the result instead"
        )
    (target,) = targets
    what = f"{name}(..., out={_name(target)})"
    result = kept_in_place(result, target.dtype, "out=", what)
    if result.type.shape != target.type.shape:
        try:
            result = ops.broadcast_to(result, target.type.shape)
        except NbyocTypeError:
            raise NbyocTypeError(
                f"{what}: the result's shape {result.type.shape} does not broadcast to "
                f"out's {target.type.shape} (NumPy's non-broadcastable output operand)"
            ) from None
    record.store(target, result, what)
    return target


#: ``ufunc.at`` -> the reduction ``scatter_nd`` combines repeated indices with.
_UNBUFFERED = {np.add: "add", np.multiply: "mul", np.maximum: "max", np.minimum: "min"}


def unbuffered(ufunc, y, indices, values=None):
    """``np.add.at(y, indices, values)`` (and ``multiply``, ``maximum``, ``minimum``):
    ``y`` updated in place at one integer-array index of its first axis, repeated
    indices combining (``scatter_nd`` with a reduction), as NumPy's unbuffered ``at``.

    >>> import numpy as np, nbyoc
    >>> @nbyoc.jit
    ... def histogram(labels, weights):
    ...     totals = np.zeros_like(weights, shape=(3,))
    ...     np.add.at(totals, labels, weights)
    ...     return totals
    >>> histogram(np.array([0, 2, 2]), np.array([1.0, 2.0, 4.0]))
    array([1., 0., 6.])
    """
    name = f"numpy.{ufunc.__name__}.at"
    reduction = _UNBUFFERED.get(ufunc)
    record = aliasing.active()
    if reduction is None or values is None or record is None or not isinstance(y, Expr):
        raise NbyocTypeError(
            f"{name} is not supported by nbyoc.jit: nbyoc has np.add.at, np.multiply.at, "
            f"np.maximum.at and np.minimum.at with values, on a graph value within nbyoc.jit"
        )
    if isinstance(indices, tuple) or str(getattr(indices, "dtype", "")) == "bool":
        raise NbyocTypeError(
            f"{name}: nbyoc takes one integer array indexing y's first axis (np.add.at(y, "
            f"labels, v)); for other axes, move the axis first"
        )
    now = record.value(y)
    picked = index(now, (indices,))  # (checks the index as y[indices] would)
    # (NumPy's ufunc.at casts its result into y with same_kind: int += 1.5 raises)
    kept_in_place(ufunc(picked, values), now.dtype, f"{ufunc.__name__}.at", name)
    values = assigned_values(values, now.type.dtype, picked.type.shape)
    rows = ops.reshape(integer_index(indices), (*np.shape(indices), 1))
    record.store(y, ops.scatter_nd(now, rows, values, reduction), f"{name}({_name(y)}, ...)")
