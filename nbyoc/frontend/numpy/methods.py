"""Graph values meet NumPy habits: ufuncs, array functions, methods and attributes.

A NumPy ufunc applied to a graph value builds the call of the nbyoc op whose
reference is that ufunc (the table is derived from the op registry, so a new
op with a ufunc reference needs nothing here); ``ufunc.reduce`` builds the
matching reduction. The array functions below build the same graph as their
nbyoc counterparts. Anything else raises ``NbyocTypeError`` naming the NumPy
function and what to use instead: nothing silently turns a graph value into
an array, a Python bool, or something that computes another thing.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (2, 3))
>>> y = np.exp(x) * np.float32(2)
>>> y.op.name, y.args[0].op.name
('multiply', 'exp')
>>> np.sum(x, axis=1, keepdims=True).type
Tensor[(2, 1), float32]
>>> x.T.shape, x.max(axis=0).shape, x.reshape(3, 2).shape
((3, 2), (3,), (3, 2))
>>> np.arctan(x)
Traceback (most recent call last):
    ...
nbyoc.errors.NbyocTypeError: numpy.arctan has no nbyoc op yet; ...
"""

from __future__ import annotations

import contextlib
import contextvars
import functools

import numpy as np

from ...errors import NbyocTypeError, ValueOutOfRangeError
from ...ir import ops
from ...ir.builder import call_op, weak_kind
from ...ir.dtypes import normalize_dtype
from ...ir.nodes import Expr, TupleGetItem
from ...ir.ops.index import index as tensor_index
from ...ir.types import TensorType
from ...ir.op import get_op, list_ops
from . import sorting as numpy_functions
from .masks import DATA_DEPENDENT, MaskedSelection, is_mask_of, refuses
from . import support as numpy_support

#: ``ufunc.reduce`` -> the reduction it computes.
UFUNC_REDUCTIONS = {np.add: "sum", np.maximum: "max", np.minimum: "min", np.multiply: "prod"}
#: ``ufunc.accumulate`` -> the scan it computes.
UFUNC_SCANS = {np.add: "cumsum", np.multiply: "cumprod", np.maximum: "cummax",
               np.minimum: "cummin", np.logaddexp: "logcumsumexp"}  # fmt: skip
#: Ufuncs without an op of their own that are exactly a short graph of ops.
UFUNC_GRAPHS = {
    np.square: lambda x: x * x,
    np.positive: lambda x: x,
    np.conjugate: lambda x: x,  # real dtypes only: nbyoc has no complex ones
    np.logaddexp: numpy_functions.logaddexp,
}
#: (ufunc, method) without an op of their own, and what to write instead.
UFUNC_HINTS = {
    (np.exp2, "__call__"): "write np.exp(x * np.log(2))",
    (np.cbrt, "__call__"): "write np.sign(x) * np.abs(x) ** (1 / 3)",
}


def _ops():
    return ops


@functools.cache
def ufunc_ops() -> dict:
    """NumPy ufunc -> name of the nbyoc op whose reference it is."""
    table = {}
    for name in list_ops():
        reference = get_op(name).reference
        if isinstance(reference, np.ufunc):
            table.setdefault(reference, name)
    return table


def array_ufunc(ufunc, method: str, inputs, kwargs):
    """What ``Expr.__array_ufunc__`` returns: the call of the matching op."""
    name = f"numpy.{ufunc.__name__}"
    if kwargs.get("out") is not None:
        raise NbyocTypeError(
            f"{name}(..., out=...) cannot write into a graph value; use the result instead"
        )
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    if method == "accumulate" and ufunc in UFUNC_SCANS:
        return _accumulate(ufunc, *inputs, **kwargs)
    reduce = method == "reduce" and ufunc in UFUNC_REDUCTIONS
    axis, keepdims = (kwargs.pop("axis", 0), kwargs.pop("keepdims", False)) if reduce else (0, 0)
    unsupported = sorted(k for k, v in kwargs.items() if v is not None)
    if unsupported:
        raise NbyocTypeError(
            f"{name} on graph values takes no {', '.join(unsupported)}=; nbyoc never casts "
            f"or masks silently"
        )
    if reduce:
        return getattr(_ops(), UFUNC_REDUCTIONS[ufunc])(inputs[0], axis=axis, keepdims=keepdims)
    if method == "__call__" and ufunc in ufunc_ops():
        return call_op(ufunc_ops()[ufunc], *inputs)
    if method == "__call__" and ufunc in UFUNC_GRAPHS:
        return UFUNC_GRAPHS[ufunc](*inputs)
    hint = UFUNC_HINTS.get((ufunc, method), "")
    what = name if method == "__call__" else f"{name}.{method}"
    raise NbyocTypeError(numpy_support.unsupported_ufunc(what, hint))


def _accumulate(ufunc, array, axis=0, dtype=None):
    """``ufunc.accumulate``: the scan, in ``dtype`` (or the dtype NumPy accumulates the
    array's in: ``np.add.accumulate`` of int8 gives int64, of float32 float32)."""
    want = normalize_dtype(dtype or ufunc.accumulate(np.zeros(1, array.dtype)).dtype)
    return _scan(UFUNC_SCANS[ufunc], array, axis, want)


def _scan(op: str, a, axis, dtype=None):
    """The scan ``op`` of ``a`` along ``axis`` (None: of the flattened ``a``) computed in
    and giving ``dtype`` (None: the op's own result dtype). Wrapping integer sums and
    products computed wider then cast to ``dtype`` give what NumPy's in ``dtype`` give."""
    if dtype is not None:
        dtype = normalize_dtype(dtype)
        a = a if a.dtype == dtype else _ops().cast(a, dtype)
    out = getattr(_ops(), op)(a, axis=axis)
    return out if dtype is None or out.dtype == dtype else _ops().cast(out, dtype)


def _cumulative(op: str):
    def build(a, axis=None, dtype=None, out=None):
        if out is not None:
            _no(op, "takes no out= on graph values")
        return _scan(op, a, axis, dtype)

    return build


def _cumulative_array_api(op: str, identity: int):
    """np.cumulative_sum / np.cumulative_prod (NumPy 2.1): the scan, with the identity
    first along the axis when ``include_initial``."""

    def build(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        if out is not None:
            _no(op, "takes no out= on graph values")
        if axis is None and x.ndim != 1:
            _no(op, "needs axis= for an array of more than one dimension (as NumPy)")
        axis = 0 if axis is None else axis
        scanned = _scan(op, x, axis, dtype)
        if not include_initial:
            return scanned
        shape = list(scanned.shape)
        shape[axis % len(shape)] = 1
        first = _ops().broadcast_to(np.asarray(identity, scanned.dtype), tuple(shape))
        return _ops().concatenate([first, scanned], axis=axis)

    return build


def _no(name: str, what: str):
    raise NbyocTypeError(f"numpy.{name}: {what}")


def _reduction(op: str):
    def build(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        if dtype is not None or out is not None or kwargs:
            extra = ["dtype"] * (dtype is not None) + ["out"] * (out is not None) + list(kwargs)
            _no(op, f"takes no {', '.join(extra)}= on graph values; use nbyoc.{op}(x, axis=...)")
        return getattr(_ops(), op)(a, axis=axis, keepdims=keepdims)

    return build


def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        _no("reshape", f"order={order!r}: graph values are reshaped in C order only")
    return _ops().reshape(a, shape if shape is not None else newshape)


def _dot(a, b, out=None):
    ndims = [x.ndim if isinstance(x, Expr) else np.ndim(x) for x in (a, b)]
    if out is not None or max(ndims) > 2:
        _no("dot", "is nbyoc.matmul (a @ b) only for 1-D and 2-D operands without out=")
    return _ops().matmul(a, b)


def _clip(a, a_min=None, a_max=None, out=None, **kwargs):
    """np.clip: the clip op for Python number bounds, else maximum then minimum (NumPy's
    promotion with array and NumPy scalar bounds). Python numbers are weak, as in
    NumPy 2: a float bound makes an integer or bool tensor float64, an int bound a bool
    tensor int64, and an int bound that would bind every element to a value the
    tensor's dtype cannot hold raises as NumPy does (one beyond the range on the other
    side binds nothing)."""
    if out is not None or kwargs:
        _no("clip", "takes no out= or other keywords on graph values")
    bounds = (a_min, a_max)
    strong = [b for b in bounds if b is not None and not _is_python_number(b)]
    if strong or weak_kind(a) is not None or not isinstance(a, Expr):
        result = a if a_min is None else np.maximum(a, a_min)
        return result if a_max is None else np.minimum(result, a_max)
    kind = np.dtype(a.type.dtype).kind
    if kind in "biu" and any(isinstance(b, float) for b in bounds):
        a = _ops().cast(a, "float64")
    elif kind == "b" and any(b is not None and not isinstance(b, bool) for b in bounds):
        a = _ops().cast(a, "int64")  # (each bound must then be an int64, as in NumPy)
        _check_int_bounds(np.dtype(np.int64), *[b for b in bounds if b is not None], both=True)
    elif kind == "b":  # bool bounds of a bool tensor: NumPy's maximum and minimum
        result = a if a_min is None else np.maximum(a, a_min)
        return result if a_max is None else np.minimum(result, a_max)
    if np.dtype(a.type.dtype).kind in "iu":
        _check_int_bounds(np.dtype(a.type.dtype), a_min, a_max)
    return _ops().clip(a, *[None if b is None else float(b) for b in bounds])


def _is_python_number(value) -> bool:
    return type(value) in (bool, int, float)


def _check_int_bounds(dtype: np.dtype, low=None, high=None, both=False) -> None:
    """Refuse, as NumPy does, a Python int bound past the end of ``dtype``'s range on
    the side where it would bind (on either side with ``both``)."""
    info = np.iinfo(dtype)
    for value, is_low in ((low, True), (high, False)):
        if value is None:
            continue
        above, below = value > info.max, value < info.min
        if (above and (is_low or both)) or (below and (not is_low or both)):
            raise ValueOutOfRangeError(
                f"np.clip: Python integer {value} out of bounds for {dtype}, as NumPy 2 "
                f"refuses it: every element would become a value {dtype} cannot hold"
            )


def _squeeze(a, axis=None):
    shape = a.shape
    axes = range(len(shape)) if axis is None else np.atleast_1d(axis).tolist()
    axes = {ax % len(shape) for ax in axes if axis is not None or shape[ax] == 1}
    if any(shape[ax] != 1 for ax in axes):
        _no("squeeze", f"cannot squeeze an axis whose length is not 1 (shape {shape})")
    return _ops().reshape(a, tuple(d for k, d in enumerate(shape) if k not in axes))


def _expand_dims(a, axis):
    axes = np.atleast_1d(axis).tolist()
    ndim = a.ndim + len(axes)
    axes = {ax % ndim for ax in axes}
    dims = iter(a.shape)
    return _ops().reshape(a, tuple(1 if k in axes else next(dims) for k in range(ndim)))


def _arg_reduction(op: str):
    def build(a, axis=None, out=None, *, keepdims=False):
        if out is not None:
            _no(op, "takes no out= on graph values")
        return getattr(_ops(), op)(a, axis=axis, keepdims=keepdims)

    return build


def _variance(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kwargs):
    """np.var as ops: the mean of squared deviations from the mean, over n - ddof."""
    if dtype is not None or out is not None or kwargs:
        _no("var", "takes no dtype=, out=, where= on graph values")
    mean = _ops().mean(a, axis=axis, keepdims=True)
    deviation = a - mean
    squares = deviation * deviation
    if ddof == 0:
        return _ops().mean(squares, axis=axis, keepdims=keepdims)
    axes = range(a.ndim) if axis is None else np.atleast_1d(axis).tolist()
    count = int(np.prod([a.shape[ax] for ax in axes]))
    return _ops().sum(squares, axis=axis, keepdims=keepdims) / (count - ddof)


def _stack(arrays, axis=0, out=None, **kwargs):
    if out is not None or kwargs:
        _no("stack", "takes no out=, dtype= or casting= on graph values")
    arrays = list(arrays)
    if not arrays:
        _no("stack", "needs at least one array")
    ndim = np.ndim(arrays[0]) + 1
    axis = axis % ndim
    return _ops().concatenate([_expand_dims(x, axis) for x in arrays], axis=axis)


def _filled_like(value_of):
    def build(a, *args, dtype=None, shape=None, **kwargs):
        if kwargs.get("order", "K") not in ("K", "C") or kwargs.get("subok") is False:
            _no("zeros_like", "graph values are C-ordered arrays")
        fill = value_of(args)
        dtype = np.dtype(dtype or a.dtype)
        shape = a.shape if shape is None else tuple(np.atleast_1d(shape).tolist())
        return _ops().broadcast_to(np.asarray(fill, dtype), shape)

    return build


def _round(a, decimals=0, out=None):
    if decimals != 0 or out is not None:
        _no("round", "rounds to whole numbers only on graph values (no decimals=, out=)")
    return _ops().round(a)


def _outer(a, b, out=None):
    if out is not None:
        _no("outer", "takes no out= on graph values")
    return _reshape(a, (-1, 1)) * _reshape(b, (1, -1))


#: NumPy array function -> builder taking NumPy's arguments.
# fmt: off
ARRAY_FUNCTIONS = {
    np.sum: _reduction("sum"),
    np.mean: _reduction("mean"),
    np.max: _reduction("max"),
    np.amax: _reduction("max"),
    np.min: _reduction("min"),
    np.amin: _reduction("min"),
    np.prod: _reduction("prod"),
    np.argmax: _arg_reduction("argmax"),
    np.argmin: _arg_reduction("argmin"),
    np.cumsum: _cumulative("cumsum"),
    np.cumprod: _cumulative("cumprod"),
    # (NumPy 2.1's array-API spellings)
    **({np.cumulative_sum: _cumulative_array_api("cumsum", 0),
        np.cumulative_prod: _cumulative_array_api("cumprod", 1)}
       if hasattr(np, "cumulative_sum") else {}),
    np.var: _variance,
    np.std: lambda a, *args, **kwargs: _ops().sqrt(_variance(a, *args, **kwargs)),
    np.reshape: _reshape,
    np.transpose: lambda a, axes=None: _ops().transpose(a, axes),
    np.concatenate: lambda arrays, axis=0, **kw: _ops().concatenate(list(arrays), axis=axis),
    np.stack: _stack,
    np.broadcast_to: lambda array, shape, subok=False: _ops().broadcast_to(array, shape),
    np.dot: _dot,
    np.outer: _outer,
    np.squeeze: _squeeze,
    np.clip: _clip,
    np.where: lambda condition, x=None, y=None: _where(condition, x, y),
    np.expand_dims: _expand_dims,
    np.ravel: lambda a, order="C": _reshape(a, (-1,), order),
    np.round: _round,
    np.around: _round,
    np.astype: lambda x, dtype, /, *, copy=True, device=None: x.astype(dtype),
    np.zeros_like: _filled_like(lambda args: 0),
    np.ones_like: _filled_like(lambda args: 1),
    np.full_like: _filled_like(lambda args: args[0]),
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    **numpy_functions.FUNCTIONS,
}
# fmt: on
#: Array functions without a counterpart, and what to write instead.
FUNCTION_HINTS = {
    np.copy: "use x itself (graph values are immutable)",
    np.any: "write np.max(x != 0) (or x.max() of a bool array)",
    np.all: "write np.min(x != 0) (or x.min() of a bool array)",
}


def _where(condition, x, y):
    if x is None or y is None:
        _no("where", "with one argument gives data-dependent indices; write np.where(c, x, y)")
    return _ops().where(condition, x, y)


def array_function(func, args, kwargs):
    """What ``Expr.__array_function__`` returns: the graph NumPy's ``func`` describes."""
    build = ARRAY_FUNCTIONS.get(func)
    if build is not None:
        return build(*args, **kwargs)
    hint = FUNCTION_HINTS.get(func, "")
    raise NbyocTypeError(numpy_support.unsupported_function(numpy_support.public_name(func), hint))


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


def _refuse_equality(symbol: str, op: str):
    """``==`` and ``!=`` raise outside ``elementwise_equality``: nodes keep identity
    semantics, so that lists, dicts and sets of nodes work; the elementwise comparison is
    ``nbyoc.equal`` / ``not_equal``."""

    def compare(self, other):
        if _ELEMENTWISE_EQUALITY.get():
            return call_op(op, self, other)
        raise NbyocTypeError(
            f"graph values are not compared with {symbol}: write nbyoc.{op}(x, y) for the "
            f"elementwise comparison ({symbol} is kept from building graphs so that nodes "
            f"work in lists and dicts; use 'is' to ask whether two nodes are the same node, "
            f"and nbyoc.structural_equal to compare graphs)"
        )

    return compare


def _comparison(op: str):
    """``<``, ``<=``, ``>``, ``>=``: the elementwise comparison op (a bool tensor)."""

    def compare(self, other):
        return call_op(op, self, other)

    compare.__name__ = op
    return compare


class ArrayMethods(numpy_functions.SortingMethods):
    """The NumPy-style methods and attributes of tensor-typed graph values."""

    __slots__ = ()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return array_function(func, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        raise NbyocTypeError(
            "a graph value holds no data while the graph is being built; compile the "
            "function (nbyoc.compile) and call it with arrays to get results"
        )

    def __setitem__(self, index, value):
        # (graph values are immutable: an update is a new value, which Python's
        # ``y[i] = v`` cannot bind back to ``y``)
        raise NbyocTypeError(
            "a traced array cannot be updated in place (y[...] = v): nbyoc's graph values "
            "are immutable; write the update as a new value: y = np.where(mask, v, y) for "
            "a boolean mask, or build y from slices with np.concatenate"
        )

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

    def __len__(self) -> int:
        """The length of the first axis, like ``len(ndarray)``."""
        if not self.shape:
            raise TypeError("len() of a 0-d graph value")
        return self.shape[0]

    __eq__ = _refuse_equality("==", "equal")
    __ne__ = _refuse_equality("!=", "not_equal")
    __lt__ = _comparison("less")
    __le__ = _comparison("less_equal")
    __gt__ = _comparison("greater")
    __ge__ = _comparison("greater_equal")
    __hash__ = object.__hash__  # nodes hash by identity (defining __eq__ would unset it)

    @property
    def T(self):
        """The transpose (axes reversed), like ``ndarray.T``."""
        return _ops().transpose(self) if self.ndim > 1 else self

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
        return _reduction("sum")(self, axis=axis, keepdims=keepdims, **kwargs)

    def mean(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.mean``: ``nbyoc.mean(self, axis, keepdims)``."""
        return _reduction("mean")(self, axis=axis, keepdims=keepdims, **kwargs)

    def max(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.max``: ``nbyoc.max(self, axis, keepdims)``."""
        return _reduction("max")(self, axis=axis, keepdims=keepdims, **kwargs)

    def min(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.min``: ``nbyoc.min(self, axis, keepdims)``."""
        return _reduction("min")(self, axis=axis, keepdims=keepdims, **kwargs)

    def prod(self, axis=None, keepdims=False, **kwargs):
        """Like ``ndarray.prod``: ``nbyoc.prod(self, axis, keepdims)``."""
        return _reduction("prod")(self, axis=axis, keepdims=keepdims, **kwargs)

    def cumsum(self, axis=None, dtype=None, out=None):
        """Like ``ndarray.cumsum``: ``np.cumsum(self, axis, dtype)``."""
        return _cumulative("cumsum")(self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None):
        """Like ``ndarray.cumprod``: ``np.cumprod(self, axis, dtype)``."""
        return _cumulative("cumprod")(self, axis, dtype, out)

    def argmax(self, axis=None, keepdims=False):
        """Like ``ndarray.argmax``: ``nbyoc.argmax(self, axis, keepdims)``."""
        return _ops().argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        """Like ``ndarray.argmin``: ``nbyoc.argmin(self, axis, keepdims)``."""
        return _ops().argmin(self, axis=axis, keepdims=keepdims)

    def var(self, *args, **kwargs):
        """Like ``ndarray.var`` (``ddof`` included)."""
        return _variance(self, *args, **kwargs)

    def std(self, *args, **kwargs):
        """Like ``ndarray.std``: the square root of ``var``."""
        return _ops().sqrt(_variance(self, *args, **kwargs))

    def clip(self, min=None, max=None, **kwargs):
        """Like ``ndarray.clip``: ``np.clip(self, min, max)``."""
        return _clip(self, min, max, **kwargs)

    def squeeze(self, axis=None):
        """Like ``ndarray.squeeze``."""
        return _squeeze(self, axis)

    def ravel(self, order="C"):
        """Like ``ndarray.ravel``: the flattened value (C order)."""
        return _reshape(self, (-1,), order)

    flatten = ravel

    def round(self, decimals=0, out=None):
        """Like ``ndarray.round`` to whole numbers (halves to even)."""
        return _round(self, decimals, out)

    def dot(self, b):
        """Like ``ndarray.dot``: ``np.dot(self, b)``."""
        return _dot(self, b)

    def reshape(self, *shape, order="C"):
        """Like ``ndarray.reshape``: ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
        return _reshape(self, shape[0] if len(shape) == 1 else shape, order)

    def transpose(self, *axes):
        """Like ``ndarray.transpose``: ``x.transpose(1, 0)`` or ``x.transpose((1, 0))``."""
        axes = axes[0] if len(axes) == 1 else (axes or None)
        return _ops().transpose(self, axes)

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        """Like ``ndarray.astype``: ``nbyoc.cast(self, dtype)`` (NumPy's unsafe casting:
        floats truncate toward zero into integers); the value itself for its own dtype."""
        if casting != "unsafe" or order not in ("K", "C"):
            _no("astype", "casts as NumPy's default (casting='unsafe', C order) only")
        to = normalize_dtype(dtype)
        return self if to == self.dtype else _ops().cast(self, to)

    def __getitem__(self, index):
        """A field of a tuple value; for a tensor, NumPy-style indexing (``x[1:, ::2]``,
        ``x[..., 0]``, ``x[None]``, ``x[:, [0, 2]]``) built from slice, reshape, gather."""
        if isinstance(self.type, TensorType):
            if is_mask_of(self, index):  # x[mask]: only a reduction takes it
                return MaskedSelection(self, index)
            if refuses(index):
                raise NbyocTypeError(DATA_DEPENDENT)
            return tensor_index(self, index)
        return TupleGetItem(self, index)


def attach(cls) -> None:
    """Give ``cls`` (``Expr``) the NumPy layer's methods and attributes."""
    for base in (numpy_functions.SortingMethods, ArrayMethods):
        for name, value in vars(base).items():
            if name not in ("__slots__", "__module__", "__doc__", "__qualname__"):
                setattr(cls, name, value)
