"""Typed attribute specs: what an op's attribute may hold, and how every format writes it.

An op declares its attributes as ``{name: Attr(kind, default)}``. When a call
is built, each given value is checked and put in normal form by its kind
(``normalise``), so the text form, JSON and ExampleJSON need no per-op code:
they print and parse by kind, and a value read back is normalised the same way.

Kinds (``KINDS``): ``int``, ``float``, ``bool``, ``str`` (optionally one of
``choices``), ``dtype``, ``ints``, ``sizes`` (ints or symbolic sizes, see
``ir.symbols``), ``floats`` and ``strs`` (tuples); any kind may be
``optional`` (``None`` allowed). An ``ints`` attribute also takes a single
int, meaning a tuple of one (``axis=1`` is ``axis=(1,)``). A ``function``
attribute holds a Function (a control-flow op's body), which the text form and
JSON write out in full.

>>> spec = Attr("floats", default=(0.0,))
>>> spec.normalise("clip", "bounds", [1, 2.5])
(1.0, 2.5)
>>> spec.to_tokens((float("-inf"), 0.5)), spec.from_tokens(["-inf", "0.5"])
(['-inf', '0.5'], (-inf, 0.5))
>>> Attr("str", "constant", choices=("constant", "edge")).normalise("pad", "mode", "wrap")
Traceback (most recent call last):
    ...
nbyoc.errors.NbyocTypeError: pad: attribute mode must be one of 'constant', 'edge', got 'wrap'
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

import numpy as np

from ..errors import NbyocError, NbyocTypeError, shown
from .dtypes import normalize_dtype
from .symbols import SizeExpr, parse_size

#: A string attribute's value must be a word, so every format can write it as one token.
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")
#: Marks an attribute without a default: the caller must give it.
REQUIRED = object()


def _int(value) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("a bool is not an int here")
    return operator.index(value)


def _size(value):
    """An int, or a symbolic size (a ``SizeExpr`` or its text, as JSON and the text
    form store it): what a shape-like attribute computed from a model may hold."""
    if isinstance(value, (SizeExpr, str)):
        return parse_size(value) if isinstance(value, str) else value
    return _int(value)


def _size_token(value) -> str:
    # (one token of ExampleJSON: the expression without spaces)
    return str(value).replace(" ", "")


def _parse_size_token(token: str):
    if re.fullmatch(r"-?\d{1,20}", token):
        return int(token)
    return _size(token)


def _float(value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError("not a real number")
    if isinstance(value, np.complexfloating):
        raise TypeError("complex")
    return float(value)


def _bool(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError("not True or False")


def _str(value) -> str:
    if not isinstance(value, str) or not _WORD.match(value):
        raise TypeError("not a word of letters, digits, '_', '.', '-'")
    return value


def _dtype(value) -> str:
    return normalize_dtype(value)


def _many(one):
    def normalise(value):
        if isinstance(value, (str, bytes)):
            raise TypeError("a string is not a sequence of numbers here")
        if not hasattr(value, "__iter__"):
            return (one(value),)
        return tuple(one(v) for v in value)

    return normalise


def _words(value) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError("a sequence of words, not one")
    words = tuple(_str(v) for v in value)
    if "none" in words:  # (ExampleJSON's token for no value: ("none",) would read as None)
        raise TypeError("'none' is not a word here")
    return words


def _function(value):
    from .nodes import Function  # (local: nodes imports op, which imports attrs)

    if not isinstance(value, Function):
        raise TypeError("not an nbyoc Function")
    return value


def _no_token(value):
    raise NbyocError(
        "a function attribute (a control-flow op's body) has no one-token form; the text "
        "form and JSON write it, ExampleJSON does not (no backend takes control flow)"
    )


def _float_token(value: float) -> str:
    return "nan" if math.isnan(value) else repr(float(value))


def _parse_float(token: str) -> float:
    # float() also reads "1_0" and " 1"; the formats only ever write repr() or nan/inf.
    if not re.fullmatch(r"[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?|inf|nan)", token):
        raise ValueError(f"{shown(token)} is not a number")
    return float(token)


def _parse_int(token: str) -> int:
    if not re.fullmatch(r"-?\d{1,20}", token):
        raise ValueError(f"{shown(token)} is not an integer")
    return int(token)


def _parse_bool(token: str) -> bool:
    if token not in ("0", "1"):
        raise ValueError(f"{shown(token)} is not 0 or 1")
    return token == "1"


@dataclass(frozen=True)
class Kind:
    """One attribute kind: ``normalise`` (a Python value to normal form, TypeError if it
    does not fit), what it means in words, one element's token, and whether it holds
    several elements."""

    normalise: object
    meaning: str
    token: object
    parse: object
    many: bool = False


KINDS: dict[str, Kind] = {
    "int": Kind(_int, "an int", str, _parse_int),
    "float": Kind(_float, "a number", _float_token, _parse_float),
    "bool": Kind(_bool, "True or False", lambda v: str(int(v)), _parse_bool),
    "str": Kind(_str, "a word", str, _str),
    "dtype": Kind(_dtype, "a supported dtype", str, _dtype),
    "ints": Kind(_many(_int), "an int or a sequence of ints", str, _parse_int, many=True),
    "sizes": Kind(
        _many(_size),
        "a sequence of ints or symbolic sizes",
        _size_token,
        _parse_size_token,
        many=True,
    ),
    "floats": Kind(
        _many(_float), "a number or a sequence of numbers", _float_token, _parse_float, many=True
    ),
    "strs": Kind(_words, "a sequence of words", str, _str, many=True),
    # (a control-flow op's body or branch: written by the text form and JSON in full)
    "function": Kind(_function, "an nbyoc Function", _no_token, _no_token),
}


@dataclass(frozen=True)
class Attr:
    """An op attribute: its kind, its default (``REQUIRED`` if it has none), the values a
    ``str`` attribute may take, and whether ``None`` is allowed."""

    kind: str
    default: object = REQUIRED
    choices: tuple[str, ...] | None = None
    optional: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"attribute kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.default is None and not self.optional:
            object.__setattr__(self, "optional", True)

    def normalise(self, op: str, name: str, value):
        """``value`` in normal form, or a type error naming the op and attribute."""
        if value is None and self.optional:
            return None
        kind = KINDS[self.kind]
        try:
            value = kind.normalise(value)
        except (TypeError, ValueError, OverflowError, NbyocError):  # 10**400 is no float
            hint = " or None" if self.optional else ""
            raise NbyocTypeError(
                f"{op}: attribute {name} must be {kind.meaning}{hint}, got {shown(value)}"
            ) from None
        if self.choices is not None and value not in self.choices:
            raise NbyocTypeError(
                f"{op}: attribute {name} must be one of "
                f"{', '.join(map(repr, self.choices))}, got {shown(value)}"
            )
        return value

    def to_tokens(self, value) -> list[str]:
        """The value as ExampleJSON tokens (``none`` for None; a tuple's elements in turn)."""
        if value is None:
            return ["none"]
        kind = KINDS[self.kind]
        return [kind.token(v) for v in value] if kind.many else [kind.token(value)]

    def from_tokens(self, tokens: list[str]):
        """The value ExampleJSON tokens hold, in normal form; ValueError says what is wrong."""
        kind = KINDS[self.kind]
        if tokens == ["none"] and self.optional:
            return None
        if not kind.many and len(tokens) != 1:
            raise ValueError(f"takes one value ({kind.meaning}), got {len(tokens)}")
        try:
            values = [kind.parse(t) for t in tokens]
        except (TypeError, NbyocError) as e:
            raise ValueError(str(e)) from None
        return tuple(values) if kind.many else values[0]

    def to_json(self, value):
        """A JSON value (non-finite floats as the strings "nan", "inf", "-inf")."""
        if value is None:
            return None
        if self.kind == "float":
            return value if math.isfinite(value) else _float_token(value)
        if self.kind == "floats":
            return [v if math.isfinite(v) else _float_token(v) for v in value]
        if self.kind == "sizes":
            return [v if isinstance(v, int) else str(v) for v in value]
        return list(value) if KINDS[self.kind].many else value

    def from_json(self, op: str, name: str, value):
        """Inverse of ``to_json``, normalised (a type error names the op and attribute)."""

        def number(v):
            try:
                return _parse_float(v) if isinstance(v, str) else v
            except ValueError:
                return v  # normalise refuses it with the attribute's name

        if self.kind == "float":
            value = number(value)
        elif self.kind == "floats" and isinstance(value, list):
            value = [number(v) for v in value]
        return self.normalise(op, name, value)


def specs(**attrs) -> dict[str, Attr]:
    """Attribute specs from ``name=Attr(...)`` pairs (a small helper for op tables).

    >>> list(specs(axis=Attr("ints", None), keepdims=Attr("bool", False)))
    ['axis', 'keepdims']
    """
    for name, spec in attrs.items():
        if not isinstance(spec, Attr):
            raise TypeError(f"attribute {name}: expected an Attr, got {spec!r}")
    return dict(attrs)
