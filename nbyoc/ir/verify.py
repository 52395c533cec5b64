"""``verify``: check that a function or module is well formed.

Node constructors already type-check locally; ``verify`` checks what only the
whole graph shows, and re-checks every type so that a pass which built nodes
by unusual means cannot slip a wrong one through:

- parameters are distinct, and every variable the body reads is a parameter;
- every node's type (and normalised attributes) is what its type rule gives;
- calls to module functions name a function of the module with that type
  (checked when verifying the module: a lone function cannot know its callees);
- no variable is a parameter of two functions of one module;
- module functions do not call each other in a cycle.

>>> import nbyoc
>>> x, y = nbyoc.var("x", (2,)), nbyoc.var("y", (2,))
>>> verify(nbyoc.ir.Function([x], x + y))
Traceback (most recent call last):
    ...
nbyoc.errors.WellFormednessError: function: variable %y is used but is not a parameter; ...
"""

from __future__ import annotations

from typing import TypeVar

from ..errors import NbyocError, WellFormednessError
from .nodes import Call, Constant, Function, GlobalVar, IRModule, Tuple, TupleGetItem, Var
from .op import infer_call
from .symbols import collecting
from .traversal import post_order
from .types import FuncType, TensorType, TupleType

#: What ``verify`` returns: the node it was given.
Verified = TypeVar("Verified")


def verify(node: Verified, what: str = "function") -> Verified:
    """Raise ``WellFormednessError`` if ``node`` (Function or IRModule) is malformed;
    return it unchanged otherwise, so calls can be chained."""
    if isinstance(node, IRModule):
        owner: dict[Var, str] = {}
        for name, func in node.functions.items():
            _verify_function(func, f"function @{name}", node)
            for p in func.params:
                if p in owner:
                    raise WellFormednessError(
                        f"variable %{p.name_hint} is a parameter of both @{owner[p]} and "
                        f"@{name}; give each function its own Vars"
                    )
                owner[p] = name
        _check_no_call_cycle(node)
        return node
    if isinstance(node, Function):
        _verify_function(node, what, None)
        return node
    if callable(getattr(node, "verify", None)):  # e.g. transform.Regions checks itself
        return node.verify()
    raise WellFormednessError(f"verify() takes a Function or an IRModule, got {node!r}")


def _verify_function(func: Function, where: str, module: IRModule | None) -> None:
    params = set(func.params)
    if len(params) != len(func.params):
        raise WellFormednessError(f"{where}: a parameter is listed twice")
    if func.type != FuncType([p.type for p in func.params], func.body.type):
        raise WellFormednessError(f"{where}: its type does not match its parameters and body")
    for node in post_order([func.body]):
        if isinstance(node, Var):
            if node not in params:
                raise WellFormednessError(
                    f"{where}: variable %{node.name_hint} is used but is not a parameter; "
                    f"add it to the function's parameters"
                )
            continue
        expected = _expected_type(node, where, module)
        if expected != node.type:
            raise WellFormednessError(
                f"{where}: {node!r} claims type {node.type!r}, but its operands give {expected!r}"
            )


def _expected_type(node, where: str, module: IRModule | None):
    if isinstance(node, Constant):
        return TensorType(node.data.shape, node.data.dtype)
    if isinstance(node, Tuple):
        return TupleType(f.type for f in node.fields)
    if isinstance(node, TupleGetItem):
        return node.tuple_value.type.fields[node.index]
    if isinstance(node, Call) and isinstance(node.op, GlobalVar):
        return _global_call_type(node, where, module)
    if isinstance(node, Call):
        try:
            with collecting() as assumes:
                result, attrs = infer_call(
                    node.op, tuple(a.type for a in node.args), dict(node.attrs)
                )
        except NbyocError as e:
            raise WellFormednessError(f"{where}: {node!r} no longer type-checks: {e}") from e
        if attrs != dict(node.attrs):
            raise WellFormednessError(f"{where}: {node!r} has attributes not in normal form")
        if tuple(assumes) != node.assumes:
            raise WellFormednessError(
                f"{where}: {node!r} records constraints {node.assumes} on its sizes, "
                f"but its type rule needs {tuple(assumes)}"
            )
        return result
    raise WellFormednessError(f"{where}: unknown node {node!r}")


def _global_call_type(node: Call, where: str, module: IRModule | None):
    name = node.op.name_hint
    if module is not None and name not in module:
        raise WellFormednessError(
            f"{where}: calls @{name}, which is not a function of the module; add it to the IRModule"
        )
    if module is not None and module[name].type != node.op.type:
        raise WellFormednessError(
            f"{where}: calls @{name} as {node.op.type!r}, but it is {module[name].type!r}"
        )
    if tuple(a.type for a in node.args) != node.op.type.params:
        raise WellFormednessError(f"{where}: arguments of @{name} do not match its parameters")
    return node.op.type.ret


def _check_no_call_cycle(module: IRModule) -> None:
    """Dataflow functions cannot recurse: a call cycle would never finish."""
    calls = {
        name: {n.op.name_hint for n in post_order([f.body])
               if isinstance(n, Call) and isinstance(n.op, GlobalVar)}
        for name, f in module.functions.items()
    }  # fmt: skip
    state: dict[str, str] = {}
    for start in calls:
        if start in state:
            continue
        state[start] = "open"
        stack = [(start, iter(sorted(calls[start])))]
        while stack:
            name, pending = stack[-1]
            for callee in pending:
                if state.get(callee) == "open":
                    raise WellFormednessError(
                        f"@{name} calls @{callee}, which is already on the call path: "
                        f"functions of a module may not call each other in a cycle"
                    )
                if callee not in state:
                    state[callee] = "open"
                    stack.append((callee, iter(sorted(calls[callee]))))
                    break
            else:
                state[name] = "done"
                stack.pop()
