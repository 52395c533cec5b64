"""Short call paths of a fixed number of positional parameters, made from a template.

A wrapper taking ``*arrays, **named`` costs more per call than one whose parameters
are spelled out: on the 4-input 10x10 llvm call (about 1.1 us), the ``type(x) is
ndarray`` checks and the keyword check cost 0.18 us written over ``*arrays`` and
nothing measurable written over ``x0, x1, x2, x3`` (side by side here: 1.35 against
1.15 us, the unchecked ``*arrays`` form 1.18 us). So a backend's short path is
compiled from a template for its own arity. Each parameter defaults to ``MISSING``
and the template ends in ``*rest, **named``, so a call with too few or too many
arguments, or with keyword arguments, still reaches the wrapper, whose careful path
(``given``) raises nbyoc's own error for it rather than Python's ``TypeError``.

>>> f = fixed_arity(2, "def f({params}):\\n    return given(({args}), rest), named", {})
>>> f(1, 2), f(1), f(1, 2, 3), f(1, y=2)
(((1, 2), {}), ((1,), {}), ((1, 2, 3), {}), ((1,), {'y': 2}))
"""

from __future__ import annotations

from collections.abc import Callable


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


#: The default of every parameter of a fixed-arity wrapper: "not passed".
MISSING = _Missing()


def given(args: tuple, rest: tuple) -> tuple:
    """The positional arguments a caller passed to a ``fixed_arity`` wrapper: ``args``
    without the unpassed ones at its end, then ``rest``."""
    n = len(args)
    while n and args[n - 1] is MISSING:
        n -= 1
    return (*args[:n], *rest)


def fixed_arity(n: int, template: str, namespace: dict) -> Callable:
    """The function ``template`` defines (its only definition), with ``{params}`` replaced
    by ``x0=MISSING, ..., x{n-1}=MISSING, *rest, **named``, ``{args}`` by ``x0, ...,
    x{n-1},`` (empty for n = 0: ``({args})`` is the tuple of them) and ``{exact}`` by
    ``type(x0) is ndarray and ...`` (``True`` for n = 0). Names it uses come from
    ``namespace`` (``ndarray``, ``MISSING`` and ``given`` are added)."""
    names = [f"x{k}" for k in range(n)]
    source = template.format(
        params=", ".join([f"{x}=MISSING" for x in names] + ["*rest", "**named"]),
        args="".join(f"{x}, " for x in names),
        exact=" and ".join(f"type({x}) is ndarray" for x in names) or "True",
    )
    import numpy as np

    scope = {**namespace, "ndarray": np.ndarray, "MISSING": MISSING, "given": given}
    before = set(scope)
    exec(compile(source, f"<nbyoc fixed-arity wrapper of {n}>", "exec"), scope)
    (defined,) = set(scope) - before - {"__builtins__"}
    return scope[defined]
