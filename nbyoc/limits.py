"""Limits on what nbyoc will do for input it does not trust: ONNX models, archives, texts.

A model or an archive is data, but data can ask for a lot: a 95-byte ONNX model whose
``ConstantOfShape`` asks for 2**28 floats, an archive member that inflates a thousand
times, a tuple nested 3,000 deep. nbyoc checks each such request against a limit
*before* it allocates or decompresses anything, and refuses it with a ``LimitError``
(a ``ValueError``) that names the limit, the value found and how to raise the limit.

``LIMITS`` lists them with their defaults, chosen so that real models pass. Each is read,
first match wins, from an ``override`` in effect in this thread, ``set_limits`` (the
whole process), the environment variable ``NBYOC_LIMIT_<NAME>`` (an integer, optionally
with a binary suffix ``K``, ``M`` or ``G``: ``NBYOC_LIMIT_FOLDED_BYTES=1G``), or the default.

>>> import nbyoc
>>> get("nesting")
100
>>> with override(folded_bytes=1024):
...     check("folded_bytes", 4096, "a folded constant")
Traceback (most recent call last):
    ...
nbyoc.errors.LimitError: a folded constant: 4,096 bytes, more than the limit folded_bytes = 1,024; \
if the input is trusted, raise the limit: NBYOC_LIMIT_FOLDED_BYTES=<n> in the environment, or \
nbyoc.limits.set_limits(folded_bytes=<n>)
>>> get("folded_bytes") == LIMITS["folded_bytes"].default  # the override has ended
True
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import LimitError, NbyocError


@dataclass(frozen=True)
class Limit:
    """One limit: its name, its default, how a value is shown (a format with one field)
    and what it bounds."""

    name: str
    default: int
    shown: str
    bounds: str

    @property
    def env(self) -> str:
        """The environment variable that sets it for a process."""
        return "NBYOC_LIMIT_" + self.name.upper()


MIB, GIB = 1 << 20, 1 << 30

#: Every limit, by name.
LIMITS: dict[str, Limit] = {
    limit.name: limit
    for limit in (
        # Folding computes shape arithmetic and small constant subgraphs, whose results
        # are a few kilobytes; 256 MiB leaves room for folding a large weight (a cast
        # or a transpose of one) and refuses a few bytes of model asking for gigabytes.
        Limit("folded_bytes", 256 * MIB, "{:,} bytes",
              "each value from_onnx computes while importing (ConstantOfShape, Range, "
              "Expand or Tile of known values, any node whose inputs are all known)"),
        # Archive members are the constants' .npy files and JSON: the largest single
        # weight of a real model is well under 4 GiB.
        Limit("member_bytes", 4 * GIB, "{:,} bytes",
              "each member of an nbyoc archive, once decompressed"),
        # Weights compress about 1.1 times and a graph's JSON 4 to 20 times; only large
        # all-zero constants come near deflate's maximum of about 1,000 times. Reading
        # text (JSON, ExampleJSON) takes up to ~35 times its size in memory, so what an
        # archive inflates to is kept in proportion to the file.
        Limit("compression_ratio", 50, "inflates {:,} times",
              "how many times its own size an archive may inflate to, all members "
              "together (the first 16 MiB are exempt)"),
        # Graphs nest tuples two or three deep; Python's recursion limit (1,000 frames)
        # must stay above what the printer, serialiser and compiler use per level.
        Limit("nesting", 100, "nested {} levels deep",
              "the nesting of tuples in a type, of brackets in the text form, and of "
              "types in JSON, and of floordiv, min and max in a symbolic size"),
        # A symbolic size is a polynomial: products of sums expand, so a model's shape
        # arithmetic could ask for a size of millions of terms. The real models' largest
        # have a few; 256 leaves room and keeps every step on one in microseconds.
        Limit("size_terms", 256, "{:,} terms",
              "the terms of one symbolic size once expanded (nbyoc.ir.symbols)"),
    )
}  # fmt: skip

#: Limits set for the whole process by ``set_limits``.
_PROCESS: dict[str, int] = {}
#: Limits set by ``override`` in the current thread (or task).
_OVERRIDES: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "nbyoc_limits", default=None
)
_SIZE = re.compile(r"\s*(\d{1,20})\s*([KMG]?)i?B?\s*\Z", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 1 << 10, "M": MIB, "G": GIB}
#: Environment values already read (raw text -> value), so a check costs a dict lookup.
_PARSED: dict[str, int] = {}


def _limit(name: str) -> Limit:
    if name not in LIMITS:
        raise NbyocError(f"no limit named {name!r}; the limits are {', '.join(LIMITS)}")
    return LIMITS[name]


def _valid(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NbyocError(f"limit {name} must be a non-negative int, got {value!r}")
    return value


def _from_env(limit: Limit) -> int | None:
    raw = os.environ.get(limit.env)
    if raw is None:
        return None
    if raw not in _PARSED:
        m = _SIZE.match(raw)
        if m is None:
            raise NbyocError(
                f"{limit.env}={raw!r} is not a limit: give a non-negative integer, "
                f"optionally with a suffix K, M or G (1G = 2**30)"
            )
        _PARSED[raw] = int(m.group(1)) * _SUFFIX[m.group(2).upper()]
    return _PARSED[raw]


def get(name: str) -> int:
    """The value of limit ``name`` now (see the module docstring for where it comes from)."""
    limit = _limit(name)
    value = (_OVERRIDES.get() or {}).get(name)
    if value is None:
        value = _PROCESS.get(name)
    if value is None:
        value = _from_env(limit)
    return limit.default if value is None else value


def set_limits(**values: int | None) -> dict[str, int | None]:
    """Set limits for the whole process (``None`` goes back to the environment variable
    or the default); returns the previous settings, to restore them later.

    >>> previous = set_limits(member_bytes=2**33)
    >>> get("member_bytes")
    8589934592
    >>> _ = set_limits(**previous)
    """
    checked = {name: None if v is None else _valid(name, v) for name, v in values.items()}
    for name in checked:
        _limit(name)
    previous = {name: _PROCESS.get(name) for name in checked}
    for name, value in checked.items():
        if value is None:
            _PROCESS.pop(name, None)
        else:
            _PROCESS[name] = value
    return previous


@contextlib.contextmanager
def override(**values: int) -> Iterator[None]:
    """Set limits while the ``with`` block runs, in this thread only (see the module
    docstring's example)."""
    for name, value in values.items():
        _limit(name)
        _valid(name, value)
    token = _OVERRIDES.set({**(_OVERRIDES.get() or {}), **values})
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def check(name: str, value: int, what: str) -> None:
    """Raise ``LimitError`` if ``value`` is more than limit ``name``; ``what`` names the
    thing at fault (``"ConstantOfShape node 'c'"``, ``"archive member 'module.json'"``)."""
    maximum = get(name)
    if value > maximum:
        raise LimitError(refusal(name, value, maximum, what), name, value, maximum)


#: A JSON string (escapes included), and anything but a bracket: removed before counting.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
#: Brackets of a JSON document's own structure (document, function, node, attributes),
#: beyond the two (an object and a list) each level of a tuple type takes.
JSON_FRAME = 8


def check_json_nesting(text: str | bytes, what: str) -> None:
    """Refuse JSON ``text`` nested deeper than the limit ``nesting`` allows (each level
    of a tuple type is an object and a list; ``JSON_FRAME`` brackets more for the rest
    of the document), before ``json.loads`` recurses into it. Counted in C (regular
    expressions and NumPy), so a large document costs little.

    >>> check_json_nesting('{"fields": [{"fields": [{"shape": [2]}]}]}', "a type")
    >>> with override(nesting=2):
    ...     check_json_nesting("[" * 20 + "]" * 20, "a document")
    Traceback (most recent call last):
        ...
    nbyoc.errors.LimitError: a document: nested 6 levels deep, more than the limit nesting = 2; ...
    """
    import numpy as np

    if not isinstance(text, (str, bytes, bytearray)):
        return  # not JSON text at all: json.loads says so
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    brackets = np.frombuffer(_NOT_BRACKET.sub(b"", _JSON_STRING.sub(b"", data)), np.uint8)
    steps = np.isin(brackets, (ord("["), ord("{"))).astype(np.int64) * 2 - 1
    deepest = int(np.cumsum(steps).max(initial=0))
    check("nesting", -(-max(deepest - JSON_FRAME, 0) // 2), what)


def refusal(name: str, value: int, maximum: int, what: str) -> str:
    """The message of a refusal by limit ``name``: what, how much, and how to raise it."""
    limit = _limit(name)
    return (
        f"{what}: {limit.shown.format(value)}, more than the limit {name} = {maximum:,}; if "
        f"the input is trusted, raise the limit: {limit.env}=<n> in the environment, or "
        f"nbyoc.limits.set_limits({name}=<n>)"
    )
