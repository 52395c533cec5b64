"""``x[mask]`` while tracing: a selection whose size only the data tells, taken only by a
reduction over all of it, which keeps its shape: ``x[mask].sum()`` is
``np.where(mask, x, 0).sum()``, ``.mean()`` that over ``mask.sum()``, ``.max()`` the max
of ``np.where(mask, x, lowest)``, ``.argmax()`` that position counted among the selected.

Results follow NumPy's, dtypes included, and so does an empty selection: a sum is 0, a
product 1, a mean, variance and deviation NaN; a max, min, argmax or argmin raises
NumPy's ``ValueError`` ("zero-size array to reduction operation maximum which has no
identity": ``nbyoc.errors.EmptyReductionError``) when the compiled function runs. Any
other use of the selection (its shape, arithmetic on it) is refused with the error that
says why and what to write.

>>> import numpy as np, nbyoc
>>> positive_mean = nbyoc.jit(lambda x: x[x > 0].mean())
>>> float(positive_mean(np.array([-1.0, 2.0, 4.0], np.float32)))
3.0
"""

from __future__ import annotations

import numpy as np

from ...errors import NbyocTypeError
from ...ir import ops
from ...ir.builder import call_op
from ...ir.dtypes import dtype_info
from ...ir.types import TensorType
from .arithmetic import AUGMENTED, kept_in_place

DATA_DEPENDENT = (
    "x[mask] with a boolean mask has as many elements as the mask has True values, a "
    "shape that depends on the data, and nbyoc's shapes are known when compiling; nbyoc "
    "takes it only into a reduction over all of it (x[mask].sum(), .mean(), .max(), "
    ".min(), .prod(), .argmax(), .argmin(), .var(), .std()); otherwise keep the shape "
    "and mask the values: np.where(mask, x, 0)"
)
#: NumPy's names of the reductions without an identity, as its error gives them.
_NO_IDENTITY = {"max": "maximum", "min": "minimum", "argmax": "argmax", "argmin": "argmin"}


def is_mask_of(x, index) -> bool:
    """Whether ``x[index]`` selects by a boolean graph value of ``x``'s own shape."""
    t = getattr(index, "type", None)
    return isinstance(t, TensorType) and t.dtype == "bool" and t.shape == x.type.shape


def refuses(index) -> bool:
    """Whether ``index`` holds a boolean graph value (which no other indexing takes)."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(
        isinstance(getattr(p, "type", None), TensorType) and p.type.dtype == "bool" for p in parts
    )


class MaskedSelection:
    """``x[mask]``, held as ``x`` and ``mask`` until a reduction takes it."""

    __slots__ = ("mask", "x")

    def __init__(self, x, mask):
        self.x, self.mask = x, mask

    def __getattr__(self, name):
        raise NbyocTypeError(f"{DATA_DEPENDENT} (asked for .{name})")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "reduce" and ufunc in _UFUNC_REDUCTIONS and len(inputs) == 1:
            return getattr(self, _UFUNC_REDUCTIONS[ufunc])(**kwargs)
        if method == "__call__" and ufunc.nout == 1 and not kwargs:  # np.log(x[m])
            return MaskedSelection(ufunc(*self._operands(inputs)), self.mask)
        raise NbyocTypeError(f"{DATA_DEPENDENT} (asked for numpy.{ufunc.__name__})")

    def _operands(self, operands) -> list:
        """``operands`` of an elementwise op with this selection: selections by the same
        mask as their full values (the op runs on every element; the mask picks later),
        scalars as they are; anything else has a shape the selection's count must match."""
        out = []
        for operand in operands:
            if isinstance(operand, MaskedSelection):
                if operand.mask is not self.mask:
                    raise NbyocTypeError(
                        f"{DATA_DEPENDENT} (asked for arithmetic on selections by two masks)"
                    )
                operand = operand.x
            elif np.ndim(operand) != 0:
                raise NbyocTypeError(
                    f"{DATA_DEPENDENT} (asked for arithmetic with a value of shape "
                    f"{np.shape(operand)}; only scalars and selections by the same mask "
                    f"combine with it)"
                )
            out.append(operand)
        return out

    def __array_function__(self, func, types, args, kwargs):
        reduction = _FUNCTIONS.get(func)
        if reduction is None or args[0] is not self:
            raise NbyocTypeError(f"{DATA_DEPENDENT} (asked for numpy.{func.__name__})")
        return getattr(self, reduction)(*args[1:], **kwargs)

    def _refused(self, *args, **kwargs):
        raise NbyocTypeError(f"{DATA_DEPENDENT} (asked for a shape-dependent use of it)")

    __matmul__ = __rmatmul__ = __getitem__ = _refused

    def __len__(self):
        raise NbyocTypeError(f"{DATA_DEPENDENT} (asked for its length: mask.sum() counts it)")

    def __bool__(self):
        raise NbyocTypeError(f"{DATA_DEPENDENT} (asked for its truth value)")

    # -- the reductions ----------------------------------------------------------------

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        _whole("sum", axis, out, keepdims, dtype)
        return _where(self.mask, self.x, 0).sum()

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        _whole("prod", axis, out, keepdims, dtype)
        return _where(self.mask, self.x, 1).prod()

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        _whole("mean", axis, out, keepdims, dtype)
        result = _mean_dtype(self.x.dtype)
        total = _where(self.mask, self.x.astype(result), 0).sum()
        return (total / self._count().astype(result)).astype(result)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        _whole("var", axis, out, keepdims, dtype)
        result = _mean_dtype(self.x.dtype)
        x = self.x.astype(result)
        count = self._count().astype(result)
        mean = _where(self.mask, x, 0).sum() / count
        squares = _where(self.mask, (x - mean) * (x - mean), 0).sum()
        return (squares / (count - float(ddof))).astype(result)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return np.sqrt(self.var(axis, dtype, out, ddof, keepdims))

    def max(self, axis=None, out=None, keepdims=False):
        _whole("max", axis, out, keepdims)
        return self._required("max", self._largest())

    def min(self, axis=None, out=None, keepdims=False):
        _whole("min", axis, out, keepdims)
        return self._required("min", self._smallest())

    def _largest(self):
        return _where(self.mask, self.x, _lowest(self.x.dtype)).max()

    def _smallest(self):
        return _where(self.mask, self.x, _highest(self.x.dtype)).min()

    def argmax(self, axis=None, out=None, keepdims=False):
        _whole("argmax", axis, out, keepdims)
        return self._required("argmax", self._first(self._largest()))

    def argmin(self, axis=None, out=None, keepdims=False):
        _whole("argmin", axis, out, keepdims)
        return self._required("argmin", self._first(self._smallest()))

    def _first(self, extreme):
        """The position among the selected of the first selected element equal to
        ``extreme`` (NaN equal to NaN: NumPy's argmax takes the first NaN). Not the arg
        extreme of the filled array: a fill value tying with the selected ones, before
        them, would win."""
        hit = self.x == extreme
        if dtype_info(self.x.dtype).is_float:
            hit = np.logical_or(hit, np.logical_and(np.isnan(self.x), np.isnan(extreme)))
        flat = np.logical_and(self.mask, hit).reshape(-1)
        return self._position(flat.argmax())

    def _count(self):
        return self.mask.sum()

    def _position(self, index):
        """The index into ``x`` (flat) counted among the selected: how many True before it.
        (A NaN among the selected wins, as in NumPy: where() keeps it, and argmax takes
        the first NaN.)"""
        before = np.cumsum(self.mask.reshape(-1).astype("int64")) - 1
        return before[index]

    def _required(self, reduction: str, value):
        return call_op("require_nonempty", self._count(), value,
                       reduction=_NO_IDENTITY[reduction])  # fmt: skip


def _elementwise(method: str, reflected: bool = False):
    """The selection's ``method`` (``__add__``...): the op on the full values, the mask
    kept (``x[m] * 2`` is ``(x * 2)[m]``)."""

    def apply(self, *others):
        x = getattr(self.x, method)(*self._operands(others))
        if x is NotImplemented:
            raise NbyocTypeError(f"{DATA_DEPENDENT} (asked for {method} with {others!r})")
        return MaskedSelection(x, self.mask)

    apply.__name__ = method
    return apply


def _in_place(binary: str, symbol: str):
    """``x[m] += v`` (Python's middle step): the new selected values, kept in the
    selection's dtype as NumPy's in-place op keeps them (``arithmetic.kept_in_place``)."""

    def apply(self, other):
        result = getattr(self, binary)(other)
        return MaskedSelection(kept_in_place(result.x, self.x.dtype, symbol, "y[mask]"), self.mask)

    apply.__name__ = f"__i{binary[2:]}"
    return apply


for _method in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__",
    "__rpow__", "__neg__", "__abs__", "__invert__", "__and__", "__or__", "__xor__",
    "__lt__", "__le__", "__gt__", "__ge__",
):  # fmt: skip
    setattr(MaskedSelection, _method, _elementwise(_method))
for _method, (_binary, _symbol) in AUGMENTED.items():
    setattr(MaskedSelection, _method, _in_place(_binary, _symbol))


def _whole(name: str, axis, out, keepdims, dtype=None) -> None:
    if axis is not None or out is not None or keepdims or dtype is not None:
        raise NbyocTypeError(
            f"x[mask].{name}() reduces the whole selection only (no axis, dtype, out or "
            f"keepdims: the selection is 1-D, of a size the data tells); for a reduction per "
            f"axis write np.where(mask, x, identity).{name}(axis=...)"
        )


def _where(mask, x, fill):
    return ops.where(mask, x, np.asarray(fill, dtype=x.dtype))


def _mean_dtype(dtype: str) -> str:
    """The dtype of ``np.mean`` of an array of ``dtype`` (float64 for integers and bool)."""
    return np.mean(np.zeros(1, dtype_info(dtype).numpy)).dtype.name


def _lowest(dtype: str):
    info = dtype_info(dtype)
    return False if dtype == "bool" else -np.inf if info.is_float else info.min


def _highest(dtype: str):
    info = dtype_info(dtype)
    return True if dtype == "bool" else np.inf if info.is_float else info.max


_UFUNC_REDUCTIONS = {np.add: "sum", np.multiply: "prod", np.maximum: "max", np.minimum: "min"}
_FUNCTIONS = {
    np.sum: "sum", np.prod: "prod", np.mean: "mean", np.var: "var", np.std: "std",
    np.max: "max", np.amax: "max", np.min: "min", np.amin: "min", np.argmax: "argmax",
    np.argmin: "argmin",
}  # fmt: skip
