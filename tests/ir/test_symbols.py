"""Symbolic sizes: the canonical form computes what Python's integers compute, prints
and parses back, survives the text form and JSON in types and attributes; type rules
work on symbols and agree with the concrete rules once the sizes are known."""

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import NbyocTypeError, ParseError, UndecidableSizeError
from nbyoc.ir.specialize import generalize, specialize
from nbyoc.ir.symbols import (
    SizeExpr,
    collecting,
    floordiv,
    maximum,
    minimum,
    mod,
    parse_size,
    require,
    size,
    substitute,
)
from nbyoc.ir.types import TensorType

N, M = size("n"), size("m")


@st.composite
def expressions(draw, depth=3):
    """(expression, its value under the drawn binding, the binding)."""
    binding = draw(st.fixed_dictionaries({"n": st.integers(1, 40), "m": st.integers(1, 40)}))

    def build(level):
        if level == 0 or draw(st.booleans()):
            leaf = draw(st.sampled_from(["n", "m", "k"]))
            if leaf == "k":
                k = draw(st.integers(-6, 9))
                return k, k
            return size(leaf), binding[leaf]
        (a, av), (b, bv) = build(level - 1), build(level - 1)
        op = draw(st.sampled_from("+-*/%<>"))
        if op in "/%":
            c = draw(st.sampled_from([1, 2, 3, 5, -2]))
            return (floordiv(a, c), av // c) if op == "/" else (mod(a, abs(c)), av % abs(c))
        if op == "<":
            return minimum(a, b), min(av, bv)
        if op == ">":
            return maximum(a, b), max(av, bv)
        return {"+": (a + b, av + bv), "-": (a - b, av - bv), "*": (a * b, av * bv)}[op]

    expr, value = build(depth)
    return expr, value, binding


@settings(max_examples=400, deadline=None)
@given(expressions())
def test_the_canonical_form_computes_what_python_computes(case):
    expr, value, binding = case
    assert substitute(expr, binding) == value
    if isinstance(expr, SizeExpr):
        low, high = expr.bounds()
        assert low <= value <= high
        assert parse_size(str(expr)) == expr  # prints and parses back to the same form
        assert pickle.loads(pickle.dumps(expr)) == expr
    else:
        assert expr == value  # a size with no symbol left is a plain int


def test_equal_sizes_have_one_form():
    assert (N + 1) * 2 - 2 == 2 * N
    assert (N * M + M * N) // 2 == M * N
    assert (2 * N + 3) // 2 == N + 1
    assert minimum(N, 1 << 62) == N and maximum(0, N - 1) == N - 1
    assert hash(parse_size("n*2")) == hash(2 * N)
    assert N != M and N + 1 != N
    assert {TensorType(("n", 3)), TensorType((N, 3))} == {TensorType(("n", 3))}
    assert TensorType(("n", 3)) != TensorType(("m", 3))


def test_an_undecidable_question_raises_instead_of_guessing():
    assert N >= 1 and N + 1 > 1 and not N < 1  # symbols are sizes of at least 1
    with pytest.raises(UndecidableSizeError, match=r"whether n > 3"):
        _ = N > 3
    with pytest.raises(UndecidableSizeError, match="no value at compile time"):
        range(N)
    with pytest.raises(UndecidableSizeError):
        int(N * 2)


@pytest.mark.parametrize(
    "text, message",
    [("n +", "expected more"), ("min(n)", "takes two sizes"), ("2n", "unexpected 'n'"),
     ("n $ 2", "cannot read size"), ("(" * 200 + "n" + ")" * 200, "nests too deeply"),
     ("fn", "identifier"), ("n // 0", "divided by zero")],
)  # fmt: skip
def test_malformed_sizes_are_clear_errors(text, message):
    with pytest.raises((ParseError, NbyocTypeError), match=message):
        parse_size(text)


def test_symbolic_types_survive_the_text_form_json_and_archives(tmp_path):
    x = nbyoc.var("x", ("n", 3))
    y = nbyoc.var("y", ("2*n + 1", "(m + 1) // 2"))
    z = nbyoc.reshape(x, (-1,))
    f = nbyoc.function([x, y], [nbyoc.exp(z), y * 2.0])
    assert str(f.params[1].type) == "Tensor[(2*n + 1, floordiv(m + 1, 2)), float32]"
    assert f.ret_type.fields[0] == TensorType((3 * N,), "float32")
    for back in (nbyoc.parse(str(f)), nbyoc.from_json(nbyoc.to_json(f))):
        assert back.type == f.type
        assert nbyoc.structural_equal(back, f)


def test_symbolic_attributes_survive_the_text_form_and_json():
    x = nbyoc.var("x", ("n", 6))
    y = nbyoc.call_op("reshape", x, newshape=(N * 2, 3))
    f = nbyoc.function([x], y)
    assert y.attrs["newshape"] == (2 * N, 3)
    for back in (nbyoc.parse(str(f)), nbyoc.from_json(nbyoc.to_json(f))):
        assert back.body.attrs["newshape"] == (2 * N, 3)
        assert back.ret_type == TensorType((2 * N, 3))


def test_constraints_are_recorded_and_explain_themselves():
    x, y = nbyoc.var("x", ("n", 3)), nbyoc.var("y", ("m", 3))
    call = x + y
    assert call.type == TensorType(("n", 3))
    (constraint,) = call.assumes
    assert constraint.holds({"n": 4, "m": 1}) and constraint.holds({"n": 4, "m": 4})
    assert not constraint.holds({"n": 4, "m": 3})
    assert constraint.explain({"n": 4, "m": 3}) == (
        "add at axis -2: size m must be 1 or equal n to broadcast (it is 3, not 4); "
        "got m = 3, n = 4"
    )
    # a size meeting an int gives the int; what is settled now is not recorded
    assert (nbyoc.var("a", ("n", 1)) + nbyoc.var("b", (5, 1))).type.shape == (5, 1)
    assert (nbyoc.var("a", ("n",)) + nbyoc.var("b", ("n",))).assumes == ()
    with pytest.raises(NbyocTypeError, match="do not broadcast"):
        nbyoc.var("a", ("n", 4)) + nbyoc.var("b", (3,))


def test_require_decides_what_it_can_and_refuses_outside_a_call():
    with collecting() as found:
        require("divisible", 4 * N, 2, where="w")  # provable
        require("at_least", N + 2, 3, where="w")  # provable: n >= 1
        require("at_least", N + 1, 3, where="w")  # depends on n
    assert [c.kind for c in found] == ["at_least"]
    with pytest.raises(NbyocTypeError, match="must be a multiple"):
        require("divisible", 2 * N + 1, 2, where="w")
    with pytest.raises(UndecidableSizeError, match="cannot check at compile time"):
        require("equal", N, M, where="w")


def test_symbolic_shape_rules_for_windows_slices_and_reshapes():
    x = nbyoc.var("x", ("n", 3, "h", "w"))
    w = nbyoc.const(nbyoc.ir.nodes.np.ones((8, 3, 3, 3), "float32"))
    y = nbyoc.conv(x, w, strides=(2, 2), pads=(1, 1, 1, 1))
    assert y.shape == (N, 8, floordiv(size("h") - 1, 2) + 1, floordiv(size("w") - 1, 2) + 1)
    assert y.assumes == ()  # h + 2 >= 3 holds for every h >= 1
    valid = nbyoc.conv(x, w)
    assert [str(c.args[0]) for c in valid.assumes] == ["h", "w"]  # h >= 3 does not
    same = nbyoc.conv(x, w, strides=(2, 2), auto_pad="SAME_UPPER")
    assert same.shape[2] == floordiv(size("h") + 1, 2)
    s = x[:, :, 1:-1, ::-2]
    assert s.shape == (N, 3, maximum(size("h") - 2, 0), floordiv(size("w") + 1, 2))
    assert nbyoc.reshape(x, (N, -1)).shape == (N, 3 * size("h") * size("w"))


def test_specialize_and_generalize_round_trip():
    x = nbyoc.var("x", (4, 6))
    f = nbyoc.function([x], nbyoc.exp(x[1:, :]).sum(axis=0))
    g = generalize(f, {"x": ("n", None)})
    assert str(g.params[0].type) == "Tensor[(n, 6), float32]"
    assert nbyoc.structural_equal(specialize(g, {"n": 4}), f)
    assert specialize(g, {"n": size("m") * 2}).params[0].type.shape == (2 * M, 6)


def test_every_onnx_node_case_types_with_every_dimension_symbolic():
    """The type rule of every op ONNX's node cases use works on symbols: each case's
    function with every dimension above 1 made a symbol (one per distinct size) builds,
    and put back to its sizes gives the types the concrete rules gave."""
    onnx_cases = pytest.importorskip("tests.frontend.onnx_cases")
    failures, checked = [], 0
    for case in onnx_cases.selected():
        try:
            f = nbyoc.from_onnx(case.model)
        except nbyoc.NbyocError:
            continue  # listed in the refused file, tested there
        binding, dims = {}, {}
        for p in f.params:
            fixed = [d if isinstance(d, int) and d >= 2 else None for d in p.type.shape]
            dims[p.name_hint] = [None if d is None else f"d{d}" for d in fixed]
            binding.update({f"d{d}": d for d in fixed if d is not None})
        if not binding:
            continue
        checked += 1
        try:
            back = specialize(generalize(f, dims), binding)
            assert back.type == f.type
        except (NbyocTypeError, AssertionError) as e:
            failures.append(f"{case.name}: {e}")
    assert checked > 500 and not failures, failures


def test_sizes_that_grow_without_bound_are_refused_by_limits():
    """A model's or a text's shape arithmetic cannot build a size of a million terms, or
    floordivs nested past what printing can recurse through: each is a LimitError."""
    from nbyoc.errors import LimitError

    nested = N
    with pytest.raises(LimitError, match="nesting"):
        for _ in range(150):
            nested = (nested + 1) // 2
    symbols = [size(f"s{k}") for k in range(20)]
    product = 1
    with pytest.raises(LimitError, match="size_terms"):
        for k in range(0, 20, 2):
            product = product * (symbols[k] + symbols[k + 1])  # 2**10 terms
    with pytest.raises(LimitError, match="nesting"):
        parse_size("floordiv(" * 120 + "n" + " + 1, 2)" * 120)
