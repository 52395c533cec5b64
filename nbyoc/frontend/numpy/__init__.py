"""The NumPy frontend: ``nbyoc.jit`` traces NumPy functions into nbyoc graphs through
the NumPy layer that this package attaches to graph values (``nbyoc.ir.Expr``) when it
is imported, as JAX's numpy attaches its array methods; ``import nbyoc`` imports it.

One job per module: ``jit`` (the decorator, tracing, the runners) and ``weak_ranges``
(call-time checks of Python ints); the layer: ``methods`` (ndarray methods and
attributes, NumPy's protocols, ``attach``), ``ufuncs``, ``functions`` (the array
functions' table) with a module per family (``reductions``, ``shapes``, ``arithmetic``,
``sorting``, ``linalg``), ``indexing`` (``x[...]``), ``masks`` (``x[mask]`` taken by a
reduction); ``support`` (``supported()``) and ``refusals`` (the errors, with the
closest names). Ops, their type rules and references stay in ``nbyoc.ir.ops``.

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
