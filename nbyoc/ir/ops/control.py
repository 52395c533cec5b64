"""Control flow: ``cond`` (one of two functions, chosen by a boolean at run time) and
``loop`` (a function applied while a condition holds, up to a number of trips), with
ONNX's ``If`` and ``Loop`` semantics. Their bodies are ``Function`` attributes: the
host runs the control flow, and ``nbyoc.compile`` partitions and compiles each body
for the same backends as the function around it.

- ``cond(pred, *operands, then_branch=f, else_branch=g)``: ``f(*operands)`` if the
  boolean scalar ``pred`` holds, else ``g(*operands)``. Both take the operands' types
  and return the same type (a tensor, or a tuple of them).
- ``loop(cond, *carried, *captured, body=f, carried=k, trips=n)``: with
  ``i = 0`` and ``c = cond``, while ``c`` holds and (``trips`` is None or
  ``i < trips``): ``c, *carried, *scans = f(i, c, *carried, *captured)``, then ``i
  += 1``. ``i`` is an int64 scalar, ``c`` a bool scalar; each carried value keeps its
  type from trip to trip; ``captured`` values are read by every trip unchanged. The
  result is a tuple: the carried values after the last trip, then each scan output
  (what the body returns after the carried values) stacked over the trips, which
  needs ``trips``: a loop that stops earlier is an error when it runs.

>>> import nbyoc, numpy as np
>>> i, c, total = nbyoc.var("i", (), "int64"), nbyoc.var("c", (), "bool"), nbyoc.var("t", (2,))
>>> step = nbyoc.function([i, c, total], (c, total + 1.0, total * 2.0))
>>> out = nbyoc.loop(nbyoc.const(np.array(True)), nbyoc.var("x", (2,)), body=step, trips=3)
>>> out.type
(Tensor[(2,), float32], Tensor[(3, 2), float32])
>>> run = nbyoc.compile(nbyoc.function([out.args[1]], out), backend="host")
>>> [a.tolist() for a in run(np.array([0.0, 1.0], np.float32))]
[[3.0, 4.0], [[0.0, 2.0], [2.0, 4.0], [4.0, 6.0]]]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ...errors import ExecutionError, NbyocTypeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op
from ..nodes import Expr, Function
from ..op import Op, describe, register_op
from ..types import TensorType, TupleType, tensor_types

_FLAG = TensorType((), "bool")
_INDEX = TensorType((), "int64")


class CompiledBody(NamedTuple):
    """A body as the host passes it to the references: the function and what runs it
    (the function compiled for the executable's backends)."""

    function: Function
    run: Callable


def _runner(body) -> tuple[Function, Callable]:
    """A body's function and what runs it: the compiled body the host gave, or the
    host's own evaluation of the function."""
    if isinstance(body, CompiledBody):
        return body
    from ...runtime.host import HostFunction  # (runtime imports ir, not the reverse)

    return body, HostFunction(body)


def _check_params(op: str, name: str, body: Function, types) -> None:
    got = [p.type for p in body.params]
    if got != list(types):
        raise NbyocTypeError(
            f"{op}: {name} takes ({describe(got)}), but is given ({describe(types)})"
        )


def body_parameter_types(op: str, operand_types) -> dict[str, list]:
    """The types each body attribute of a ``cond``, ``loop`` or ``composite`` takes, from
    its operands' types (a branch takes the operands after the predicate; a loop's body,
    the trip number and the condition, then the operands after the condition; a
    composite's body, its operands)."""
    if op == "cond":
        return {"then_branch": list(operand_types[1:]), "else_branch": list(operand_types[1:])}
    if op == "composite":  # (ops/composite.py: its body takes its operands)
        return {"body": list(operand_types)}
    return {"body": [_INDEX, _FLAG, *operand_types[1:]]}


# -- cond ------------------------------------------------------------------------------


def _cond_rule(types, attrs):
    pred, operands = types[0], types[1:]
    if pred != _FLAG:
        raise NbyocTypeError(f"cond: the predicate must be a bool scalar, got {pred!r}")
    then_branch, else_branch = attrs["then_branch"], attrs["else_branch"]
    _check_params("cond", "then_branch", then_branch, operands)
    _check_params("cond", "else_branch", else_branch, operands)
    if then_branch.ret_type != else_branch.ret_type:
        raise NbyocTypeError(
            f"cond: the branches return {then_branch.ret_type!r} and {else_branch.ret_type!r}; "
            f"both must return the same types"
        )
    return then_branch.ret_type, attrs


def _cond_reference(pred, *operands, then_branch, else_branch):
    return _runner(then_branch if bool(pred) else else_branch)[1](*operands)


register_op(Op("cond", None, _cond_rule, _cond_reference, "control",
               "``then_branch(*operands)`` if the bool scalar ``pred`` holds, else "
               "``else_branch(*operands)`` (ONNX If)",
               attrs={"then_branch": Attr("function"),
                      "else_branch": Attr("function")}))  # fmt: skip


def cond(pred: Operand, *operands: Operand, then_branch: Function, else_branch: Function) -> Expr:
    """``then_branch(*operands)`` where the bool scalar ``pred`` holds at run time, else
    ``else_branch(*operands)``; both branches take the operands' types and return the
    same type.

    >>> import nbyoc, numpy as np
    >>> x = nbyoc.var("x", (3,))
    >>> v = nbyoc.var("v", (3,))
    >>> y = nbyoc.cond(nbyoc.var("p", (), "bool"), x, then_branch=nbyoc.function([v], v * 2.0),
    ...                else_branch=nbyoc.function([v], -v))
    >>> run = nbyoc.compile(nbyoc.function([y.args[0], x], y), backend="host")
    >>> run(np.array(False), np.arange(3, dtype=np.float32)).tolist()
    [-0.0, -1.0, -2.0]
    """
    return call_op("cond", pred, *operands, then_branch=then_branch, else_branch=else_branch)


# -- loop ------------------------------------------------------------------------------


def _loop_rule(types, attrs):
    body, count, trips = attrs["body"], attrs["carried"], attrs["trips"]
    if types[0] != _FLAG:
        raise NbyocTypeError(f"loop: the condition must be a bool scalar, got {types[0]!r}")
    if not 0 <= count <= len(types) - 1:
        raise NbyocTypeError(
            f"loop: carried={count}, but the loop has {len(types) - 1} operand(s) after the "
            f"condition"
        )
    if trips is not None and trips < 0:
        raise NbyocTypeError(f"loop: trips must not be negative, got {trips}")
    carried = list(types[1 : 1 + count])
    _check_params("loop", "body", body, [_INDEX, _FLAG, *types[1:]])
    ret = body.ret_type
    fields = list(ret.fields) if isinstance(ret, TupleType) else [ret]
    if len(fields) < 1 + count or fields[0] != _FLAG or fields[1 : 1 + count] != carried:
        raise NbyocTypeError(
            f"loop: the body must return (bool scalar, {describe(carried) or 'nothing'}, "
            f"scan outputs...): the condition, then each carried value of its type, got "
            f"{ret!r}"
        )
    scans = fields[1 + count :]
    if scans and trips is None:
        raise NbyocTypeError(
            "loop: scan outputs are stacked over the trips, so the loop needs trips="
        )
    for t in scans:
        if not isinstance(t, TensorType):
            raise NbyocTypeError(f"loop: a scan output must be a tensor, got {t!r}")
    stacked = [TensorType((trips, *t.shape), t.dtype) for t in scans]
    return TupleType([*carried, *stacked]), attrs


def _loop_reference(flag, *operands, body, carried, trips):
    function, run = _runner(body)
    scan_types = tensor_types(function.ret_type)[1 + carried :]
    state, captured = list(operands[:carried]), operands[carried:]
    scans: list[tuple] = []
    flag, trip = bool(flag), 0
    while flag and (trips is None or trip < trips):
        out = run(np.array(trip, np.int64), np.array(flag), *state, *captured)
        out = out if isinstance(out, tuple) else (out,)
        flag, state = bool(out[0]), list(out[1 : 1 + carried])
        scans.append(out[1 + carried :])
        trip += 1
    if scan_types and trip < trips:
        raise ExecutionError(
            f"loop: its condition stopped it after {trip} of its {trips} trips, but its scan "
            f"outputs are {trips} long"
        )
    stacked = [np.stack([s[k] for s in scans]) if scans else np.empty((0, *t.shape), t.dtype)
               for k, t in enumerate(scan_types)]  # fmt: skip
    return (*state, *stacked)


register_op(Op("loop", None, _loop_rule, _loop_reference, "control",
               "``body`` applied while its condition holds, up to ``trips`` times, carrying "
               "``carried`` values and stacking the rest it returns (ONNX Loop)",
               attrs={"body": Attr("function"), "carried": Attr("int", 0),
                      "trips": Attr("int", None)}))  # fmt: skip


def loop(
    flag: Operand, *operands: Operand, body: Function, carried: int | None = None,
    trips: int | None = None,
) -> Expr:  # fmt: skip
    """Run ``body`` while its condition holds (from ``flag``, a bool scalar), at most
    ``trips`` times: ``body(i, c, *carried, *captured)`` returns ``(c, *carried,
    *scans)``. ``carried`` (the number of operands carried from trip to trip) defaults
    to all of them. The result is a tuple: the carried values, then each scan output
    stacked over the trips (see the module docstring).
    """
    count = len(operands) if carried is None else carried
    return call_op("loop", flag, *operands, body=body, carried=count, trips=trips)
