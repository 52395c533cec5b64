"""``nbyoc.compile``: from a function to something you can call.

>>> import numpy as np, nbyoc
>>> a, b = nbyoc.var("a", (2, 2)), nbyoc.var("b", (2, 2))
>>> fn = nbyoc.compile(nbyoc.function([a, b], a @ b + 1.0), backend="host")
>>> fn(np.eye(2, dtype=np.float32), np.full((2, 2), 3, np.float32))
array([[4., 4.],
       [4., 4.]], dtype=float32)
"""

from __future__ import annotations

from .errors import NbyocError, UnknownBackendError
from .ir.nodes import Function, IRModule
from .ir.verify import verify
from .runtime.executable import Executable

#: Backends ``compile`` accepts. The host runs everything with NumPy.
BACKENDS = ("host",)


def compile(func: Function | IRModule, backend: str = "host") -> Executable:
    """Compile ``func`` (or a module with a ``main``) for ``backend``.

    Calling the result checks argument count, shapes and dtypes, runs the graph
    and returns an ndarray (or a tuple of them for several outputs).
    """
    if isinstance(func, Function):
        module = IRModule({"main": verify(func)})
    elif isinstance(func, IRModule):
        module = verify(func)
    else:
        raise NbyocError(
            f"compile() takes an nbyoc Function or IRModule, got {type(func).__name__}"
        )
    if backend not in BACKENDS:
        raise UnknownBackendError(
            f"unknown backend {backend!r}; registered backends: {', '.join(BACKENDS)}"
        )
    return Executable(module, backend)
