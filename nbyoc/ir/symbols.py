"""Symbolic sizes: a dimension named by a symbol (``"n"``) or computed from symbols.

A type's dimension is an ``int`` or a ``SizeExpr``: an integer polynomial in
named symbols, whose atoms may also be floor divisions by a constant and
minima or maxima (what strides, pools and slices compute). Every expression is
kept in one canonical form, so two sizes are provably equal exactly when their
forms are identical; an expression that comes out constant is a plain ``int``.

A symbol stands for a size of at least 1 (a batch, a sequence length); that is
what lets ``min(n, 2**62)`` fold to ``n`` and ``max(0, n - 1)`` to ``n - 1``.
A call whose binding falls outside (a size 0) runs through a function made for
its concrete shapes instead.

>>> n, m = size("n"), size("m")
>>> (n + 2 - 3) // 2 + 1, n * 4 // 2, n * m - m * n
(floordiv(n + 1, 2), 2*n, 0)
>>> minimum(n, 1 << 62), maximum(0, n - 1), maximum(n, 4), (2 * n + 3) // 2
(n, n - 1, max(n, 4), n + 1)
>>> parse_size("(n + 1) // 2 * m").evaluate({"n": 5, "m": 3})
9

(Python's ``min`` and ``max`` compare, so they work only where the answer is known.)
A decision the sizes cannot settle at compile time raises rather than guesses:

>>> n > 3
Traceback (most recent call last):
    ...
nbyoc.errors.UndecidableSizeError: cannot tell at compile time whether n > 3 ...
"""

from __future__ import annotations

import contextvars
import functools
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .. import limits
from ..errors import NbyocTypeError, ParseError, UndecidableSizeError

#: Sizes of a symbol: at least 1, and below nbyoc's limit on any axis.
SYMBOL_MIN, SYMBOL_MAX = 1, (1 << 60) - 1
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = {"min", "max", "floordiv", "fn", "Tensor"}


class SizeExpr:
    """A size computed from symbols, in canonical form (see the module docstring).

    ``terms`` maps each monomial (a sorted tuple of atoms: symbol names and
    ``_Apply`` nodes) to its non-zero integer coefficient; ``()`` is the constant.
    Arithmetic with ints and other ``SizeExpr`` builds new ones; ``int()`` and
    ``range()`` refuse, so a size with no value cannot be used as one by mistake.
    """

    __slots__ = ("_bounds", "_hash", "_text", "terms")

    def __init__(self, terms: tuple):
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "_hash", hash(("SizeExpr", terms)))
        object.__setattr__(self, "_text", None)
        object.__setattr__(self, "_bounds", None)

    def __setattr__(self, name, value):
        raise AttributeError("sizes are immutable")

    # ---- what it is made of

    @property
    def symbols(self) -> frozenset[str]:
        """The names of the symbols it depends on.

        >>> sorted((size("n") * size("m") + 1).symbols)
        ['m', 'n']
        """
        found: set[str] = set()
        for monomial, _ in self.terms:
            for atom in monomial:
                found |= {atom} if isinstance(atom, str) else atom.symbols
        return frozenset(found)

    def evaluate(self, binding: Mapping[str, int]) -> int:
        """Its value when every symbol has one; a ``KeyError`` names a missing symbol."""
        try:
            return _value(self, binding)
        except KeyError:
            missing = sorted(self.symbols - set(binding))
            raise KeyError(f"no value for symbol(s) {', '.join(missing)}") from None

    def bounds(self) -> tuple[int, int]:
        """Lowest and highest values it can take, from every symbol's range."""
        if self._bounds is None:  # (computed once: a lowering asks about one size often)
            object.__setattr__(self, "_bounds", self._find_bounds())
        return self._bounds

    def _find_bounds(self) -> tuple[int, int]:
        low = high = 0
        for monomial, coeff in self.terms:
            lo, hi = coeff, coeff
            for atom in monomial:
                a_lo, a_hi = _atom_bounds(atom)
                corners = (lo * a_lo, lo * a_hi, hi * a_lo, hi * a_hi)
                lo, hi = min(corners), max(corners)
            low, high = low + lo, high + hi
        return low, high

    # ---- arithmetic (results are canonical; a constant result is an int)

    def __add__(self, other):
        return add(self, other) if _is_size(other) else NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        return add(self, multiply(other, -1)) if _is_size(other) else NotImplemented

    def __rsub__(self, other):
        return add(other, multiply(self, -1)) if _is_size(other) else NotImplemented

    def __neg__(self):
        return multiply(self, -1)

    def __pos__(self):
        return self

    def __mul__(self, other):
        return multiply(self, other) if _is_size(other) else NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return floordiv(self, other) if _is_size(other) else NotImplemented

    def __rfloordiv__(self, other):
        return floordiv(other, self) if _is_size(other) else NotImplemented

    def __mod__(self, other):
        return mod(self, other) if _is_size(other) else NotImplemented

    def __rmod__(self, other):
        return mod(other, self) if _is_size(other) else NotImplemented

    # ---- comparisons: decided from the canonical form and the symbols' ranges

    def __eq__(self, other):
        if not _is_size(other):
            return NotImplemented
        if isinstance(other, SizeExpr) and self.terms == other.terms:
            return True
        if _guards.get() is None:
            return False  # (provably equal or not: the canonical forms say)
        return _decide(self, other, "==")

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self):
        return self._hash

    def __lt__(self, other):
        return _decide(self, other, "<")

    def __le__(self, other):
        return _decide(self, other, "<=")

    def __gt__(self, other):
        return _decide(self, other, ">")

    def __ge__(self, other):
        return _decide(self, other, ">=")

    def __bool__(self):
        return _decide(self, 0, "!=")

    def __index__(self):
        guards = _guards.get()
        if guards is not None:
            return guards.value(self)
        raise UndecidableSizeError(
            f"the size {self} has no value at compile time; this step needs concrete "
            f"shapes (fix {', '.join(sorted(self.symbols))} with shapes=)"
        )

    __int__ = __index__

    def __repr__(self) -> str:
        if self._text is None:
            object.__setattr__(self, "_text", _format(self.terms))
        return self._text

    __str__ = __repr__

    def __reduce__(self):
        return (parse_size, (repr(self),))


@dataclass(frozen=True)
class _Apply:
    """An atom that is not a symbol: ``a // c``, ``min(a, b, ...)`` or ``max(a, b, ...)``."""

    kind: str
    args: tuple
    #: How deeply floordiv, min and max nest in it (bounded by the limit ``nesting``,
    #: so that printing and substituting, which recurse per level, never run out).
    depth: int = field(default=1, compare=False, repr=False)

    def __post_init__(self):
        inner = [t.depth for a in self.args if isinstance(a, SizeExpr) for m, _ in a.terms
                 for t in m if isinstance(t, _Apply)]  # fmt: skip
        object.__setattr__(self, "depth", 1 + max(inner, default=0))
        if self.depth > 8:  # (a cheap test first)
            limits.check("nesting", self.depth, "a symbolic size's floordiv, min and max")

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset().union(*(a.symbols for a in self.args if isinstance(a, SizeExpr)))

    def __repr__(self) -> str:
        # (function syntax, as TVM prints it: "//" would start a comment in the text form)
        return f"{_FUNCTION_NAMES[self.kind]}({', '.join(map(repr, self.args))})"


_FUNCTION_NAMES = {"//": "floordiv", "min": "min", "max": "max"}


def _is_size(x) -> bool:
    return isinstance(x, SizeExpr) or (isinstance(x, int) and not isinstance(x, bool))


def _terms(x) -> dict:
    if isinstance(x, SizeExpr):
        return dict(x.terms)
    return {(): x} if x else {}


def _atom_text(atom) -> str:
    return atom if isinstance(atom, str) else repr(atom)


def _order(monomial: tuple) -> tuple:
    # higher degree first, then by text: the printed form reads like a polynomial
    # (symbols before floordiv/min/max: "n - 4*floordiv(n, 4)")
    return (-len(monomial), [(not isinstance(a, str), _atom_text(a)) for a in monomial])


def _canonical(terms: dict):
    terms = {m: c for m, c in terms.items() if c}
    if not terms:
        return 0
    if set(terms) == {()}:
        return terms[()]
    if len(terms) > 16:  # (a cheap test first: sizes have a few terms)
        limits.check("size_terms", len(terms), "a symbolic size")
    ordered = sorted(terms.items(), key=lambda item: _order(item[0]) if item[0] else (1,))
    return SizeExpr(tuple(ordered))


def symbol(name: str) -> SizeExpr:
    """The size named ``name`` (an identifier).

    >>> symbol("batch") * 2
    2*batch
    """
    if not isinstance(name, str) or not _NAME.match(name) or name in _RESERVED:
        raise NbyocTypeError(
            f"a symbolic size is named by an identifier (not {', '.join(sorted(_RESERVED))}), "
            f"e.g. 'n' or 'batch'; got {name!r}"
        )
    return SizeExpr((((name,), 1),))


def size(value):
    """A dimension in normal form: an int stays an int, a string is parsed
    (``"n"``, ``"2*n + 1"``), a ``SizeExpr`` is itself.

    >>> size(3), size("n"), size("(seq + 1) // 2")
    (3, n, floordiv(seq + 1, 2))
    """
    if isinstance(value, SizeExpr):
        return value
    if isinstance(value, str):
        return parse_size(value)
    if isinstance(value, bool):
        raise NbyocTypeError(f"a size must be an int or a symbol name, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise NbyocTypeError(
            f"a size must be an int or a symbol name like 'n', got {value!r}"
        ) from None


def add(a, b):
    if a.__class__ is int and b.__class__ is int:
        return a + b
    if b.__class__ is int or a.__class__ is int:  # (a size plus a constant: the common case)
        x, k = (a, b) if b.__class__ is int else (b, a)
        if not k:
            return x
        constant = k + (x.terms[-1][1] if not x.terms[-1][0] else 0)
        rest = x.terms[:-1] if not x.terms[-1][0] else x.terms
        return SizeExpr((*rest, ((), constant)) if constant else rest)
    terms = _terms(a)
    for m, c in _terms(b).items():
        terms[m] = terms.get(m, 0) + c
    return _canonical(terms)


def multiply(a, b):
    if a.__class__ is int and b.__class__ is int:
        return a * b
    if b.__class__ is int or a.__class__ is int:  # (a size times a constant)
        x, k = (a, b) if b.__class__ is int else (b, a)
        if k == 1 or k == 0:
            return x if k else 0
        return SizeExpr(tuple((m, c * k) for m, c in x.terms))
    terms: dict = {}
    for ma, ca in _terms(a).items():
        for mb, cb in _terms(b).items():
            m = tuple(sorted(ma + mb, key=lambda a: (not isinstance(a, str), _atom_text(a))))
            terms[m] = terms.get(m, 0) + ca * cb
    return _canonical(terms)


def floordiv(a, b):
    """``a // b``: exact where every term divides; multiples of a constant divisor
    are taken out of the floor (``(2n + 3) // 2 == n + 1``)."""
    if isinstance(b, int):
        if b == 0:
            raise NbyocTypeError(f"size {a} divided by zero")
        if isinstance(a, int):
            return a // b
        if b < 0:
            return floordiv(multiply(a, -1), -b)  # floor(a / b) == floor(-a / -b)
        quotient, rest = {}, {}
        for m, c in a.terms:
            q, r = divmod(c, b)
            if q:
                quotient[m] = q
            if r:
                rest[m] = r
        remainder = _canonical(rest)
        if isinstance(remainder, int):
            return add(_canonical(quotient), remainder // b)
        low, high = remainder.bounds()
        if low >= 0 and high < b:
            return _canonical(quotient)
        return add(_canonical(quotient), _apply("//", remainder, b))
    # a symbolic divisor: exact when it is one term dividing every term of a
    if len(b.terms) == 1:
        ((mb, cb),) = b.terms
        quotient = {}
        for m, c in _terms(a).items():
            rest = list(m)
            for atom in mb:
                if atom not in rest:
                    break
                rest.remove(atom)
            else:
                if c % cb == 0:
                    quotient[tuple(rest)] = c // cb
                    continue
            break
        else:
            return _canonical(quotient)
    return _apply("//", a, b)


def mod(a, b):
    """``a % b``, as ``a - b * (a // b)``."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise NbyocTypeError("size modulo zero")
        return a % b
    return add(a, multiply(multiply(b, floordiv(a, b)), -1))


def minimum(a, b):
    """``min(a, b)``, decided where the symbols' ranges decide it.

    >>> minimum(size("n"), 0), minimum(size("n"), 4)
    (0, min(n, 4))
    """
    return _extreme("min", a, b)


def maximum(a, b):
    """``max(a, b)``, decided where the symbols' ranges decide it."""
    return _extreme("max", a, b)


def _extreme(kind: str, a, b):
    # min(min(n, 9), n) is min(n, 9): the operands of nested minima are pooled, and one
    # another provably bounds is dropped, so that applying a clamp twice changes nothing
    kept: list = []
    for x in [*_operands(kind, a), *_operands(kind, b)]:
        if any(_bounds_out(kind, y, x) for y in kept):
            continue
        kept = [y for y in kept if not _bounds_out(kind, x, y)]
        kept.append(x)
    if len(kept) == 1:
        return kept[0]
    return _apply(kind, *sorted(kept, key=lambda x: (isinstance(x, int), repr(x))))


def _operands(kind: str, x) -> tuple:
    """The operands of ``x`` if it is a minimum (``kind``), else ``x`` alone."""
    if isinstance(x, SizeExpr) and len(x.terms) == 1:
        ((monomial, coeff),) = x.terms
        atom = monomial[0] if coeff == 1 and len(monomial) == 1 else None
        if isinstance(atom, _Apply) and atom.kind == kind:
            return atom.args
    return (x,)


def _bounds_out(kind: str, y, x) -> bool:
    """Whether ``y`` makes ``x`` redundant in a ``kind`` (y <= x for min, y >= x for max)."""
    difference = add(x, multiply(y, -1)) if kind == "min" else add(y, multiply(x, -1))
    low = difference.bounds()[0] if isinstance(difference, SizeExpr) else difference
    return low >= 0


def _apply(kind: str, *args) -> SizeExpr:
    return SizeExpr((((_Apply(kind, tuple(args)),), 1),))


def _atom_bounds(atom) -> tuple[int, int]:
    if isinstance(atom, str):
        return SYMBOL_MIN, SYMBOL_MAX
    bounds = [a.bounds() if isinstance(a, SizeExpr) else (a, a) for a in atom.args]
    if atom.kind == "//":
        (lo, hi), (d_lo, d_hi) = bounds
        if d_lo > 0:
            corners = [x // d for x in (lo, hi) for d in (d_lo, d_hi)]
            return min(corners), max(corners)
        return -SYMBOL_MAX * SYMBOL_MAX, SYMBOL_MAX * SYMBOL_MAX
    lows, highs = [b[0] for b in bounds], [b[1] for b in bounds]
    if atom.kind == "min":
        return min(lows), min(highs)
    return max(lows), max(highs)


_RELATIONS = {
    "<": lambda lo, hi: True if hi < 0 else False if lo >= 0 else None,
    "<=": lambda lo, hi: True if hi <= 0 else False if lo > 0 else None,
    ">": lambda lo, hi: True if lo > 0 else False if hi <= 0 else None,
    ">=": lambda lo, hi: True if lo >= 0 else False if hi < 0 else None,
    "!=": lambda lo, hi: True if lo > 0 or hi < 0 else False if lo == hi == 0 else None,
    "==": lambda lo, hi: False if lo > 0 or hi < 0 else True if lo == hi == 0 else None,
}


def _decide(a, b, relation: str) -> bool:
    if not _is_size(b):
        return NotImplemented
    difference = add(a, multiply(b, -1))
    low, high = difference.bounds() if isinstance(difference, SizeExpr) else (difference,) * 2
    answer = _RELATIONS[relation](low, high)
    if answer is None and _guards.get() is not None:
        return _guards.get().decide(difference, relation)
    if answer is None:
        shown = f"{a} {relation} {b}" if relation != "!=" else f"{a} != 0"
        raise UndecidableSizeError(
            f"cannot tell at compile time whether {shown} (it depends on "
            f"{', '.join(sorted(difference.symbols))}); give those dimensions fixed sizes "
            f"(shapes= for a model, a concrete shape for a variable)"
        )
    return answer


#: The guards of the lowering running now (``deciding``), if any.
_guards: contextvars.ContextVar = contextvars.ContextVar("nbyoc_size_guards", default=None)

_HOLDS = {
    "<": lambda v: v < 0,
    "<=": lambda v: v <= 0,
    ">": lambda v: v > 0,
    ">=": lambda v: v >= 0,
    "!=": lambda v: v != 0,
    "==": lambda v: v == 0,
}


class Guards:
    """The decisions a step took on symbolic sizes by their values at one ``binding``
    (its *hint*), as torch.compile's guards are: each a size minus another, a relation
    to 0 and the answer. Work done under them (``deciding``) is valid for every binding
    where they all hold (``hold``); a size used as a number (``int``, ``range``, an
    index) becomes the guard that it equals its value there.

    >>> n = size("n")
    >>> with deciding({"n": 40}) as guards:
    ...     tiles = 32 if n >= 32 else 8
    >>> tiles, guards.hold({"n": 100}), guards.hold({"n": 7})
    (32, True, False)
    """

    def __init__(self, binding: Mapping[str, int]):
        self.binding = dict(binding)
        self.decided: dict[tuple, bool] = {}
        self._check: tuple | None = None  # (compiled by ``hold``: the sizes, symbols, answers)

    def decide(self, difference, relation: str) -> bool:
        if isinstance(difference, int):
            return _HOLDS[relation](difference)
        key = (difference, relation)
        answer = self.decided.get(key)
        if answer is None:
            answer = self.decided[key] = _HOLDS[relation](difference.evaluate(self.binding))
        return answer

    def value(self, x) -> int:
        """``x``'s value at the hint, guarded: work using it is valid only where it holds."""
        v = x.evaluate(self.binding)
        self.decided[(add(x, -v), "==")] = True
        return v

    def hold(self, binding: Mapping[str, int]) -> bool:
        """Whether every decision would be the same at ``binding`` (a ``KeyError`` names
        a symbol it lacks)."""
        check = self._check
        if check is None or check[0] != len(self.decided):
            items = list(self.decided.items())
            differences = [difference for (difference, _), _ in items]
            read = [d.symbols for d in differences if not isinstance(d, int)]
            symbols = sorted(set().union(*read))
            answers = [(_HOLDS[relation], answer) for (_, relation), answer in items]
            check = self._check = (len(items), size_function(differences, symbols), symbols,
                                   answers)  # fmt: skip
        _, sizes, symbols, answers = check
        values = sizes(*[binding[name] for name in symbols])
        return all(holds(v) == answer for v, (holds, answer) in zip(values, answers))


class deciding:
    """Context in which an undecidable comparison of sizes is answered at ``binding``
    and recorded in the ``Guards`` it gives (the ``as`` value)."""

    def __init__(self, binding: Mapping[str, int]):
        self.guards = Guards(binding)

    def __enter__(self) -> Guards:
        self._token = _guards.set(self.guards)
        return self.guards

    def __exit__(self, *exc) -> None:
        _guards.reset(self._token)


def substitute(value, binding: Mapping[str, object]):
    """``value`` with each symbol in ``binding`` replaced (by an int or a size).

    >>> n = size("n")
    >>> substitute((n + 1) // 2, {"n": 7}), substitute(n * 2, {"n": size("m")})
    (4, 2*m)
    """
    if not isinstance(value, SizeExpr):
        return value
    result = 0
    for monomial, coeff in value.terms:
        term = coeff
        for atom in monomial:
            if isinstance(atom, str):
                term = multiply(term, binding.get(atom, SizeExpr((((atom,), 1),))))
            else:
                args = [substitute(a, binding) for a in atom.args]
                if atom.kind == "//":
                    term = multiply(term, floordiv(*args))
                else:
                    term = multiply(term, functools.reduce(functools.partial(_extreme, atom.kind),
                                                           args))  # fmt: skip
        result = add(result, term)
    return result


def size_function(values: Sequence, symbols: Sequence[str]) -> Callable[..., tuple[int, ...]]:
    """One Python function computing every size of ``values`` (ints and sizes in the
    names ``symbols``) from the symbols' values, passed in that order: plain integer
    arithmetic, each floordiv, min and max computed once, so that evaluating hundreds
    of sizes at a binding costs microseconds where ``substitute`` (which keeps the
    canonical form at every step) costs milliseconds.

    >>> n, m = size("n"), size("m")
    >>> size_function([n * m + 1, (n + 1) // 2, 7, maximum(n, m)], ["n", "m"])(5, 3)
    (16, 3, 7, 5)
    """
    names = {name: f"s{k}" for k, name in enumerate(symbols)}
    lines: list[str] = []
    atoms: dict = {}

    def atom(a) -> str:
        if isinstance(a, str):
            return names[a]
        found = atoms.get(a)
        if found is None:
            args = [expression(x) for x in a.args]
            text = f"{args[0]} // {args[1]}" if a.kind == "//" else f"{a.kind}({', '.join(args)})"
            found = atoms[a] = f"a{len(atoms)}"
            lines.append(f"    {found} = {text}")
        return found

    def expression(x) -> str:
        if isinstance(x, int):
            return f"({x})"
        terms = ["*".join([f"({coeff})", *(atom(a) for a in monomial)])
                 for monomial, coeff in x.terms]  # fmt: skip
        return f"({' + '.join(terms)})"

    results = [expression(v) for v in values]
    source = "\n".join([
        f"def sizes({', '.join(names.values())}):",
        *lines,
        f"    return ({''.join(r + ', ' for r in results)})",
    ])  # fmt: skip
    namespace: dict = {"min": min, "max": max}
    exec(compile(source, "<nbyoc sizes>", "exec"), namespace)  # (our own text, of ints)
    return namespace["sizes"]


def _value(x, binding: Mapping[str, int]) -> int:
    # (plain integer arithmetic: no canonical form is built on the way)
    if x.__class__ is int:
        return x
    total = 0
    for monomial, coeff in x.terms:
        for atom in monomial:
            if atom.__class__ is str:
                coeff *= binding[atom]
            else:
                args = [_value(a, binding) for a in atom.args]
                if atom.kind == "//":
                    coeff *= args[0] // args[1]
                else:
                    coeff *= min(args) if atom.kind == "min" else max(args)
        total += coeff
    return total


def _format(terms: tuple) -> str:
    parts = []
    for monomial, coeff in terms:
        body = "*".join(map(_atom_text, monomial))
        magnitude = abs(coeff)
        if not monomial:
            text = str(magnitude)
        elif magnitude == 1:
            text = body
        else:
            text = f"{magnitude}*{body}"
        if not parts:
            parts.append(text if coeff > 0 else f"-{text}")
        else:
            parts.append(f"+ {text}" if coeff > 0 else f"- {text}")
    return " ".join(parts)


# ---- parsing the printed form

_SIZE_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*(),%]))")


def parse_size(text: str):
    """Read a size written as the printer writes it (or any expression of ints,
    symbols, ``+ - * // %``, parentheses, ``min``, ``max`` and ``floordiv(a, b)``).

    >>> parse_size("2*n + 1"), parse_size("min(n, 4)"), parse_size("(n + 3) // 2")
    (2*n + 1, min(n, 4), floordiv(n + 1, 2) + 1)
    """
    if not isinstance(text, str) or len(text) > 10_000:
        raise ParseError(f"a size must be a short text like 'n' or '2*n + 1', got {text!r}")
    tokens, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = _SIZE_TOKEN.match(text, position)
        if not match:
            raise ParseError(f"cannot read size {text!r} at column {position + 1}")
        tokens.append(match.group(1) or match.group(2) or match.group(3))
        position = match.end()
    reader = _SizeReader(text, tokens)
    value = reader.sum()
    if reader.position != len(tokens):
        raise ParseError(f"cannot read size {text!r}: unexpected {tokens[reader.position]!r}")
    return value


_FUNCTIONS = {"min": minimum, "max": maximum, "floordiv": floordiv}


class _SizeReader:
    def __init__(self, text: str, tokens: list[str]):
        self.text, self.tokens, self.position, self.depth = text, tokens, 0, 0

    def peek(self):
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            want = repr(expected) if expected else "more"
            raise ParseError(f"cannot read size {self.text!r}: expected {want}")
        self.position += 1
        return token

    def sum(self):
        value = self.product()
        while self.peek() in ("+", "-"):
            sign = self.take()
            right = self.product()
            value = add(value, right if sign == "+" else multiply(right, -1))
        return value

    def product(self):
        value = self.unary()
        while self.peek() in ("*", "//", "%"):
            operator = self.take()
            right = self.unary()
            if operator == "*":
                value = multiply(value, right)
            elif operator == "//":
                value = floordiv(value, right)
            else:
                value = mod(value, right)
        return value

    def unary(self):
        if self.peek() == "-":
            self.take()
            return multiply(self.unary(), -1)
        return self.atom()

    def atom(self):
        token = self.take()
        if token.isdigit():
            return int(token)
        if token == "(":
            self.depth += 1
            if self.depth > 100:
                raise ParseError(f"size {self.text[:40]!r}... nests too deeply")
            value = self.sum()
            self.take(")")
            self.depth -= 1
            return value
        if token in _FUNCTIONS:
            self.take("(")
            args = [self.sum()]
            while self.peek() == "," and (token != "floordiv" or len(args) < 2):
                self.take(",")
                args.append(self.sum())
            self.take(")")
            if len(args) < 2:
                raise ParseError(f"cannot read size {self.text!r}: {token} takes two sizes")
            return functools.reduce(_FUNCTIONS[token], args)
        if _NAME.match(token):
            return symbol(token)
        raise ParseError(f"cannot read size {self.text!r}: unexpected {token!r}")


# ---- constraints an op needs that the types alone cannot prove


@dataclass(frozen=True)
class Constraint:
    """A condition on symbols that a call relies on, checked when sizes are bound.

    ``kind`` is ``"broadcast"`` (``args[0]`` is 1 or equals ``args[1]``),
    ``"equal"``, ``"divisible"`` (``args[0] % args[1] == 0``) or ``"at_least"``
    (``args[0] >= args[1]``); ``where`` names the op and what it needs it for.
    """

    kind: str
    args: tuple
    where: str

    def holds(self, binding: Mapping[str, int]) -> bool:
        values = [substitute(a, binding) for a in self.args]
        return _CONSTRAINT_TESTS[self.kind](*values)

    def explain(self, binding: Mapping[str, int]) -> str:
        """Why it fails for ``binding``: the condition, with each symbol's value."""
        values = [substitute(a, binding) for a in self.args]
        names = sorted(set().union(*(a.symbols for a in self.args if isinstance(a, SizeExpr))))
        given = ", ".join(f"{n} = {binding[n]}" for n in names if n in binding)
        need = _CONSTRAINT_TEXT[self.kind].format(*self.args, *values)
        return f"{self.where}: {need}" + (f"; got {given}" if given else "")


_CONSTRAINT_TESTS = {
    "broadcast": lambda a, b: a == 1 or a == b,
    "equal": lambda a, b: a == b,
    "divisible": lambda a, b: b != 0 and a % b == 0,
    "at_least": lambda a, b: a >= b,
}
_CONSTRAINT_TEXT = {
    "broadcast": "size {0} must be 1 or equal {1} to broadcast (it is {2}, not {3})",
    "equal": "sizes {0} and {1} must be equal (they are {2} and {3})",
    "divisible": "size {0} must be a multiple of {1} (it is {2})",
    "at_least": "size {0} must be at least {1} (it is {2})",
}


def _decided(kind: str, args: tuple) -> bool | None:
    """Whether the constraint holds for every value of its symbols (True), for none
    (False), or depends on them (None)."""
    if not any(isinstance(a, SizeExpr) for a in args):
        return _CONSTRAINT_TESTS[kind](*args)
    a, b = args
    if kind == "broadcast":
        return True if a == b else None
    if kind == "divisible":
        rest = mod(a, b)
        return rest == 0 if isinstance(rest, int) else None
    relation = "!=" if kind == "equal" else ">="
    try:
        answer = _decide(add(a, multiply(b, -1)), 0, relation)
    except UndecidableSizeError:
        return None
    return (not answer) if kind == "equal" else answer


_collector: contextvars.ContextVar = contextvars.ContextVar("nbyoc_constraints", default=None)


def require(kind: str, *args, where: str, error: str | None = None) -> None:
    """Record that the call being typed needs ``kind(*args)``. When the sizes settle it,
    it is decided at once (a failure raises ``error``, or a message saying what is
    needed); else the call's type relies on it and it is checked at call time.

    >>> with collecting() as found:
    ...     require("equal", size("n"), size("m"), where="add")
    ...     require("at_least", size("n") + 4, 3, where="pool")
    >>> found
    [Constraint(kind='equal', args=(n, m), where='add')]
    """
    decided = _decided(kind, args)
    if decided is True:
        return
    constraint = Constraint(kind, tuple(args), where)
    if decided is False:
        raise NbyocTypeError(error or constraint.explain({}))
    found = _collector.get()
    if found is None:
        raise UndecidableSizeError(
            f"{where}: cannot check at compile time that "
            + _CONSTRAINT_TEXT[kind].split(" (")[0].format(*args)
        )
    if constraint not in found:
        found.append(constraint)


class collecting:
    """Context in which ``require`` records constraints into a list (the ``as`` value)."""

    def __enter__(self) -> list:
        self._found: list = []
        self._token = _collector.set(self._found)
        return self._found

    def __exit__(self, *exc) -> None:
        _collector.reset(self._token)


def shape_symbols(shape) -> frozenset[str]:
    """The symbols a shape's dimensions depend on."""
    return frozenset().union(*(d.symbols for d in shape if isinstance(d, SizeExpr)))
