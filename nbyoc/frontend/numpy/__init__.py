"""The NumPy frontend: ``nbyoc.jit`` traces NumPy functions into nbyoc graphs, through
the NumPy layer this package attaches to graph values (``nbyoc.ir.Expr``) when it is
imported, as JAX's numpy attaches its array methods: NumPy's ufuncs, array functions,
ndarray methods and attributes, and indexing. ``import nbyoc`` imports it.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (2, 3))
>>> np.exp(x).op.name, x.T.shape, x[:, 1:].shape
('exp', (3, 2), (2, 2))
"""

from ...ir.nodes import Expr
from .jit import JitFunction, jit
from .methods import attach
from .support import supported

attach(Expr)

__all__ = ["JitFunction", "jit", "supported"]
