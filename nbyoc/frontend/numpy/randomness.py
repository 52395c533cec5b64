"""NumPy's random numbers while ``nbyoc.jit`` traces: refused, since a draw made while
tracing would be made once and baked into the graph as a constant, so that every call
returned the same "random" numbers, where NumPy draws new ones each call.

While a trace runs in a thread, ``numpy.random``'s module functions (the global
generator's ``normal``, ``rand``, ``choice``... and ``default_rng``) raise in that
thread; other threads see NumPy's own functions. A ``Generator`` made outside the
function and used inside it cannot be seen this way (its methods are C methods of a
type nbyoc does not patch): the docs say to pass random numbers in as arguments.

>>> import numpy as np
>>> with refusing_random_draws():
...     np.random.normal(0.0, 1.0, 3)
Traceback (most recent call last):
    ...
nbyoc.errors.NbyocTypeError: numpy.random.normal inside nbyoc.jit would draw once, ...
>>> np.random.normal(0.0, 1.0, 3).shape
(3,)
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import types

import numpy as np

from ...errors import NbyocTypeError

#: Whether the current thread (context) is tracing.
_TRACING: contextvars.ContextVar[bool] = contextvars.ContextVar("nbyoc_tracing", default=False)
_LOCK = threading.Lock()
#: Module functions that neither draw nor make a generator.
KEPT = ("get_state", "set_state", "seed", "get_bit_generator", "set_bit_generator", "test")
#: Traces running now (in any thread), and NumPy's functions while they run.
_state: dict = {"traces": 0, "saved": {}}


def _drawing_functions() -> list[str]:
    """The names of ``numpy.random``'s module functions that draw or make a generator."""
    names = []
    for name in dir(np.random):
        value = getattr(np.random, name)
        if name.startswith("_") or name in KEPT or isinstance(value, type):
            continue
        if callable(value) and not isinstance(value, types.ModuleType):
            names.append(name)
    return names


def _refusing(name: str, original):
    def draw(*args, **kwargs):
        if not _TRACING.get():
            return original(*args, **kwargs)
        raise NbyocTypeError(
            f"numpy.random.{name} inside nbyoc.jit would draw once, while the function "
            f"is traced, and every call would return those same numbers; draw them "
            f"outside and pass them in as an argument"
        )

    draw.__name__ = draw.__qualname__ = name
    draw.__doc__ = original.__doc__
    return draw


@contextlib.contextmanager
def refusing_random_draws():
    """While the block runs, ``numpy.random``'s draws raise in this thread (see the
    module docstring); NumPy's functions are put back when the last trace ends."""
    with _LOCK:
        if _state["traces"] == 0:
            for name in _drawing_functions():
                original = getattr(np.random, name)
                _state["saved"][name] = original
                setattr(np.random, name, _refusing(name, original))
        _state["traces"] += 1
    token = _TRACING.set(True)
    try:
        yield
    finally:
        _TRACING.reset(token)
        with _LOCK:
            _state["traces"] -= 1
            if _state["traces"] == 0:
                for name, original in _state["saved"].items():
                    setattr(np.random, name, original)
                _state["saved"].clear()
