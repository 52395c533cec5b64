"""NumPy's augmented assignments (``y += v``, ``y *= v`` ...) on graph values, while
``nbyoc.jit`` traces: a new value that Python binds to the name, in the dtype NumPy's
in-place operation keeps, with NumPy's casting rule (``same_kind``: an int array
``+= 1.5`` raises, as NumPy's does); on a parameter of the traced function, refused,
since NumPy would change the caller's array, which a jitted function does not.

Another name bound to the same array before the update (``z = y; y += 1``) keeps the
old value here, where NumPy's would see the new one: the one difference left, which
in-place updates of computed arrays may show (see the docs' jit tutorial).

>>> import numpy as np, nbyoc
>>> y = nbyoc.var("y", (3,), "int32") * 2
>>> augmented("__add__", "+=")(y, 1).type
Tensor[(3,), int32]
>>> augmented("__add__", "+=")(y, 1.5)
Traceback (most recent call last):
    ...
nbyoc.errors.NbyocTypeError: y += ... of int32 by float64 values: NumPy's in-place ...
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from ...errors import NbyocTypeError
from ...ir import ops
from ...ir.dtypes import dtype_info
from ...ir.nodes import Var

#: Whether the current trace's parameters are a user's arrays (``nbyoc.jit`` runs).
TRACING_PARAMETERS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nbyoc_tracing_parameters", default=False
)


@contextlib.contextmanager
def tracing_parameters():
    """Within it, the traced function's parameters are a caller's arrays (``nbyoc.jit``
    traces in it): updating one in place is refused."""
    token = TRACING_PARAMETERS.set(True)
    try:
        yield
    finally:
        TRACING_PARAMETERS.reset(token)


#: Augmented operator -> (the binary method computing it, its symbol).
AUGMENTED = {
    "__iadd__": ("__add__", "+="), "__isub__": ("__sub__", "-="),
    "__imul__": ("__mul__", "*="), "__itruediv__": ("__truediv__", "/="),
    "__ifloordiv__": ("__floordiv__", "//="), "__imod__": ("__mod__", "%="),
    "__ipow__": ("__pow__", "**="), "__imatmul__": ("__matmul__", "@="),
    "__iand__": ("__and__", "&="), "__ior__": ("__or__", "|="), "__ixor__": ("__xor__", "^="),
}  # fmt: skip


def augmented(binary: str, symbol: str):
    """The method for ``y <symbol> v``: ``y.<binary>(v)`` kept in ``y``'s dtype as NumPy's
    in-place operation keeps it."""

    def update(self, other):
        if TRACING_PARAMETERS.get() and isinstance(self, Var):
            raise NbyocTypeError(
                f"{self.name_hint} {symbol} ... updates the argument {self.name_hint!r} in "
                f"place: NumPy would change the caller's array, and a jitted function does "
                f"not; write {self.name_hint} = {self.name_hint} {symbol[:-1]} ... (a new "
                f"value) instead"
            )
        result = getattr(self, binary)(other)
        if result is NotImplemented or result.dtype == self.dtype:
            return result
        # (NumPy's dtypes for nbyoc's names: ml_dtypes' bfloat16 and float8 too)
        wider, kept = dtype_info(result.dtype).numpy, dtype_info(self.dtype).numpy
        if not np.can_cast(wider, kept, casting="same_kind"):
            name = getattr(self, "name_hint", None) or "y"
            raise NbyocTypeError(
                f"{name} {symbol} ... of {self.dtype} by {result.dtype} values: NumPy's "
                f"in-place {symbol} keeps {self.dtype} and cannot cast {result.dtype} to it "
                f"(casting='same_kind'); write {name} = {name} {symbol[:-1]} ... for a new "
                f"{result.dtype} value"
            )
        return ops.cast(result, self.dtype)

    update.__name__ = f"__i{binary[2:]}"
    update.__doc__ = f"``y {symbol} v``: NumPy's in-place {symbol} as a new value."
    return update
