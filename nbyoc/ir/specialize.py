"""Moving between symbolic and concrete sizes: ``specialize`` puts values (or other
sizes) in for symbols, ``generalize`` turns chosen dimensions of the parameters into
symbols. Both rebuild every call, so each type is inferred again by its op's rule.

>>> import nbyoc
>>> x = nbyoc.var("x", ("n", 3))
>>> f = nbyoc.function([x], nbyoc.exp(x).sum(axis=1))
>>> specialize(f, {"n": 5}).ret_type
Tensor[(5,), float32]
>>> generalize(specialize(f, {"n": 5}), {"x": ("batch", None)}).ret_type
Tensor[(batch,), float32]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import NbyocTypeError
from .nodes import Call, Function, GlobalVar, IRModule, Var
from .ops.control import body_parameter_types
from .symbols import SizeExpr, substitute
from .traversal import callees_first, operands, post_order, with_operands
from .types import TensorType, TupleType


def specialize(target: Function | IRModule, binding: Mapping[str, object]):
    """``target`` with each symbol of ``binding`` replaced by its value (an int or a
    size) in parameter types and attributes; every call is typed again."""
    if isinstance(target, IRModule):
        return _specialize_module(target, binding)
    return _rebuild(target, lambda t: substitute_type(t, binding), binding, {})


def generalize(func: Function, dims: Mapping[str, Sequence]) -> Function:
    """``func`` with the parameters named in ``dims`` given new dimensions: each entry
    is a size (``"n"``, ``"2*n"``, an int) or ``None`` to keep that dimension."""
    by_name = {p.name_hint: p for p in func.params}
    unknown = sorted(set(dims) - set(by_name))
    if unknown:
        raise NbyocTypeError(
            f"generalize: no parameter(s) {', '.join(unknown)}; the function has "
            f"{', '.join(by_name) or 'none'}"
        )
    new_types = {}
    for name, new in dims.items():
        old = by_name[name].type
        if len(new) != old.ndim:
            raise NbyocTypeError(
                f"generalize: {name} has {old.ndim} dimension(s), got {len(new)} sizes"
            )
        shape = tuple(o if n is None else n for o, n in zip(old.shape, new))
        new_types[by_name[name]] = TensorType(shape, old.dtype)
    return _rebuild(func, None, {}, new_types)


def substitute_type(t, binding: Mapping[str, object]):
    """A type with symbols replaced (tuples field by field)."""
    if isinstance(t, TupleType):
        return TupleType(substitute_type(f, binding) for f in t.fields)
    if not t.symbols:
        return t
    return TensorType(tuple(substitute(d, binding) for d in t.shape), t.dtype)


def substitute_attrs(attrs: Mapping, binding: Mapping[str, object]) -> dict:
    """Attributes with symbols replaced (a reshape's target computed from a model)."""
    return {key: _substitute_attr(value, binding) for key, value in attrs.items()}


def _substitute_attr(value, binding):
    if isinstance(value, Function):  # a control-flow op's body: its sizes too
        return specialize(value, binding)
    if isinstance(value, SizeExpr):
        return substitute(value, binding)
    if isinstance(value, tuple) and any(isinstance(v, SizeExpr) for v in value):
        return tuple(substitute(v, binding) for v in value)
    return value


def _rebuild(func: Function, retype, binding, new_types: dict, globals_=None) -> Function:
    rebuilt: dict = {}
    params = []
    for p in func.params:
        t = new_types.get(p) or (retype(p.type) if retype else p.type)
        rebuilt[p] = p if t == p.type else Var(p.name_hint, t)
        params.append(rebuilt[p])
    for node in post_order([func.body], leaves=set(func.params)):
        if node in rebuilt:
            continue
        args = [rebuilt[a] for a in operands(node)]
        if isinstance(node, Call) and isinstance(node.op, GlobalVar):
            rebuilt[node] = Call(globals_[node.op.name_hint], args)
        elif isinstance(node, Call):
            attrs = substitute_attrs(node.attrs, binding) if binding else node.attrs
            if node.op.kind in ("control", "composite"):  # (bodies take the new types)
                attrs = retyped_bodies(node.op.name, [a.type for a in args], attrs)
            rebuilt[node] = Call(node.op, args, attrs)
        elif all(a is b for a, b in zip(args, operands(node))):
            rebuilt[node] = node
        else:
            rebuilt[node] = with_operands(node, args)
    return Function(params, rebuilt[func.body], func.attrs)


def retyped_bodies(op: str, operand_types, attrs: Mapping) -> dict:
    """A control-flow op's attributes with each body's parameters given the types its
    operands have now (the function around it generalised or specialised): the body
    is typed again from them."""
    attrs = dict(attrs)
    for key, types in body_parameter_types(op, operand_types).items():
        body = attrs[key]
        changed = {p: t for p, t in zip(body.params, types) if t != p.type}
        if changed:
            attrs[key] = _rebuild(body, None, {}, changed)
    return attrs


def _specialize_module(module: IRModule, binding) -> IRModule:
    functions: dict = {}
    globals_: dict = {}
    for name in callees_first(module):
        func = _rebuild(module[name], lambda t: substitute_type(t, binding), binding, {},
                        globals_)  # fmt: skip
        functions[name] = func
        globals_[name] = GlobalVar(name, func.type)
    return IRModule(functions)
