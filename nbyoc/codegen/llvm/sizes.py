"""Sizes a stage function reads at run time, so that one function serves every shape
of its structure.

A stage's emitter asks ``Sizes`` for each size it would otherwise write into the
code as a number (a spatial extent, a channel count, a block of positions), and
gets a ``Dim``: the size's value here, and the name the code reads it by
(``z0``, ``z1``, ... unpacked from the stage's parameter ``z``, a tuple of int64
the caller passes). Arithmetic on a ``Dim`` writes the expression, so emitters
keep writing ``f"range({out - 1})"``; a number the code still holds (a kernel's
taps, a stride) is structure, and two stages differing in it are two functions.

The function is keyed by its text, so sharing it is safe by construction: any
size still written as a number is in the text. A Python decision on a size must
read ``.value`` explicitly (comparing a ``Dim`` raises), which marks the place
where a choice of code depends on the shape; what the chosen code then reads must
still come from ``z``.

>>> sizes = Sizes()
>>> h, w = sizes.dim(48), sizes.dim(192)
>>> f"for o in range({h}): x[o * {w + 2}]", (h * w).value
('for o in range(z0): x[o * (z1 + 2)]', 9216)
>>> str((h - 1) // 2 + 1)
'((z0 - 1) // 2 + 1)'
>>> sizes.binding(), sizes.argument()
(['z0, z1 = z'], '(48, 192)')
"""

from __future__ import annotations

from ...ir.symbols import SizeExpr

#: The stage function's parameter holding the sizes, and the prefix of their names.
PARAMETER = "z"


class Dim:
    """A size read at run time: ``text`` in the code, ``value`` here."""

    __slots__ = ("atom", "text", "value")

    def __init__(self, text: str, value: int, atom: bool = True):
        # (a value may itself be symbolic: a stage lowered once for every binding)
        self.text, self.value, self.atom = text, _size(value), atom

    def __str__(self) -> str:
        # (an expression is parenthesised: f"q * {dim}" must not read as (q * z0) + 1)
        return self.text if self.atom else f"({self.text})"

    def __format__(self, spec: str) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Dim({self.text!r}, {self.value})"

    def _operand(self, strength: int) -> str:
        # (parenthesised unless a name: the expressions are only ever +, -, *, //, %)
        return self.text if self.atom or strength == 0 else f"({self.text})"

    def _combine(self, other, symbol: str, value, reverse: bool = False) -> Dim | int:
        if not isinstance(other, (Dim, int)) or isinstance(other, bool):
            return NotImplemented
        left, right = (other, self) if reverse else (self, other)
        strength = 1 if symbol in "+-" else 2

        def text(x, side):
            if isinstance(x, Dim):
                # a right operand of -, //, % binds tighter; a sum inside a product too
                needs = strength == 2 or (side == "right" and symbol == "-")
                return x._operand(1 if needs else 0)
            return f"({x})" if x < 0 else str(x)

        return Dim(f"{text(left, 'left')} {symbol} {text(right, 'right')}", value, False)

    def __add__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return self._combine(other, "+", self.value + _value(other))

    def __radd__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return self._combine(other, "+", _value(other) + self.value, True)

    def __sub__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return self._combine(other, "-", self.value - _value(other))

    def __rsub__(self, other):
        return self._combine(other, "-", _value(other) - self.value, True)

    def __mul__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and other == 1:
            return self
        return self._combine(other, "*", self.value * _value(other))

    def __rmul__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and other == 1:
            return self
        return self._combine(other, "*", _value(other) * self.value, True)

    def __floordiv__(self, other):
        if isinstance(other, int) and not isinstance(other, bool) and other == 1:
            return self
        return self._combine(other, "//", self.value // _value(other))

    def __rfloordiv__(self, other):
        return self._combine(other, "//", _value(other) // self.value, True)

    def __mod__(self, other):
        return self._combine(other, "%", self.value % _value(other))

    def __rmod__(self, other):
        return self._combine(other, "%", _value(other) % self.value, True)

    def __neg__(self):
        return 0 - self

    def _refuse(self, *_):
        raise TypeError(
            f"internal: the size {self.text} is read at run time; decide by its .value "
            f"({self.value}) explicitly, or write the comparison into the code"
        )

    __bool__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _refuse
    __int__ = __index__ = _refuse
    __hash__ = object.__hash__


def ceil_div(a, b):
    """``a / b`` rounded up, of sizes written as numbers or read at run time.

    >>> ceil_div(7, 2), str(ceil_div(Dim("z0", 7), 2))
    (4, '((z0 + 1) // 2)')
    """
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return (a + (b - 1)) // b


def written(shape) -> tuple[int, ...]:
    """Sizes a stage writes into its code as numbers, by choice (a pool's extents, so
    that LLVM sees which taps reach the padding): a symbolic one is taken at its value,
    which a template's lowering (``templates``) keeps as a guard that it equals it.

    >>> written((3, 4))
    (3, 4)
    """
    return tuple(int(d) for d in shape)


def _size(x):
    return x if isinstance(x, SizeExpr) else int(x)


def _value(x) -> int:
    return x.value if isinstance(x, Dim) else x


def value(x) -> int:
    """The value of a size, whether written as a number or read at run time."""
    return _value(x)


class Sizes:
    """The run-time sizes of one stage function, in the order its emitter asked."""

    def __init__(self):
        self.values: list = []  # (ints, or sizes of symbols)

    def dim(self, value: int) -> Dim:
        """A new run-time size holding ``value`` (never shared with another of equal
        value: the code must not depend on two sizes being equal)."""
        name = f"{PARAMETER}{len(self.values)}"
        self.values.append(_size(value))
        return Dim(name, value)

    def dims(self, values) -> tuple[Dim, ...]:
        return tuple(self.dim(v) for v in values)

    def binding(self) -> list[str]:
        """The line unpacking the sizes at the top of the function (none without sizes)."""
        if not self.values:
            return []
        names = ", ".join(f"{PARAMETER}{k}" for k in range(len(self.values)))
        return [f"{names}{',' * (len(self.values) == 1)} = {PARAMETER}"]

    def argument(self) -> str:
        """The caller's tuple of the sizes."""
        items = ", ".join(map(str, self.values))
        return f"({items}{',' * (len(self.values) == 1)})"

    def numba_type(self) -> str:
        return f"nbt.UniTuple(nbt.int64, {len(self.values)})"
