"""``nbyoc.limits``: where a limit's value comes from, and what a refusal says."""

from __future__ import annotations

import threading

import pytest

import nbyoc
from nbyoc import limits
from nbyoc.errors import LimitError, NbyocError


def test_every_limit_has_a_default_an_environment_variable_and_a_meaning():
    assert set(limits.LIMITS) == {"folded_bytes", "member_bytes", "compression_ratio", "nesting",
                                  "size_terms"}  # fmt: skip
    for name, limit in limits.LIMITS.items():
        assert limits.get(name) == limit.default > 0
        assert limit.env == "NBYOC_LIMIT_" + name.upper()
        assert limit.bounds and "{" in limit.shown


@pytest.mark.parametrize(
    "raw, value", [("1024", 1024), ("2K", 2048), ("3M", 3 << 20), ("1G", 1 << 30), (" 5 ", 5)]
)
def test_the_environment_sets_a_limit(monkeypatch, raw, value):
    monkeypatch.setenv("NBYOC_LIMIT_FOLDED_BYTES", raw)
    assert limits.get("folded_bytes") == value


def test_a_malformed_environment_value_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("NBYOC_LIMIT_NESTING", "lots")
    with pytest.raises(NbyocError, match="NBYOC_LIMIT_NESTING='lots' is not a limit"):
        limits.get("nesting")


def test_set_limits_overrides_the_environment_until_unset(monkeypatch):
    monkeypatch.setenv("NBYOC_LIMIT_MEMBER_BYTES", "1M")
    previous = limits.set_limits(member_bytes=5)
    try:
        assert previous == {"member_bytes": None}
        assert limits.get("member_bytes") == 5
    finally:
        limits.set_limits(**previous)
    assert limits.get("member_bytes") == 1 << 20


def test_override_nests_ends_with_its_block_and_stays_in_its_thread():
    seen = []
    with limits.override(nesting=7):
        with limits.override(nesting=3, folded_bytes=9):
            assert (limits.get("nesting"), limits.get("folded_bytes")) == (3, 9)
            other = threading.Thread(target=lambda: seen.append(limits.get("nesting")))
            other.start()
            other.join()
        assert limits.get("nesting") == 7
        with pytest.raises(ZeroDivisionError), limits.override(nesting=1):
            raise ZeroDivisionError
        assert limits.get("nesting") == 7
    assert limits.get("nesting") == 100
    assert seen == [100]


@pytest.mark.parametrize("values", [{"nesting": -1}, {"nesting": 1.5}, {"nesting": True},
                                    {"no_such_limit": 3}])  # fmt: skip
def test_bad_settings_are_refused(values):
    with pytest.raises(NbyocError):
        limits.set_limits(**values)
    with pytest.raises(NbyocError), limits.override(**values):
        pass


def test_a_refusal_is_a_value_error_naming_the_limit_the_value_and_the_way_out():
    with limits.override(folded_bytes=1000):
        with pytest.raises(LimitError) as caught:
            limits.check("folded_bytes", 4096, "Range node 'r'")
        limits.check("folded_bytes", 1000, "at the limit")  # the limit itself is allowed
    error = caught.value
    assert isinstance(error, ValueError) and isinstance(error, nbyoc.NbyocError)
    assert (error.limit, error.value, error.maximum) == ("folded_bytes", 4096, 1000)
    message = str(error)
    for part in ("Range node 'r'", "4,096 bytes", "folded_bytes = 1,000",
                 "NBYOC_LIMIT_FOLDED_BYTES=<n>", "nbyoc.limits.set_limits(folded_bytes=<n>)"):  # fmt: skip
        assert part in message
    moved = error.within("model.onnx")
    assert str(moved).startswith("model.onnx: Range node") and moved.limit == "folded_bytes"


@pytest.mark.parametrize(
    "text, deepest",
    [
        ('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', 1),  # brackets in strings do not count
        ('{"a": "\\"[[[[[[[[[[[[[[[[[[[[[[[[["}', 1),  # nor after an escaped quote
        ("[" * 30 + "]" * 30, 30),
        (b"{" + b'"k":[' * 40 + b"1" + b"]" * 40 + b"}", 41),
    ],
)
def test_json_nesting_counts_brackets_outside_strings(text, deepest):
    allowed = -(-max(deepest - limits.JSON_FRAME, 0) // 2)
    with limits.override(nesting=allowed):
        limits.check_json_nesting(text, "doc")
    if allowed:
        with limits.override(nesting=allowed - 1), pytest.raises(LimitError):
            limits.check_json_nesting(text, "doc")
