"""The random graphs of ``nbyoc.testing.strategies`` (re-exported for the tests), and
``numpy_function``, which turns a graph into the NumPy function a user would write
for it, for ``nbyoc.jit``.
"""

from __future__ import annotations

import inspect

import numpy as np

import nbyoc
from nbyoc.testing.strategies import (
    ELEMENTWISE_BINARY,
    ELEMENTWISE_UNARY,
    assert_same_results,
    graphs,
    random_inputs,
)

__all__ = [
    "ELEMENTWISE_BINARY",
    "ELEMENTWISE_UNARY",
    "Unspellable",
    "assert_same_results",
    "graphs",
    "numpy_function",
    "random_inputs",
]


class Unspellable(Exception):
    """The graph holds an op NumPy has no function for (``numpy_function``)."""


def _take(x, indices, axis):
    return x[(slice(None),) * axis + (indices,)]


#: How a user writes each op in NumPy, taking the op's operands and attributes.
NUMPY_SPELLING = {
    **{name: getattr(np, name) for name in ELEMENTWISE_BINARY + ELEMENTWISE_UNARY
       if name not in ("sigmoid", "relu", "erf")},
    **{name: getattr(np, name) for name in ("sum", "mean", "max", "min", "prod", "argmax",
                                            "argmin")},
    "cast": lambda x, to: x.astype(to),
    "where": np.where,
    "clip": lambda x, min, max: np.clip(x, min, max),
    "reshape": lambda x, newshape: np.reshape(x, newshape),
    "transpose": lambda x, axes: np.transpose(x, axes),
    "concatenate": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "slice": lambda x, starts, ends, axes, steps: x[
        nbyoc.ir.ops.index.python_slices({"starts": starts, "ends": ends, "steps": steps})],
    "gather": _take,
}  # fmt: skip


def _as_written(node) -> dict:
    """A call's attributes as a user writes them: clip's bounds of an integer tensor as
    ints where they are whole numbers (the IR keeps every bound as a float)."""
    attrs = dict(node.attrs)
    if node.op.name == "clip" and np.dtype(node.args[0].type.dtype).kind in "iu":
        for key in ("min", "max"):
            if attrs[key] is not None and float(attrs[key]).is_integer():
                attrs[key] = int(attrs[key])
    return attrs


def numpy_function(func):
    """The NumPy function of ``func``'s parameters that a user would write for it (for
    ``nbyoc.jit`` to trace); raises ``Unspellable`` if an op has no NumPy function
    (softmax, sigmoid, ...)."""
    from nbyoc.ir.nodes import Call, Constant, Tuple, Var

    nodes = nbyoc.ir.post_order([func.body])
    for node in nodes:
        if isinstance(node, Call) and node.op.name not in NUMPY_SPELLING:
            raise Unspellable(node.op.name)

    def run(*arrays):
        values = {id(p): a for p, a in zip(func.params, arrays)}
        for node in nodes:
            if isinstance(node, Constant):
                values[id(node)] = np.asarray(node.data)
            elif isinstance(node, Call):
                operands = [values[id(a)] for a in node.args]
                values[id(node)] = NUMPY_SPELLING[node.op.name](*operands, **_as_written(node))
            elif isinstance(node, Tuple):
                values[id(node)] = tuple(values[id(f)] for f in node.fields)
            elif not isinstance(node, Var):
                raise Unspellable(type(node).__name__)
        return values[id(func.body)]

    run.__signature__ = inspect.Signature(
        [inspect.Parameter(f"p{k}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for k in range(len(func.params))]
    )  # fmt: skip
    return run
