"""``load_module`` on files nbyoc did not write: every problem is an ``NbyocError``; a
refusal by a limit keeps its type (``LimitError``) and names the file."""

from __future__ import annotations

import json

import pytest

import nbyoc
from nbyoc.errors import LimitError, LoadError
from nbyoc.runtime.module import save_function


def saved(func) -> dict:
    return json.loads(save_function("llvm", 1, func, {"fuse": True, "parallel_threshold": 64}))


def test_a_saved_module_nested_beyond_the_limit_is_refused_before_it_is_decoded(tmp_path):
    x = nbyoc.var("x", (3,))
    doc = saved(nbyoc.function([x], x * 2.0))
    text = json.dumps(doc).replace(
        '"options"', '"deep": ' + "[" * 3000 + "]" * 3000 + ', "options"'
    )
    (tmp_path / "m.bin").write_text(text)
    with pytest.raises(LimitError, match=r"m\.bin: a saved llvm module: nested \d+ levels deep"):
        nbyoc.load_module(tmp_path / "m.bin", "llvm")


def test_an_attribute_too_large_for_a_float_is_a_load_error(tmp_path):
    # issue 35: load_module let OverflowError through.
    x = nbyoc.var("x", (3,))
    doc = saved(nbyoc.function([x], nbyoc.leaky_relu(x, alpha=0.5)))
    call = next(n for n in doc["function"]["functions"][0]["nodes"] if n["kind"] == "call")
    call["attrs"]["alpha"] = 10**400
    (tmp_path / "m.bin").write_text(json.dumps(doc))
    with pytest.raises(LoadError, match="attribute alpha must be a number"):
        nbyoc.load_module(tmp_path / "m.bin", "llvm")
