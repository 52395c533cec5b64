"""IR types: tensors of a shape (ints and symbolic sizes) and dtype, tuples of types,
function types.

Types are immutable values: equal when their contents are equal, usable as
dict keys, printed in the text form's syntax.

>>> TensorType((10, 10), "float32")
Tensor[(10, 10), float32]
>>> TupleType([TensorType((2,), "int32"), TensorType((), "float64")])
(Tensor[(2,), int32], Tensor[(), float64])
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field

from .. import limits
from ..errors import NbyocTypeError
from .dtypes import dtype_info, normalize_dtype
from .symbols import SizeExpr, shape_symbols, size


class Type:
    """Base class of IR types."""

    __slots__ = ()


#: NumPy's limit on the number of dimensions.
MAX_NDIM = 64
#: At most this many elements, so every byte offset fits in a signed 64-bit integer
#: in generated code (a shape from a file must not overflow the C or Numba loops).
MAX_ELEMENTS = (1 << 63) // 8


def normalize_shape(shape) -> tuple[int | SizeExpr, ...]:
    """A shape as a tuple of non-negative Python ints or symbolic sizes (a name like
    ``"n"``, an expression like ``"2*n"``); an int means a 1-D shape.
    At most 64 dimensions and 2**60 elements.

    >>> normalize_shape([3, 4]), normalize_shape(5), normalize_shape(("n", 3))
    ((3, 4), (5,), (n, 3))
    """
    if shape.__class__ is tuple and all(d.__class__ is int and d >= 0 for d in shape):
        return _bounded(shape)  # already normal: the common case, kept cheap
    if isinstance(shape, (int, str)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(_dimension(d) for d in shape)
    except TypeError:
        raise NbyocTypeError(
            f"shape {shape!r} must be a tuple of non-negative ints or symbol names, "
            f"e.g. (10, 10) or ('n', 10)"
        ) from None
    if any(isinstance(d, int) and d < 0 for d in dims) or any(isinstance(d, bool) for d in shape):
        raise NbyocTypeError(f"shape {shape!r} must hold non-negative ints, e.g. (10, 10)")
    for d in dims:
        if isinstance(d, SizeExpr) and d.bounds()[1] < 0:
            raise NbyocTypeError(f"shape {shape!r}: size {d} is negative for every value")
    return _bounded(dims)


def _dimension(d):
    if isinstance(d, (str, SizeExpr)):
        return size(d)
    return operator.index(d)


def _bounded(dims: tuple) -> tuple:
    if len(dims) > MAX_NDIM:
        raise NbyocTypeError(f"a shape has at most {MAX_NDIM} dimensions, got {len(dims)}")
    known = [d for d in dims if d.__class__ is int]
    if any(d >= MAX_ELEMENTS for d in known) or math.prod(known) >= MAX_ELEMENTS:
        raise NbyocTypeError(
            f"shape {dims} is larger than nbyoc can address (under 2**60 elements and "
            f"2**60 along any axis)"
        )
    return dims


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    """A tensor of ``shape`` (a tuple of ints and symbolic sizes, see ``ir.symbols``)
    and ``dtype`` (canonical name). Two types are equal when their dimensions are
    provably equal: the same ints, the same canonical expressions.

    >>> TensorType(("n", 3)), TensorType(("n", 3)) == TensorType(("m", 3))
    (Tensor[(n, 3), float32], False)
    """

    shape: tuple
    dtype: str
    #: The symbols its dimensions depend on (empty for a static shape).
    symbols: frozenset = field(default=frozenset(), compare=False, repr=False)

    def __init__(self, shape, dtype="float32"):
        shape = normalize_shape(shape)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", normalize_dtype(dtype))
        static = all(d.__class__ is int for d in shape)
        object.__setattr__(self, "symbols", frozenset() if static else shape_symbols(shape))

    @property
    def is_static(self) -> bool:
        """True when every dimension is an int."""
        return not self.symbols

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return dtype_info(self.dtype).itemsize

    def __repr__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        if len(self.shape) == 1:
            dims += ","
        return f"Tensor[({dims}), {self.dtype}]"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """The type of a tuple value: one type per field."""

    fields: tuple[Type, ...]
    #: How deeply tuples nest in this type (1: fields are tensors). Bounded by the limit
    #: ``nesting``, so that printing, serialising and compiling, which recurse per
    #: level, never exhaust Python's recursion limit.
    depth: int = field(default=1, compare=False, repr=False)

    def __init__(self, fields):
        fields = tuple(fields)
        if not all(isinstance(f, Type) for f in fields):
            raise NbyocTypeError(f"tuple fields must be types, got {fields!r}")
        depth = 1 + max((f.depth for f in fields if isinstance(f, TupleType)), default=0)
        limits.check("nesting", depth, "a tuple type")
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "depth", depth)

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self.fields))
        if len(self.fields) == 1:
            inner += ","
        return f"({inner})"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class FuncType(Type):
    """The type of a function: parameter types and the result type."""

    params: tuple[TensorType, ...]
    ret: Type

    def __init__(self, params, ret):
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "ret", ret)

    def __repr__(self) -> str:
        return f"fn ({', '.join(map(repr, self.params))}) -> {self.ret!r}"

    __str__ = __repr__


def tensor_types(t: Type) -> list[TensorType]:
    """The tensors of a (possibly nested) type, flattened left to right.

    >>> tensor_types(TupleType([TensorType((1,)), TupleType([TensorType(())])]))
    [Tensor[(1,), float32], Tensor[(), float32]]
    """
    if isinstance(t, TupleType):
        return [leaf for field in t.fields for leaf in tensor_types(field)]
    return [t]
