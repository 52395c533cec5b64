"""Deterministic mutations of reader inputs, for the fuzz tests (``tests/fuzzing.py``).

Each mutator takes a ``random.Random`` and an input and returns ``(description, mutated)``;
the description says what changed, so a failing case can be understood and rebuilt. The
values put in are the ones that found bugs: sizes far too large, negative, zero, NaN and
infinity, numbers longer than Python converts, deep nesting, wrong types, non-ASCII text.

>>> import random
>>> what, out = mutate_bytes(random.Random(1), b"hello world")
>>> isinstance(what, str) and isinstance(out, bytes)
True
>>> what, out = mutate_json(random.Random(2), b'{"a": [1, 2], "b": "x"}')
>>> isinstance(out, bytes)
True
"""

from __future__ import annotations

import json
import random
import re

#: Numbers that are too large, negative, zero, not finite or beyond 64 bits.
EXTREME_NUMBERS = [0, -1, 1, 2, 3, 2**28, 2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1, 2**63,
                   2**64, -(2**63) - 1, 10**30, -(10**30), 10**400, 0.5, -0.0, 1e-320, 1e308,
                   float("inf"), float("-inf"), float("nan")]  # fmt: skip
#: Text that is empty, long, non-ASCII, has control characters or a lone surrogate.
EXTREME_STRINGS = ["", "x" * 5000, "é", "\u0000", "\ud800", "float32\n", "O", "..", "/etc/passwd",
                   "__import__('os')", "int64", "bool", "complex64", "float16", "nan"]  # fmt: skip
DEEP = 3000
LONG_NUMBER = "9" * 5000
#: Placeholders for values ``json.dumps`` cannot write (an integer of 5,000 digits, more
#: than Python converts by default; lists and tuple types nested 3,000 deep, beyond its
#: recursion limit), replaced in the text after it.
MARKS = {
    "@@long-number@@": LONG_NUMBER,
    "@@deep-list@@": "[" * DEEP + "]" * DEEP,
    "@@deep-type@@": '{"fields":[' * DEEP + '{"shape":[2],"dtype":"float32"}' + "]}" * DEEP,
}


def _deep_list(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _deep_type(depth: int):
    value: dict = {"shape": [2], "dtype": "float32"}
    for _ in range(depth):
        value = {"fields": [value]}
    return value


def extreme_value(rng: random.Random):
    """A JSON value of one of the kinds that break readers (see the module docstring)."""
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(EXTREME_NUMBERS)
    if kind == 1:
        return rng.choice(EXTREME_STRINGS)
    if kind == 2:
        return rng.choice([None, True, False, [], {}, [[]], [None], {"": 0}])
    if kind == 3:
        return rng.choice([_deep_list(150), _deep_type(150), _deep_type(99), _deep_type(101)])
    if kind == 4:
        return rng.choice(list(MARKS))
    return [rng.choice(EXTREME_NUMBERS) for _ in range(rng.randrange(1, 8))]


# -- bytes ------------------------------------------------------------------------------


def mutate_bytes(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """One byte-level change: a bit flip, an extreme byte, a cut, an insertion, a
    deleted or a repeated span."""
    if not data:
        return "empty input", b"\x00"
    n = len(data)
    at = rng.randrange(n)
    kind = rng.randrange(6)
    if kind == 0:
        bit = rng.randrange(8)
        return f"bit {bit} of byte {at} flipped", data[:at] + bytes([data[at] ^ (1 << bit)]) + data[
            at + 1 :
        ]
    if kind == 1:
        value = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01])
        return f"byte {at} set to {value:#x}", data[:at] + bytes([value]) + data[at + 1 :]
    if kind == 2:
        return f"cut at byte {at}", data[:at]
    if kind == 3:
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        return f"{len(junk)} random bytes inserted at {at}", data[:at] + junk + data[at:]
    end = min(n, at + rng.randrange(1, 65))
    if kind == 4:
        return f"bytes {at}:{end} deleted", data[:at] + data[end:]
    return f"bytes {at}:{end} repeated", data[:end] + data[at:end] + data[end:]  # fmt: skip


# -- JSON -------------------------------------------------------------------------------


def _places(doc, path=()):
    """Every value's path in a JSON document, containers included."""
    yield path
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _places(value, (*path, key))
    elif isinstance(doc, list):
        for k, value in enumerate(doc):
            yield from _places(value, (*path, k))


def _replace(doc, path, value):
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def _parent(doc, path):
    for key in path[:-1]:
        doc = doc[key]
    return doc


def mutate_json(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """One change to a JSON document's structure: a value replaced by an extreme one, a
    key deleted or renamed, a list element repeated or dropped. Not JSON: a byte change."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # already broken, or nested beyond json's reach
        return mutate_bytes(rng, data)
    places = list(_places(doc))
    path = rng.choice(places)
    kind = rng.randrange(5)
    parent = _parent(doc, path) if path else None
    if kind == 1 and isinstance(parent, dict):
        del parent[path[-1]]
        what = f"deleted {path}"
    elif kind == 2 and isinstance(parent, dict):
        parent[rng.choice(["kind", "shape", "fields", "op", "x", "", "external"])] = parent.pop(
            path[-1]
        )
        what = f"renamed the key of {path}"
    elif kind == 3 and isinstance(parent, list):
        parent.insert(path[-1], parent[path[-1]])
        what = f"repeated {path}"
    elif kind == 4 and isinstance(parent, list):
        del parent[path[-1]]
        what = f"dropped {path}"
    else:
        value = extreme_value(rng)
        doc = _replace(doc, path, value)
        shown = json.dumps(value)
        what = f"{path} = {shown if len(shown) < 40 else shown[:30] + '... (long or deep)'}"
    text = json.dumps(doc)
    for mark, replacement in MARKS.items():
        text = text.replace(f'"{mark}"', replacement)
    return what, text.encode("utf-8", "surrogatepass")


# -- text -------------------------------------------------------------------------------

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[%@]?\w+|\S')


def mutate_tokens(rng: random.Random, data: bytes, names: list[str]) -> tuple[str, bytes]:
    """One change to a token of a text (the IR text form or ExampleJSON): replaced by an
    extreme number, another name from ``names``, a bad string, deep brackets; deleted
    or repeated. Lines are kept, so line-based formats stay mostly valid around it."""
    text = data.decode("utf-8", "surrogateescape")
    tokens = list(_TOKEN.finditer(text))
    if not tokens:
        return mutate_bytes(rng, data)
    m = rng.choice(tokens)
    kind = rng.randrange(8)
    if kind == 0:
        new = rng.choice(["0", "-1", "2", "268435456", "4294967297", "9223372036854775808",
                          "1e999", "-1e999", "nan", "inf", "-inf", "0.5", "1" + "0" * 400,
                          LONG_NUMBER])  # fmt: skip
    elif kind == 1:
        new = rng.choice(names)
    elif kind == 2:
        new = rng.choice(['"\\q"', '"é"', '"\\ud800"', '""', '"a b"', "é", "\u00a0", "١٢"])
    elif kind == 3:
        new = rng.choice(["(" * DEEP, "[" * DEEP, "(" * 150 + m.group() + ")" * 150])
    elif kind == 4:
        new = ""
    elif kind == 5:
        new = m.group() + " " + m.group()
    elif kind == 6:
        new = m.group() + rng.choice([",", "(", ")", "[", "]", "=", ":", "\n"])
    else:
        return mutate_bytes(rng, data)
    shown = new if len(new) < 30 else f"{new[:10]}... ({len(new)} chars)"
    what = f"token {m.group()[:20]!r} at {m.start()} -> {shown!r}"
    mutated = text[: m.start()] + new + text[m.end() :]
    return what, mutated.encode("utf-8", "surrogateescape")


def mutations(rng: random.Random, seeds: list[tuple[str, bytes]], count: int, mutate):
    """The seeds as they are, then ``count`` cases ``(description, bytes)``: each a seed
    with one to three mutations by ``mutate(rng, data) -> (what, data)``, seeds taken in
    turn."""
    cases = [(f"{name}: as it is", data) for name, data in seeds]
    for k in range(count):
        name, data = seeds[k % len(seeds)]
        steps = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            what, data = mutate(rng, data)
            steps.append(what)
        cases.append((f"{name}: " + "; ".join(steps), data))
    return cases
