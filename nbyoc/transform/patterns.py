"""The pattern language: the sub-graphs a backend's fused kernels cover, written over ops.

=============================  ========================================================
``wildcard()``                 any value (it becomes an operand of the composite)
``is_var(name=None)``          a function parameter (called ``name``)
``is_constant(value=None)``    a constant (whose data equals ``value``)
``is_op("conv")(p, q, ...)``   a call of ``conv`` whose operands match ``p``, ``q``, ...
                               in order; ``is_op("conv")`` alone takes any operands
``p | q``                      what ``p`` matches, else what ``q`` matches (tried in
                               that order); ``(is_op("a") | is_op("b"))(x)`` calls both
``p.optional("relu")``         ``relu(p)``, else ``p`` alone: an optional op after ``p``;
                               ``p.optional(lambda x: is_op("add")(x, wildcard()))``
                               for an op of several operands
``p.has_attr(strides=(1, 1))`` (an op pattern) a call with these attribute values, in
                               the normal form the call holds (``has_attr({...})`` too)
``p.has_dtype("float32")``     a tensor value of that dtype
=============================  ========================================================

One pattern object used twice stands for one value: with ``x = wildcard()``,
``is_op("multiply")(x, x)`` matches a square, not every product. Each method returns a
new pattern. A composite's pattern has an op at its root (or alternatives that all do):
the values its other parts match are the composite's operands.

>>> import nbyoc
>>> x, w, b = nbyoc.var("x", (1, 2, 5, 5)), nbyoc.var("w", (3, 2, 3, 3)), nbyoc.var("b", (3,))
>>> conv = is_op("conv")(wildcard(), wildcard(), wildcard()).has_attr(group=1)
>>> pattern = conv.optional("relu")
>>> found = pattern.match(nbyoc.relu(nbyoc.conv(x, w, b)))
>>> [c.op.name for c in found.calls], [v.name_hint for v in found.inputs]
(['conv', 'relu'], ['x', 'w', 'b'])
>>> [c.op.name for c in pattern.match(nbyoc.conv(x, w, b)).calls]
['conv']
>>> pattern.match(nbyoc.exp(x)) is None
True
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..errors import NbyocError, PatternError
from ..ir.dtypes import normalize_dtype
from ..ir.nodes import Call, Constant, Expr, Var
from ..ir.op import Op, get_op
from ..ir.traversal import post_order
from ..ir.types import TensorType

#: What a match binds: each pattern object of the pattern to the value it matched.
Bindings = Mapping["Pattern", Expr]


class Pattern:
    """A pattern over IR values (see the module docstring for the constructors)."""

    dtype: str | None = None

    def __or__(self, other: Pattern) -> Pattern:
        return _Alt(self, _pattern(other, "p | q"))

    def __call__(self, *args: Pattern) -> Pattern:
        raise PatternError(f"{self!r} is not an op: only is_op(name)(...) takes operands")

    def has_dtype(self, dtype) -> Pattern:
        """This pattern, matching only a tensor of ``dtype``."""
        return self._with(dtype=normalize_dtype(dtype))

    def has_attr(self, attrs: Mapping | None = None, **more) -> Pattern:
        raise PatternError(
            f"{self!r}.has_attr: attributes belong to an op; write is_op(name).has_attr(...)"
        )

    def optional(self, wrap: str | Callable[[Pattern], Pattern]) -> Pattern:
        """``wrap(self)``, else ``self`` alone: an op that may follow this pattern.
        ``wrap`` is the name of a one-operand op (``"relu"``) or a function of the
        pattern (``lambda x: is_op("add")(x, wildcard())``)."""
        if isinstance(wrap, str):
            outer = is_op(wrap)(self)
        elif callable(wrap):
            outer = _pattern(wrap(self), f"{self!r}.optional(...): what the function returns")
        else:
            raise PatternError(
                f"{self!r}.optional takes an op name or a function of the pattern, got {wrap!r}"
            )
        return _Alt(outer, self)

    def match(self, expr: Expr) -> Match | None:
        """The first way this pattern matches at ``expr`` (its root), or None. The match
        ignores the graph around ``expr``: ``nbyoc.transform.merge_composite`` also
        checks that the matched values are used nowhere else."""
        root_ops(self)
        return next((Match.of(b, expr) for b in bindings(self, expr)), None)

    def _with(self, **fields) -> Pattern:
        new = copy.copy(self)
        new.__dict__.update(fields)
        return new

    def _here(self, expr: Expr, bound: dict) -> Iterator[dict]:
        raise NotImplementedError

    def _suffix(self) -> str:
        return f".has_dtype({self.dtype!r})" if self.dtype else ""


class _Wildcard(Pattern):
    def _here(self, expr, bound):
        yield bound

    def __repr__(self) -> str:
        return "wildcard()" + self._suffix()


class _Var(Pattern):
    def __init__(self, name: str | None):
        self.name = name

    def _here(self, expr, bound):
        if isinstance(expr, Var) and self.name in (None, expr.name_hint):
            yield bound

    def __repr__(self) -> str:
        return f"is_var({'' if self.name is None else repr(self.name)})" + self._suffix()


class _Constant(Pattern):
    def __init__(self, value):
        self.value = None if value is None else np.asarray(value)

    def _here(self, expr, bound):
        if isinstance(expr, Constant) and (
            self.value is None
            or (expr.data.shape == self.value.shape and np.array_equal(expr.data, self.value))
        ):
            yield bound

    def __repr__(self) -> str:
        value = "" if self.value is None else repr(self.value.tolist())
        return f"is_constant({value})" + self._suffix()


class _Op(Pattern):
    def __init__(self, op: Op):
        self.op, self.args, self.attrs = op, None, {}

    def __call__(self, *args):
        where = f"is_op({self.op.name!r})(...)"
        if self.args is not None:
            raise PatternError(f"{where}: this op pattern already has its operands")
        if not args or (self.op.arity is not None and len(args) != self.op.arity):
            want = "one or more" if self.op.arity is None else str(self.op.arity)
            raise PatternError(
                f"{where}: {self.op.name} takes {want} operand(s), the pattern gives "
                f"{len(args)}; leave out the call, is_op({self.op.name!r}), to take any"
            )
        return self._with(args=tuple(_pattern(a, f"{where}: operand {i}")
                                     for i, a in enumerate(args)))  # fmt: skip

    def has_attr(self, attrs=None, **more):
        wanted = {**dict(attrs or {}), **more}
        where = f"is_op({self.op.name!r}).has_attr"
        checked = {}
        for name, value in wanted.items():
            spec = self.op.attrs.get(name)
            if spec is None:
                allowed = ", ".join(self.op.attrs) or "none"
                raise PatternError(f"{where}: {self.op.name} has no attribute {name!r}; "
                                   f"its attributes: {allowed}")  # fmt: skip
            if spec.kind == "function":
                raise PatternError(f"{where}: {name} holds a function, which no pattern compares")
            try:
                checked[name] = spec.normalise(self.op.name, name, value)
            except NbyocError as e:
                raise PatternError(f"{where}: {e}") from None
        return self._with(attrs={**self.attrs, **checked})

    def _here(self, expr, bound):
        if not (isinstance(expr, Call) and expr.op is self.op):
            return
        if any(expr.attrs.get(k) != v for k, v in self.attrs.items()):
            return
        if self.args is None:
            yield bound
        elif len(self.args) == len(expr.args):
            yield from _all(self.args, expr.args, bound)

    def __repr__(self) -> str:
        args = "" if self.args is None else f"({', '.join(map(repr, self.args))})"
        attrs = f".has_attr({self.attrs!r})" if self.attrs else ""
        return f"is_op({self.op.name!r}){args}{attrs}{self._suffix()}"


class _Alt(Pattern):
    def __init__(self, first: Pattern, second: Pattern):
        self.first, self.second = first, second

    def __call__(self, *args):
        return _Alt(self.first(*args), self.second(*args))

    def _here(self, expr, bound):
        yield from _bind(self.first, expr, bound)
        yield from _bind(self.second, expr, bound)

    def __repr__(self) -> str:
        return f"({self.first!r} | {self.second!r}){self._suffix()}"


def wildcard() -> Pattern:
    """A pattern matching any value."""
    return _Wildcard()


def is_var(name: str | None = None) -> Pattern:
    """A pattern matching a function parameter (called ``name``, if given)."""
    return _Var(name)


def is_constant(value: ArrayLike | None = None) -> Pattern:
    """A pattern matching a constant (one whose data equals ``value``, if given, in shape
    and every element: ``is_constant(0.5)`` is the scalar 0.5)."""
    return _Constant(value)


def is_op(name: str) -> Pattern:
    """A pattern matching a call of the op ``name``; call it with operand patterns
    (``is_op("add")(wildcard(), is_constant())``), or not, to take any operands."""
    return _Op(get_op(name))


def root_ops(pattern: Pattern) -> frozenset[str]:
    """The ops a value matched by ``pattern`` can be a call of; a ``PatternError`` if
    ``pattern`` can match something other than an op call (a composite needs an op at
    its root)."""
    if isinstance(pattern, _Op):
        return frozenset([pattern.op.name])
    if isinstance(pattern, _Alt):
        return root_ops(pattern.first) | root_ops(pattern.second)
    raise PatternError(
        f"a composite's pattern has an op at its root, this one has {pattern!r}: write "
        f"is_op(name)(...) around it"
    )


def bindings(pattern: Pattern, expr: Expr) -> Iterator[Bindings]:
    """Every way ``pattern`` matches at ``expr``, first alternatives first."""
    return _bind(pattern, expr, {})


def _bind(pattern: Pattern, expr: Expr, bound: dict) -> Iterator[dict]:
    seen = bound.get(pattern)
    if seen is not None:  # (one pattern object is one value)
        if seen is expr:
            yield bound
        return
    if pattern.dtype is not None and not (
        isinstance(expr.type, TensorType) and expr.type.dtype == pattern.dtype
    ):
        return
    yield from pattern._here(expr, {**bound, pattern: expr})


def _all(patterns, exprs, bound) -> Iterator[dict]:
    if not patterns:
        yield bound
        return
    for found in _bind(patterns[0], exprs[0], bound):
        yield from _all(patterns[1:], exprs[1:], found)


def _pattern(value, where: str) -> Pattern:
    if not isinstance(value, Pattern):
        raise PatternError(
            f"{where} must be a pattern, got {value!r}: wrap a value in wildcard(), "
            f"is_var() or is_constant()"
        )
    return value


class _Outside:
    """Every node but the matched calls: where a walk of the match stops."""

    def __init__(self, calls):
        self.calls = calls

    def __contains__(self, node) -> bool:
        return node not in self.calls


@dataclass(frozen=True, eq=False)  # (IR nodes refuse ==)
class Match:
    """A pattern matched at ``root``: the op ``calls`` it covers (in evaluation order,
    ``root`` last) and its ``inputs``, the values those calls read from outside, in
    order of first use (the composite's operands). ``match["conv"]`` is the first
    matched call of ``conv``; ``match.get("relu")`` is None when an optional ``relu``
    is absent."""

    root: Call
    calls: tuple[Call, ...]
    inputs: tuple[Expr, ...]

    @classmethod
    def of(cls, found: Bindings, root: Expr) -> Match:
        calls = {e for p, e in found.items() if isinstance(p, _Op)}
        nodes = post_order([root], leaves=_Outside(calls))
        return cls(root, tuple(n for n in nodes if n in calls),
                   tuple(n for n in nodes if n not in calls))  # fmt: skip

    def get(self, op: str) -> Call | None:
        return next((c for c in self.calls if c.op.name == op), None)

    def __getitem__(self, op: str) -> Call:
        call = self.get(op)
        if call is None:
            ops = ", ".join(c.op.name for c in self.calls)
            raise KeyError(f"the match has no call of {op!r}; it has {ops}")
        return call
