"""The JSON form: round trips, external constants, and defensive loading."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc import limits
from nbyoc.errors import LimitError, LoadError
from nbyoc.ir import IRModule

from ..strategies import assert_same_results, graphs, random_inputs


def sample():
    x = nbyoc.var("x", (2, 3))
    w = nbyoc.const(np.arange(6, dtype=np.float32).reshape(3, 2))
    return nbyoc.function([x], [nbyoc.relu(x @ w), nbyoc.sum(x, axis=1) * 0.5])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_round_trip(f):
    g = nbyoc.from_json(nbyoc.to_json(f))
    assert nbyoc.structural_equal(f, g)
    args = random_inputs(f)
    with np.errstate(all="ignore"):
        assert_same_results(
            nbyoc.compile(g, backend="host")(*args), nbyoc.compile(f, backend="host")(*args)
        )


def test_json_is_plain_json_and_keeps_names():
    doc = json.loads(nbyoc.to_json(sample()))
    assert doc["format"] == "nbyoc-ir" and doc["version"] == 1
    assert doc["functions"][0]["params"][0] == {"name": "x", "shape": [2, 3], "dtype": "float32"}
    assert nbyoc.from_json(nbyoc.to_json(sample())).params[0].name_hint == "x"


def test_external_constants():
    arrays = []
    text = nbyoc.to_json(sample(), constants=arrays)
    assert "base64" not in text and len(arrays) == 2  # the weights and the 0.5
    assert nbyoc.structural_equal(nbyoc.from_json(text, constants=arrays), sample())
    with pytest.raises(LoadError, match="not supplied"):
        nbyoc.from_json(text)
    with pytest.raises(LoadError, match="expected Tensor"):
        nbyoc.from_json(text, constants=[np.zeros((2, 3), np.float32)])


def test_modules_round_trip():
    x = nbyoc.var("x", (3,))
    ext = nbyoc.function([x], [x + 1.0, x]).with_attrs(Compiler="t", global_symbol="t_0")
    a = nbyoc.var("a", (3,))
    call = nbyoc.ir.Call(nbyoc.ir.GlobalVar("t_0", ext.type), [a])
    mod = IRModule({"main": nbyoc.function([a], call[0] * call[1]), "t_0": ext})
    back = nbyoc.from_json(nbyoc.to_json(mod))
    assert isinstance(back, IRModule) and nbyoc.structural_equal(back, mod)
    assert back["t_0"].attrs["Compiler"] == "t"


def first_call(doc):
    return next(n for n in doc["functions"][0]["nodes"] if n["kind"] == "call")


def corrupt(doc_mutator):
    doc = json.loads(nbyoc.to_json(sample()))
    doc_mutator(doc)
    return json.dumps(doc)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "expected an object"),
        (corrupt(lambda d: d.update(version=99)), "newer than this nbyoc"),
        (corrupt(lambda d: d.update(format="other")), "not an nbyoc IR document"),
        (corrupt(lambda d: first_call(d).update(op="nope")), "unknown op"),
        (corrupt(lambda d: first_call(d).update(args=[7])), "earlier value"),
        (corrupt(lambda d: first_call(d).update(args=[True])), "earlier value"),
        (corrupt(lambda d: d["functions"][0].update(result=99)), "refers to no value"),
        (corrupt(lambda d: d["functions"][0]["params"][0].update(dtype="complex64")), "not supported"),
        (corrupt(lambda d: d["functions"][0]["params"][0].update(shape=[2, 4])), "inner dimensions"),
        (corrupt(lambda d: d["constants"][0].update(base64="AAAA")), "needs 24"),
        (corrupt(lambda d: d["constants"][0].update(base64="*")), "bad base64"),
        (corrupt(lambda d: d["functions"][0].pop("nodes")), "missing field 'nodes'"),
        (corrupt(lambda d: first_call(d).update(kind="loop")), "unknown node kind"),
        (corrupt(lambda d: d.update(kind="module")), "missing field 'name'"),
        (corrupt(lambda d: d["functions"][0].update(ret={"shape": [1], "dtype": "float32"})),
         "disagrees"),
    ],
)  # fmt: skip
def test_malformed_documents_raise_load_error(text, needle):
    with pytest.raises(LoadError) as info:
        nbyoc.from_json(text)
    assert needle in str(info.value)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_documents_load_correctly_or_raise_load_error(data):
    text = nbyoc.to_json(sample())
    pos = data.draw(st.integers(0, len(text) - 1))
    how = data.draw(st.sampled_from(["flip", "cut", "dup"]))
    if how == "flip":
        text = text[:pos] + data.draw(st.sampled_from(list('0129[]{}",:-.tfnx'))) + text[pos + 1 :]
    elif how == "cut":
        text = text[:pos]
    else:
        text = text[:pos] + text[pos:][:10] + text[pos:]
    try:
        g = nbyoc.from_json(text)
    except LoadError:
        return
    nbyoc.verify(g)  # whatever loads is a well-formed graph


def _deep_tuple_document(depth: int) -> str:
    """A function whose result is a tuple nested ``depth`` deep: a flat list of nodes,
    each a tuple of the one before (issue 35's 3,000-level document)."""
    nodes = [{"kind": "tuple", "fields": [k]} for k in range(depth)]
    function = {"params": [{"name": "x", "shape": [3], "dtype": "float32"}], "nodes": nodes,
                "result": depth, "attrs": {}}  # fmt: skip
    return json.dumps({"format": "nbyoc-ir", "version": 1, "kind": "function",
                       "functions": [function], "constants": []})  # fmt: skip


def test_a_tuple_nested_deeper_than_the_limit_is_refused_at_read_time():
    # issue 35: 3,000 levels passed from_json, then str, to_json and compile raised
    # RecursionError.
    with pytest.raises(LimitError, match=r"nodes\[100\]: a tuple type: nested 101 levels deep"):
        nbyoc.from_json(_deep_tuple_document(3000))
    f = nbyoc.from_json(_deep_tuple_document(100))
    assert nbyoc.structural_equal(nbyoc.from_json(nbyoc.to_json(f)), f)
    assert str(f).count("(") > 100  # printing recurses per level: within the limit, it works


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100000,
        _deep_tuple_document(1).replace('"attrs": {}', '"attrs": {}, "ret": ' +
                                         '{"fields": [' * 3000 + "{}" + "]}" * 3000),
    ],
)  # fmt: skip
def test_json_nested_beyond_the_limit_is_refused_before_it_is_decoded(text):
    with pytest.raises(LimitError, match=r"nested .* levels deep, more than the limit nesting"):
        nbyoc.from_json(text)


def test_a_stored_type_deeper_than_the_limit_is_refused_without_recursing():
    deep = {"shape": [3], "dtype": "float32"}
    for _ in range(121):
        deep = {"fields": [deep]}
    doc = json.loads(_deep_tuple_document(1))
    doc["functions"][0]["ret"] = deep
    # The JSON's brackets pass (a level of a type is two of them, with room for the rest
    # of the document); the reader refuses the type on its way down.
    with (
        pytest.raises(LimitError, match="stored tuple type: nested 121"),
        limits.override(nesting=120),
    ):
        nbyoc.from_json(json.dumps(doc))


@pytest.mark.parametrize(
    "mutate, needle",
    [
        # issue 35: these escaped as OverflowError and ValueError
        (lambda d: first_call(d).update(op="leaky_relu", args=[0], attrs={"alpha": 10**400}),
         "alpha must be a number"),
        (lambda d: d["constants"][0].update(base64="é" * 4), "bad base64 data"),
        (lambda d: d["functions"][0]["params"][0].update(name="x" * 10**6), "got 'xxxxx"),
    ],
)  # fmt: skip
def test_extreme_values_are_load_errors_with_short_messages(mutate, needle):
    with pytest.raises(LoadError) as info:
        nbyoc.from_json(corrupt(mutate))
    assert needle in str(info.value) and len(str(info.value)) < 1000
