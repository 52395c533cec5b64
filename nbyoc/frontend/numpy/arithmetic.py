"""NumPy's elementwise functions that are graphs of nbyoc ops rather than one op:
``np.clip`` (NumPy 2's promotion of its bounds included), ``np.round``, ``np.where``,
``np.logaddexp``, ``np.diff`` and the bitwise operators of bools (``&``, ``|``, ``^``,
``~``: the logical ops), each taking NumPy's arguments.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (4,), "int8")
>>> clip(x, 0, 1.5).type, diff(x).shape, where(x > 0, x, 0).op.name
(Tensor[(4,), float64], (3,), 'where')
"""

from __future__ import annotations

import numpy as np

from ...errors import NbyocTypeError, ValueOutOfRangeError
from ...ir import ops
from ...ir.builder import weak_kind
from ...ir.dtypes import dtype_info, promote, scalar_dtype
from ...ir.nodes import Expr
from ...ir.ops.elementwise import numpy_loop
from .refusals import refuse

#: Augmented operator -> (the binary method computing it, its symbol).
AUGMENTED = {
    "__iadd__": ("__add__", "+="), "__isub__": ("__sub__", "-="),
    "__imul__": ("__mul__", "*="), "__itruediv__": ("__truediv__", "/="),
    "__ifloordiv__": ("__floordiv__", "//="), "__imod__": ("__mod__", "%="),
    "__ipow__": ("__pow__", "**="), "__imatmul__": ("__matmul__", "@="),
    "__iand__": ("__and__", "&="), "__ior__": ("__or__", "|="), "__ixor__": ("__xor__", "^="),
}  # fmt: skip


def kept_in_place(result: Expr, dtype: str, symbol: str, name: str) -> Expr:
    """``result`` of ``name <symbol> ...`` (``+=``...) cast back to ``dtype`` as NumPy's
    in-place operation casts it: with ``same_kind``, else NumPy's error.

    >>> import nbyoc
    >>> kept_in_place(nbyoc.var("y", (2,), "float64"), "float32", "+=", "y").type
    Tensor[(2,), float32]
    """
    if result.dtype == dtype:
        return result
    # (NumPy's dtypes for nbyoc's names: ml_dtypes' bfloat16 and float8 too)
    wider, kept = dtype_info(result.dtype).numpy, dtype_info(dtype).numpy
    if not np.can_cast(wider, kept, casting="same_kind"):
        raise NbyocTypeError(
            f"{name} {symbol} ... of {dtype} by {result.dtype} values: NumPy's in-place "
            f"{symbol} keeps {dtype} and cannot cast {result.dtype} to it "
            f"(casting='same_kind'); write {name} = {name} {symbol[:-1]} ... for a new "
            f"{result.dtype} value"
        )
    return ops.cast(result, dtype)


def clip(a, a_min=None, a_max=None, out=None, **kwargs):
    """np.clip: the clip op for Python number bounds, else maximum then minimum (NumPy's
    promotion with array and NumPy scalar bounds). Python numbers are weak, as in
    NumPy 2: a float bound makes an integer or bool tensor float64, an int bound a bool
    tensor int64, and an int bound that would bind every element to a value the
    tensor's dtype cannot hold raises as NumPy does (one beyond the range on the other
    side binds nothing)."""
    if out is not None or kwargs:
        refuse("clip", "takes no out= or other keywords on graph values")
    bounds = (a_min, a_max)
    strong = [b for b in bounds if b is not None and not _is_python_number(b)]
    if strong or weak_kind(a) is not None or not isinstance(a, Expr):
        result = a if a_min is None else np.maximum(a, a_min)
        return result if a_max is None else np.minimum(result, a_max)
    kind = np.dtype(a.type.dtype).kind
    if kind in "biu" and any(isinstance(b, float) for b in bounds):
        a = ops.cast(a, "float64")
    elif kind == "b" and any(b is not None and not isinstance(b, bool) for b in bounds):
        a = ops.cast(a, "int64")  # (each bound must then be an int64, as in NumPy)
        _check_int_bounds(np.dtype(np.int64), *[b for b in bounds if b is not None], both=True)
    elif kind == "b":  # bool bounds of a bool tensor: NumPy's maximum and minimum
        result = a if a_min is None else np.maximum(a, a_min)
        return result if a_max is None else np.minimum(result, a_max)
    if np.dtype(a.type.dtype).kind in "iu":
        _check_int_bounds(np.dtype(a.type.dtype), a_min, a_max)
    return ops.clip(a, *[None if b is None else float(b) for b in bounds])


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


def around(a, decimals=0, out=None):
    """np.round (np.around): to whole numbers, halves to even."""
    if decimals != 0 or out is not None:
        refuse("round", "rounds to whole numbers only on graph values (no decimals=, out=)")
    return ops.round(a)


def where(condition, x=None, y=None):
    """np.where of three arguments (with one, its indices depend on the data)."""
    if x is None or y is None:
        refuse("where", "with one argument gives data-dependent indices; write np.where(c, x, y)")
    return ops.where(condition, x, y)


def logaddexp(a, b):
    """np.logaddexp as ops: ``max(a, b) + log1p(exp(-|a - b|))`` (``a + log 2`` where
    the two are equal, so that two infinities of one sign stay infinite), in NumPy's
    loop dtype (integers in floats).

    >>> import nbyoc
    >>> logaddexp(nbyoc.var("a", (3,), "int32"), 0.5).type
    Tensor[(3,), float64]
    """
    partner = promote(*(x.dtype for x in (a, b) if isinstance(x, Expr)))
    dtypes = tuple(x.dtype if isinstance(x, Expr) else scalar_dtype(x, partner) for x in (a, b))
    dtype = numpy_loop(np.logaddexp, dtypes)[-1]
    a, b = (ops.cast(x, dtype) if isinstance(x, Expr) and x.dtype != dtype else x for x in (a, b))
    larger = ops.maximum(a, b)
    tail = ops.log1p(ops.exp(ops.negative(ops.abs(ops.subtract(a, b)))))
    return ops.where(ops.equal(a, b), ops.add(larger, float(np.log(2))), ops.add(larger, tail))


def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """np.diff: ``n`` rounds of differences of neighbours along ``axis`` (slices and a
    subtract; bools: not_equal, as NumPy), after joining ``prepend`` and ``append``."""
    if n < 0:
        refuse("diff", f"order must be non-negative but got {n}")
    if a.ndim == 0:
        refuse("diff", "diff requires input that is at least one dimensional")
    axis = axis % a.ndim
    parts = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append(None)
            continue
        if np.ndim(extra) == 0:  # a scalar: one slice of it along the axis
            shape = tuple(1 if k == axis else d for k, d in enumerate(a.shape))
            # (NumPy makes an array of it first: a Python 0 is an int64, not weak)
            value = extra if hasattr(extra, "op") else np.asarray(extra)
            extra = ops.broadcast_to(value, shape)
        parts.append(extra)
    if parts[0] is not None or parts[1] is not None:
        joined = [x for x in (parts[0], a, parts[1]) if x is not None]
        a = ops.concatenate(joined, axis=axis)
    for _ in range(n):
        length = a.shape[axis]
        head = a[(slice(None),) * axis + (slice(1, None),)]
        tail = a[(slice(None),) * axis + (slice(0, max(length - 1, 0)),)]
        a = ops.not_equal(head, tail) if a.dtype == "bool" else ops.subtract(head, tail)
    return a


#: Bitwise ufunc (and operator) -> the logical op it is on bools.
BITWISE = {"bitwise_and": ("logical_and", "&"), "bitwise_or": ("logical_or", "|"),
           "bitwise_xor": ("logical_xor", "^"), "invert": ("logical_not", "~")}  # fmt: skip


def _dtype_of(value) -> str:
    if isinstance(value, Expr):
        return value.dtype
    return np.asarray(value).dtype.name


def bitwise(name: str):
    """The builder of NumPy's ``name`` (``bitwise_and``, ..., ``invert``; the operators
    ``&``, ``|``, ``^``, ``~``) on bools: the logical op, which is what it computes
    there. Integers are refused (nbyoc has no bitwise integer ops yet).

    >>> import nbyoc
    >>> x = nbyoc.var("x", (3,))
    >>> bitwise("bitwise_and")(x > 0, x < 1).op.name, bitwise("invert")(x > 0).op.name
    ('logical_and', 'logical_not')
    """
    op, symbol = BITWISE[name]

    def build(*operands):
        dtypes = [_dtype_of(v) for v in operands]
        if all(d == "bool" for d in dtypes):
            return getattr(ops, op)(*operands)
        refuse(name, f"{symbol} of {' and '.join(dtypes)} values: nbyoc computes it for bools "
                     f"only (as {op}); it has no bitwise integer ops yet")  # fmt: skip

    build.__name__ = name
    return build
