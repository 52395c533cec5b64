"""NumPy's products and norms on graph values: ``np.dot``, ``np.outer``, ``np.einsum``
(nbyoc's contraction planner, ``nbyoc.ir.einsum``), ``np.linalg.norm`` and NumPy 2's
``vector_norm``, ``matrix_norm`` and ``svdvals``, each taking NumPy's arguments.

>>> import nbyoc
>>> a, b = nbyoc.var("a", (3,)), nbyoc.var("b", (4,))
>>> outer(a, b).shape, einsum("i,i", a, a).shape, vector_norm(outer(a, b), axis=(0, 1)).shape
((3, 4), (), ())
"""

from __future__ import annotations

import numpy as np

from ...ir import ops
from ...ir.einsum import einsum as contract
from ...ir.nodes import Expr
from ...ir.ops.linalg import norm as nbyoc_norm
from .refusals import refuse


def dot(a, b, out=None):
    """np.dot of 1-D and 2-D operands: ``a @ b``."""
    ndims = [x.ndim if isinstance(x, Expr) else np.ndim(x) for x in (a, b)]
    if out is not None or max(ndims) > 2:
        refuse("dot", "is nbyoc.matmul (a @ b) only for 1-D and 2-D operands without out=")
    return ops.matmul(a, b)


def outer(a, b, out=None):
    """np.outer: every element of ``a`` (flattened) times every element of ``b``."""
    if out is not None:
        refuse("outer", "takes no out= on graph values")
    return ops.reshape(a, (-1, 1)) * ops.reshape(b, (1, -1))


def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    """np.einsum, without ``out=`` and ``dtype=``."""
    if out is not None or dtype is not None:
        refuse("einsum", "takes no out= or dtype= on graph values; cast the result instead")
    return contract(*operands)


def norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: ``nbyoc.norm``."""
    return nbyoc_norm(x, ord, axis, keepdims)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """np.linalg.vector_norm: over the flattened x without an axis; a tuple of axes is
    one vector of all of them (moved last and flattened)."""
    if axis is None:
        out = norm(ops.reshape(x, (-1,)), ord, 0)
        return ops.reshape(out, (1,) * x.ndim) if keepdims else out
    axes = (axis,) if isinstance(axis, int) else tuple(a % x.ndim for a in axis)
    others = [k for k in range(x.ndim) if k not in axes]
    moved = ops.transpose(x, (*others, *axes))
    flat = ops.reshape(moved, (*(x.shape[k] for k in others), -1))
    out = norm(flat, ord, -1)
    if keepdims:
        out = ops.reshape(out, tuple(1 if k in axes else d for k, d in enumerate(x.shape)))
    return out


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """np.linalg.matrix_norm: over the last two axes."""
    return norm(x, ord, (-2, -1), keepdims)


def svdvals(x, /):
    """np.linalg.svdvals: ``nbyoc.svdvals``."""
    return ops.svdvals(x)
