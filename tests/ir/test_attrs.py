"""Typed attribute specs: every kind is checked, normalised, and survives the text form,
JSON and ExampleJSON unchanged (including NaN, infinities, -0.0, None and empty tuples)."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.examplejson import to_examplejson
from nbyoc.codegen.examplejson.parse import parse_examplejson
from nbyoc.errors import NbyocTypeError, ParseError
from nbyoc.ir import op as op_registry
from nbyoc.ir.attrs import KINDS, Attr
from nbyoc.ir.dtypes import DTYPES
from nbyoc.ir.op import Op
from nbyoc.ir.ops.elementwise import same_type

SPECS = {
    "count": Attr("int", 0),
    "alpha": Attr("float", 1.0),
    "flag": Attr("bool", False),
    "mode": Attr("str", "constant", choices=("constant", "reflect", "edge")),
    "to": Attr("dtype", "float32"),
    "pads": Attr("ints", ()),
    "scales": Attr("floats", None),
    "limit": Attr("int", None),
    "extent": Attr("sizes", ()),
    "names": Attr("strs", None),
}
#: Sizes as a model's shape arithmetic computes them (symbols, sums, products, floors).
SIZES = [0, 7, -1, "n", "2*n + 1", "(n + 1) // 2", "min(n, 4)", "max(m, n - 1)", "n*m - 3"]


def test_every_kind_is_exercised():
    # (a function attribute, a control-flow op's body: tests/ir/test_control.py)
    assert {s.kind for s in SPECS.values()} == set(KINDS) - {"function"}


@pytest.fixture
def attrs_op(monkeypatch):
    """A host-only op with one attribute of every kind (it ignores them)."""
    op = Op("test_attrs", 1, same_type, lambda x, **_: x.copy(), "elementwise",
            "identity with attributes", attrs=SPECS)  # fmt: skip
    monkeypatch.setitem(op_registry._REGISTRY, "test_attrs", op)
    return op


def _round_trips(attrs):
    x = nbyoc.var("x", (2, 3))
    f = nbyoc.function([x], nbyoc.call_op("test_attrs", x, **attrs))
    ext = f.with_attrs(global_symbol="subgraph_0")
    return {
        "built": f.body.attrs,
        "text": nbyoc.parse(str(f)).body.attrs,
        "json": nbyoc.from_json(nbyoc.to_json(f)).body.attrs,
        "examplejson": parse_examplejson(to_examplejson(ext))["subgraph_0"].body.attrs,
    }


def _same(a, b) -> bool:
    """Equal, with NaN equal to NaN and -0.0 told from 0.0."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float):
        return isinstance(b, float) and (
            (math.isnan(a) and math.isnan(b))
            or (a == b and math.copysign(1, a) == math.copysign(1, b))
        )
    return type(a) is type(b) and a == b


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.integers(-(2**63), 2**63 - 1),
    alpha=finite_or_not,
    flag=st.booleans(),
    mode=st.sampled_from(["constant", "reflect", "edge"]),
    to=st.sampled_from(DTYPES),
    pads=st.lists(st.integers(-100, 100), max_size=6).map(tuple),
    scales=st.none() | st.lists(finite_or_not, max_size=4).map(tuple),
    limit=st.none() | st.integers(0, 10),
    extent=st.lists(st.sampled_from(SIZES), max_size=4).map(
        lambda sizes: tuple(nbyoc.ir.symbols.size(s) for s in sizes)
    ),
    names=st.none()
    | st.lists(st.sampled_from(["Sigmoid", "None", "a_b.c-d", "x1"]), max_size=4).map(tuple),
)
def test_every_kind_round_trips_through_every_format(attrs_op, **attrs):
    forms = _round_trips(attrs)
    for form, got in forms.items():
        for key, value in attrs.items():
            assert _same(got[key], value), (form, key, got[key], value)


def test_values_are_normalised_by_kind(attrs_op):
    x = nbyoc.var("x", (2,))
    call = nbyoc.call_op("test_attrs", x, alpha=2, pads=3, scales=[1, 2], to=np.float64)
    assert call.attrs["alpha"] == 2.0 and isinstance(call.attrs["alpha"], float)
    assert call.attrs["pads"] == (3,) and call.attrs["scales"] == (1.0, 2.0)
    assert call.attrs["to"] == "float64"
    assert call.attrs["mode"] == "constant"  # the default


@pytest.mark.parametrize(
    "attrs, message",
    [
        ({"count": 1.5}, "count must be an int"),
        ({"count": True}, "count must be an int"),
        ({"alpha": "x"}, "alpha must be a number"),
        ({"flag": 1}, "flag must be True or False"),
        ({"mode": "wrap"}, "mode must be one of 'constant', 'reflect', 'edge'"),
        ({"to": "complex64"}, "to must be a supported dtype"),
        ({"pads": "12"}, "pads must be an int or a sequence of ints"),
        ({"pads": None}, "pads must be an int or a sequence of ints, got None"),
        ({"limit": 2.0}, "limit must be an int or None"),
        ({"extent": [1.5]}, "extent must be a sequence of ints or symbolic sizes"),
        ({"names": "Tanh"}, "names must be a sequence of words or None"),
        ({"names": ["two words"]}, "names must be a sequence of words or None"),
        ({"names": ["Tanh", "none"]}, "names must be a sequence of words or None"),
    ],
)
def test_a_wrong_value_is_a_type_error_naming_the_attribute(attrs_op, attrs, message):
    with pytest.raises(NbyocTypeError, match=f"test_attrs: attribute {message}"):
        nbyoc.call_op("test_attrs", nbyoc.var("x", (2,)), **attrs)


def test_a_required_attribute_must_be_given():
    with pytest.raises(NbyocTypeError, match="reshape: attribute newshape is required"):
        nbyoc.call_op("reshape", nbyoc.var("x", (2,)))


def test_an_op_must_declare_its_attributes_with_specs():
    with pytest.raises(TypeError, match="attribute 'k' needs a spec"):
        op_registry.register_op(
            Op("test_bad_attrs", 1, same_type, np.copy, "elementwise", "", attrs={"k": 1})
        )
    assert "test_bad_attrs" not in nbyoc.ir.list_ops()


@pytest.mark.parametrize(
    "tokens, message",
    [
        ("count: 1.5", "is not an integer"),
        ("alpha: 1e", "is not a number"),
        ("flag: 2", "is not 0 or 1"),
        ("mode: wrap", "must be one of"),
        ("to: float128", "not supported"),
        ("count: 1 2", "takes one value"),
        ("pads: none", "is not an integer"),
    ],
)
def test_examplejson_refuses_malformed_attribute_values(attrs_op, tokens, message):
    text = f"subgraph_0\n  input 0 2\n  test_attrs 1 inputs: 0 shape: 2 {tokens}\n"
    with pytest.raises(ParseError, match=message):
        parse_examplejson(text)


def test_json_refuses_a_malformed_float(attrs_op):
    x = nbyoc.var("x", (2,))
    text = nbyoc.to_json(nbyoc.function([x], nbyoc.call_op("test_attrs", x, alpha=float("inf"))))
    assert '"inf"' in text  # portable JSON: no bare Infinity
    with pytest.raises(nbyoc.errors.LoadError, match="alpha must be a number"):
        nbyoc.from_json(text.replace('"inf"', '"lots"'))


def test_an_integer_too_large_for_a_float_attribute_is_a_type_error():
    # issue 35: 10**400 raised OverflowError through from_json and load_module.
    with pytest.raises(NbyocTypeError, match="attribute alpha must be a number"):
        Attr("float", 0.0).normalise("leaky_relu", "alpha", 10**400)
