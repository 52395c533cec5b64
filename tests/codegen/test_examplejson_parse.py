"""Reading ExampleJSON that was not written by nbyoc: every problem is a ``ParseError``
naming the line, with a message of bounded length whatever the input."""

from __future__ import annotations

import pytest

from nbyoc.codegen.examplejson.parse import parse_examplejson
from nbyoc.errors import ParseError

HEAD = "subgraph_0\n  input 0 2\n"


@pytest.mark.parametrize(
    "text, needle",
    [
        # issue 35: non-ASCII data escaped as ValueError from base64
        (HEAD + "  const 1 shape: 2 dtype: float32 data: AAAAAAAAAAé=\n  add 2 inputs: 0 1 shape: 2",
         "line 3: bad base64 data"),
        (HEAD + "  add 1 inputs: 0 0 shape: " + "9" * 5000, "expected a dimension"),
        ("\x00" * 1_000_000, "line 1: subgraph name"),
        (HEAD + "  " + "x" * 1_000_000 + " 1 inputs: 0 shape: 2", "unknown op 'xxxxx"),
    ],
)  # fmt: skip
def test_malformed_text_is_a_parse_error_with_a_short_message(text, needle):
    with pytest.raises(ParseError) as info:
        parse_examplejson(text)
    assert needle in str(info.value)
    assert len(str(info.value)) < 2000  # a huge token is quoted cut short
