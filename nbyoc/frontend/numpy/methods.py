"""The ndarray methods and attributes of graph values, and NumPy's protocols on them
(``__array_ufunc__``, ``__array_function__``, indexing, ``len()``, and the refusals of
``bool()``, ``float()``, ``np.asarray`` and ``y[i] = v``). ``attach`` copies them onto
``nbyoc.ir.Expr``, as JAX's numpy attaches its array methods: the IR's nodes know
nothing of NumPy, and ``import nbyoc`` attaches them (this package does on import).

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (2, 3))
>>> x.T.shape, x.max(axis=0).shape, x.reshape(3, 2).shape, len(x)
((3, 2), (3,), (3, 2), 2)
>>> if x > 0: pass
Traceback (most recent call last):
    ...
nbyoc.errors.NbyocTypeError: a graph value has no truth value while the graph is being built: ...
"""

from __future__ import annotations

import contextlib
import contextvars

from ...errors import NbyocTypeError
from ...ir import ops
from ...ir.builder import call_op
from ...ir.dtypes import normalize_dtype
from ...ir.nodes import TupleGetItem, refuse_equality
from ...ir.types import TensorType
from . import aliasing, arithmetic, linalg, reductions, shapes, sorting
from .arithmetic import AUGMENTED
from .functions import array_function
from .indexing import getitem
from .inplace import augmented, set_item
from .refusals import refuse
from .ufuncs import array_ufunc

#: Whether ``==`` and ``!=`` on graph values build comparisons (while ``nbyoc.jit``
#: runs a user's function) rather than refuse (everywhere else).
_ELEMENTWISE_EQUALITY = contextvars.ContextVar("nbyoc_elementwise_equality", default=False)


@contextlib.contextmanager
def elementwise_equality():
    """Within it, ``x == y`` and ``x != y`` on graph values are NumPy's elementwise
    comparisons, as NumPy code expects (``nbyoc.jit`` traces functions in it)."""
    token = _ELEMENTWISE_EQUALITY.set(True)
    try:
        yield
    finally:
        _ELEMENTWISE_EQUALITY.reset(token)


class ArrayMethods:
    """The NumPy-style methods, attributes and protocols of graph values: a namespace
    whose members ``attach`` copies onto ``Expr`` (not a base class of it, so that the
    IR imports nothing of the NumPy layer)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return array_function(func, args, kwargs)

    __getitem__ = getitem

    def __array__(self, dtype=None, copy=None):
        # (NumPy asks for the data when an ndarray meets a graph value where it cannot
        # defer to it: an ndarray indexed by it, np.asarray of it, a Python-level loop)
        raise NbyocTypeError(
            "a graph value holds no data while the graph is being built, and NumPy asked "
            "for it (an ndarray indexed by a traced value, e.g. np.eye(n)[labels], or "
            "np.asarray/np.array of one); make the array a graph value first: "
            "nbyoc.const(table)[labels]; outside nbyoc.jit, compile the function "
            "(nbyoc.compile) and call it with arrays"
        )

    def __and__(self, other):
        """``x & y`` of bools: ``np.logical_and`` (integers are refused)."""
        return arithmetic.bitwise("bitwise_and")(self, other)

    def __rand__(self, other):
        return arithmetic.bitwise("bitwise_and")(other, self)

    def __or__(self, other):
        """``x | y`` of bools: ``np.logical_or`` (integers are refused)."""
        return arithmetic.bitwise("bitwise_or")(self, other)

    def __ror__(self, other):
        return arithmetic.bitwise("bitwise_or")(other, self)

    def __xor__(self, other):
        """``x ^ y`` of bools: ``np.logical_xor`` (integers are refused)."""
        return arithmetic.bitwise("bitwise_xor")(self, other)

    def __rxor__(self, other):
        return arithmetic.bitwise("bitwise_xor")(other, self)

    def __invert__(self):
        """``~x`` of bools: ``np.logical_not`` (integers are refused)."""
        return arithmetic.bitwise("invert")(self)

    __setitem__ = set_item

    def __bool__(self):
        raise NbyocTypeError(
            "a graph value has no truth value while the graph is being built: Python's "
            "if/and/or/not cannot branch on data the graph has not computed yet; choose "
            "between values with np.where(condition, x, y) (and combine conditions with "
            "np.logical_and, np.logical_or, np.logical_not)"
        )

    def __float__(self):
        raise NbyocTypeError(
            "float() of a graph value: its number is not known while the graph is being "
            "built; keep it an array (x.astype(np.float64) converts the dtype)"
        )

    __int__ = __index__ = __float__

    def __iter__(self):
        """Iterate over the first axis, like iterating an ndarray (``low, high = q``);
        a tuple value's fields, as the IR iterates them."""
        if not isinstance(self.type, TensorType):
            return (TupleGetItem(self, i) for i in range(len(self.type.fields)))
        if not self.shape:
            raise TypeError("iteration over a 0-d graph value")
        length = self.shape[0]
        if not isinstance(length, int):
            raise NbyocTypeError(
                f"iterating over an axis of symbolic length ({length}): its count is not "
                f"known while tracing"
            )
        return (self[i] for i in range(length))

    def __len__(self) -> int:
        """The length of the first axis, like ``len(ndarray)``."""
        if not self.shape:
            raise TypeError("len() of a 0-d graph value")
        return self.shape[0]

    def __eq__(self, other):
        """``x == y``: NumPy's elementwise comparison while ``nbyoc.jit`` traces, else
        refused as the IR refuses it (nodes compare by identity)."""
        if _ELEMENTWISE_EQUALITY.get():
            return call_op("equal", self, other)
        refuse_equality("==", "equal")

    def __ne__(self, other):
        """``x != y``: as ``==``, with ``not_equal``."""
        if _ELEMENTWISE_EQUALITY.get():
            return call_op("not_equal", self, other)
        refuse_equality("!=", "not_equal")

    @property
    def T(self):
        """The transpose (axes reversed), like ``ndarray.T``."""
        return shapes.transpose(self) if self.ndim > 1 else self

    @property
    def ndim(self) -> int:
        """The number of axes, like ``ndarray.ndim``."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements, like ``ndarray.size`` (a symbolic size stays one)."""
        return self._tensor_type().size

    def sum(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.sum``: ``nbyoc.sum(self, axis, keepdims)``."""
        return reductions.reduction("sum")(self, axis=axis, keepdims=keepdims, **kwargs)

    def mean(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.mean``: ``nbyoc.mean(self, axis, keepdims)``."""
        return reductions.reduction("mean")(self, axis=axis, keepdims=keepdims, **kwargs)

    def max(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.max``: ``nbyoc.max(self, axis, keepdims)``."""
        return reductions.reduction("max")(self, axis=axis, keepdims=keepdims, **kwargs)

    def min(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.min``: ``nbyoc.min(self, axis, keepdims)``."""
        return reductions.reduction("min")(self, axis=axis, keepdims=keepdims, **kwargs)

    def prod(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.prod``: ``nbyoc.prod(self, axis, keepdims)``."""
        return reductions.reduction("prod")(self, axis=axis, keepdims=keepdims, **kwargs)

    def cumsum(self, axis=None, dtype=None, out=None):
        """Like ``ndarray.cumsum``: ``np.cumsum(self, axis, dtype)``."""
        return reductions.cumulative("cumsum")(self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None):
        """Like ``ndarray.cumprod``: ``np.cumprod(self, axis, dtype)``."""
        return reductions.cumulative("cumprod")(self, axis, dtype, out)

    def argmax(self, axis=None, keepdims=False):
        """Like ``ndarray.argmax``: ``nbyoc.argmax(self, axis, keepdims)``."""
        return ops.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        """Like ``ndarray.argmin``: ``nbyoc.argmin(self, axis, keepdims)``."""
        return ops.argmin(self, axis=axis, keepdims=keepdims)

    def var(self, *args, **kwargs):
        """Like ``ndarray.var`` (``ddof`` included)."""
        return reductions.variance(self, *args, **kwargs)

    def std(self, *args, **kwargs):
        """Like ``ndarray.std``: the square root of ``var``."""
        return reductions.deviation(self, *args, **kwargs)

    def clip(self, min=None, max=None, **kwargs):
        """Like ``ndarray.clip``: ``np.clip(self, min, max)``."""
        return arithmetic.clip(self, min, max, **kwargs)

    def squeeze(self, axis=None):
        """Like ``ndarray.squeeze``."""
        return shapes.squeeze(self, axis)

    def ravel(self, order="C"):
        """Like ``ndarray.ravel``: the flattened value (C order)."""
        return shapes.ravel(self, order)

    def flatten(self, order="C"):
        """Like ``ndarray.flatten``: a flattened copy."""
        return shapes.copy(shapes.ravel(self, order))

    def copy(self, order="C"):
        """Like ``ndarray.copy``: a new array of the values (``np.copy``)."""
        return shapes.copy(self, order)

    def round(self, decimals=0, out=None):
        """Like ``ndarray.round`` to whole numbers (halves to even)."""
        return arithmetic.around(self, decimals, out)

    def dot(self, b):
        """Like ``ndarray.dot``: ``np.dot(self, b)``."""
        return linalg.dot(self, b)

    def reshape(self, *shape, order="C"):
        """Like ``ndarray.reshape``: ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
        return shapes.reshape(self, shape[0] if len(shape) == 1 else shape, order)

    def transpose(self, *axes):
        """Like ``ndarray.transpose``: ``x.transpose(1, 0)`` or ``x.transpose((1, 0))``."""
        axes = axes[0] if len(axes) == 1 else (axes or None)
        return shapes.transpose(self, axes)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        """Like ``ndarray.astype``: ``nbyoc.cast(self, dtype)`` (NumPy's unsafe casting:
        floats truncate toward zero into integers); for its own dtype, a copy within
        ``nbyoc.jit`` (which in-place updates of ``self`` leave alone), else the value."""
        if casting != "unsafe" or order not in ("K", "C"):
            refuse("astype", "casts as NumPy's default (casting='unsafe', C order) only")
        to = normalize_dtype(dtype)
        if to != self.dtype:
            return ops.cast(self, to)
        return shapes.copy(self) if copy and aliasing.active() else self

    def sort(self, axis=-1, kind=None, order=None, **kwargs):
        """``ndarray.sort`` sorts in place, which a graph value cannot: refused, with
        what to write instead."""
        raise NbyocTypeError(
            "x.sort() sorts x in place, and graph values are immutable; write "
            "x = np.sort(x, axis) (a sorted copy) instead"
        )

    def argsort(self, axis=-1, kind=None, order=None, **kwargs):
        """Like ``ndarray.argsort``: ``np.argsort(self, axis)`` (stable)."""
        return sorting.sorting("argsort", "argsort")(self, axis, kind, order, **kwargs)

    def searchsorted(self, v, side="left", sorter=None):
        """Like ``ndarray.searchsorted``: ``np.searchsorted(self, v, side, sorter)``."""
        return sorting.searchsorted(self, v, side, sorter)


for _name, (_binary, _symbol) in AUGMENTED.items():  # (y += v ...: ``inplace``)
    setattr(ArrayMethods, _name, augmented(_binary, _symbol))

#: What every class body holds of its own (``__module__``, ``__doc__``...), and the
#: ``__hash__ = None`` Python gives a class body that defines ``__eq__``: not copied
#: (nodes hash by identity, as ``Expr`` says).
_CLASS_FIELDS = frozenset(vars(type("Empty", (), {}))) | {"__hash__"}
#: The members ``attach`` copies: NumPy's layer on graph values.
METHODS = {name: value for name, value in vars(ArrayMethods).items() if name not in _CLASS_FIELDS}
#: Per class given the layer, what it held of its own under each name ``attach`` set
#: (None: nothing), so that the layer can be taken off again (a test shows that the IR
#: works without it).
REPLACED: dict[type, dict[str, object]] = {}


def attach(cls: type) -> None:
    """Give ``cls`` (``nbyoc.ir.Expr``) the NumPy layer: ``METHODS``, set on the class
    (as JAX's numpy sets its array methods), so every node answers NumPy's protocols."""
    REPLACED.setdefault(cls, {name: vars(cls).get(name) for name in METHODS})
    for name, value in METHODS.items():
        setattr(cls, name, value)
