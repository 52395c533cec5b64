"""A Griffe extension for the API pages (mkdocs.yml, mkdocstrings' ``extensions``):
docstrings hold doctest examples (``>>>`` lines and their output), which Markdown would
read as nested block quotes; each such run of lines becomes a fenced ``pycon`` block."""

from __future__ import annotations

import re

import griffe

#: A doctest example: a ``>>>`` line, its ``...`` continuations and its output, up to
#: a blank line.
EXAMPLE = re.compile(r"(?m)^([ \t]*)>>> .*(?:\n(?!\s*$).*)*")


def fence(text: str) -> str:
    r"""``text`` with every doctest example fenced.

    >>> fence("Sum:\n\n" + ">" * 3 + " 1 + 1\n2\n\nDone.").splitlines()[2:6]
    ['```pycon', '>>> 1 + 1', '2', '```']
    """

    def wrap(match: re.Match) -> str:
        indent = match.group(1)
        return f"{indent}```pycon\n{match.group(0)}\n{indent}```"

    return EXAMPLE.sub(wrap, text)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence(obj.docstring.value)
