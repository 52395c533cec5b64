"""The text form: exact printing, parse(print(f)) == f, and located parse errors."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import nbyoc
from nbyoc import limits
from nbyoc.errors import LimitError, ParseError
from nbyoc.ir import IRModule

from ..strategies import assert_same_results, graphs, random_inputs

REFERENCE_TEXT = """\
fn (%a: Tensor[(10, 10), float32], %b: Tensor[(10, 10), float32], \
%c: Tensor[(10, 10), float32], %d: Tensor[(10, 10), float32]) -> Tensor[(10, 10), float32] {
  %0 = add(%a, %b) /* Tensor[(10, 10), float32] */;
  %1 = subtract(%0, %c) /* Tensor[(10, 10), float32] */;
  multiply(%1, %d) /* Tensor[(10, 10), float32] */
}"""


def reference_graph():
    a, b, c, d = (nbyoc.var(n, (10, 10)) for n in "abcd")
    return nbyoc.function([a, b, c, d], ((a + b) - c) * d)


def test_reference_graph_prints_exactly():
    assert str(reference_graph()) == REFERENCE_TEXT


def round_trip(f):
    g = nbyoc.parse(str(f))
    assert nbyoc.structural_equal(f, g)
    assert str(g) == str(f)
    return g


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graphs_round_trip(f):
    g = round_trip(f)
    args = random_inputs(f)
    with np.errstate(all="ignore"):
        assert_same_results(
            nbyoc.compile(g, backend="host")(*args), nbyoc.compile(f, backend="host")(*args)
        )


def test_every_attribute_kind_round_trips():
    x = nbyoc.var("x", (2, 3, 4), "int32")
    outs = [
        nbyoc.sum(x, axis=(0, -1), keepdims=True),
        nbyoc.mean(x),
        nbyoc.max(x, axis=1),
        nbyoc.reshape(x, (4, -1)),
        nbyoc.transpose(x, (2, 0, 1)),
        nbyoc.concatenate([x, x], axis=-1),
        nbyoc.matmul(x, nbyoc.transpose(x, (0, 2, 1))),
    ]
    round_trip(nbyoc.function([x], outs))


@pytest.mark.parametrize(
    "value",
    [
        np.float32(0.1),
        np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], np.float32),
        np.array([[0.1, 1 / 3], [1e300, -5e-324]], np.float64),
        np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64),
        np.arange(-3, 3, dtype=np.int32).reshape(2, 3),
        np.random.default_rng(0).standard_normal((20, 20)).astype(np.float32),  # base64 form
        np.zeros((0, 3), np.float64),  # empty: base64 form keeps the shape
    ],
)
def test_constants_round_trip_bit_for_bit(value):
    x = nbyoc.var("x", np.shape(value), np.asarray(value).dtype)
    f = nbyoc.function([x], [x + nbyoc.const(value), nbyoc.const(value)])
    g = round_trip(f)
    stored = g.body.fields[1]
    assert stored.data.tobytes() == np.asarray(value).tobytes()


def test_shared_values_stay_shared():
    x = nbyoc.var("x", (3,))
    t = nbyoc.exp(x)
    g = round_trip(nbyoc.function([x], t * t))
    assert g.body.args[0] is g.body.args[1]


def test_modules_print_and_parse_with_calls_to_later_functions():
    x = nbyoc.var("x", (4,))
    inner = nbyoc.function([x], [x * 2.0, -x]).with_attrs(Compiler="test", global_symbol="test_0")
    a = nbyoc.var("a", (4,))
    gv = nbyoc.ir.GlobalVar("test_0", inner.type)
    call = nbyoc.ir.Call(gv, [nbyoc.exp(a)])
    main = nbyoc.function([a], call[0] + call[1])
    mod = IRModule({"main": main, "test_0": inner})
    text = str(mod)
    assert text.startswith("def @main(") and "@test_0(%0)" in text
    assert 'attrs(Compiler="test", global_symbol="test_0")' in text
    assert "// @test_0 runs on test: multiply, negative" in text
    assert "runs on test" in text.split("def @test_0")[0]  # main notes where its call runs
    back = nbyoc.parse(text)
    assert isinstance(back, IRModule) and nbyoc.structural_equal(back, mod)


def test_module_functions_without_a_backend_run_on_the_host():
    x = nbyoc.var("x", (4,))
    inner = nbyoc.function([x], [x * 2.0, -x])
    a = nbyoc.var("a", (4,))
    call = nbyoc.ir.Call(nbyoc.ir.GlobalVar("inner", inner.type), [nbyoc.exp(a)])
    mod = nbyoc.parse(
        str(IRModule({"main": nbyoc.function([a], call[0] + call[1]), "inner": inner}))
    )
    out = nbyoc.compile(mod, backend="host")(np.ones(4, np.float32))
    np.testing.assert_allclose(out, np.e * 2 - np.e, rtol=1e-6)


def test_hand_written_text_with_nested_calls_and_comments():
    f = nbyoc.parse(
        """
        // a comment
        fn (%a: Tensor[(2,), int32], %b: Tensor[(2,), int32]) {
          %t = (add(%a, %b), multiply(%a, const([3, 4], dtype=int32)));  /* a tuple */
          subtract(%t.0, %t.1)
        }
        """
    )
    out = nbyoc.compile(f, backend="host")(np.array([1, 2], np.int32), np.array([5, 6], np.int32))
    np.testing.assert_array_equal(out, [1 + 5 - 3, 2 + 6 - 8])


def test_unusual_variable_names_are_printed_as_valid_names():
    a, b, c = nbyoc.var("0", (2,)), nbyoc.var("x.y", (2,)), nbyoc.var("v", (2,))
    text = str(nbyoc.function([a, b, c], a + b + c))
    assert "%v:" in text and "%v_1:" in text and "%v_2:" in text
    round_trip(nbyoc.function([a, b, c], a + b + c))


GOOD_HEAD = "fn (%a: Tensor[(2,), float32])"


@pytest.mark.parametrize(
    "text,line,needle",
    [
        ("", 1, "expected 'fn' or 'def'"),
        (f"{GOOD_HEAD} {{ exp(%b) }}", 1, "%b is not defined"),
        (f"{GOOD_HEAD} {{\n  %0 = exp(%a);\n  %0 = exp(%a);\n  %0\n}}", 3, "already bound"),
        (f"{GOOD_HEAD} {{\n  %0 = exp(%a)\n  %0\n}}", 3, "';' after the binding"),
        (f"{GOOD_HEAD} {{ frobnicate(%a) }}", 1, "unknown op 'frobnicate'"),
        (f"{GOOD_HEAD} {{ add(%a, const([1, 2, 3], dtype=float32)) }}", 1, "do not broadcast"),
        (f"{GOOD_HEAD} -> Tensor[(3,), float32] {{ exp(%a) }}", 1, "declared return type"),
        ("fn (%a: Tensor[(2,), complex64]) { %a }", 1, "not supported"),
        ("fn (%a: Tensor[(2, ?), float32]) { %a }", 1, "unexpected"),
        ("fn (%a: Tensor[(2, n +), float32]) { %a }", 1, "cannot read size"),
        ("fn (%a: Tensor[(2, min), float32]) { %a }", 1, "cannot read size"),
        ("fn (%a: Tensor[(2,), float32], %a: Tensor[(2,), float32]) { %a }", 1, "declared twice"),
        (f"{GOOD_HEAD} {{ add(%a, const([1.5, 2], dtype=int32)) }}", 1, "non-integer"),
        (f"{GOOD_HEAD} {{ sum(%a, axis=0, 1) }}", 1, "positional operands must come before"),
        (f'{GOOD_HEAD} {{ const(base64="!!", shape=[2], dtype=float32) }}', 1, "bad base64"),
        (f'{GOOD_HEAD} {{ const(base64="AAAA", shape=[2], dtype=float32) }}', 1, "needs 8"),
        (f"{GOOD_HEAD} {{ @f(%a) }}", 1, "@f is not a function of this module"),
        (f"{GOOD_HEAD} {{ %a }} trailing", 1, "end of the text"),
        (f"{GOOD_HEAD} {{ %a $ }}", 1, "unexpected '$'"),
        (f"{GOOD_HEAD} {{ %a /* never closed }}", 1, "unclosed /* comment"),
        (
            "def @main(%a: Tensor[(2,), float32]) -> Tensor[(2,), float32] {\n  %a\n",
            1,
            "never closed",
        ),
        ("def @f(%a: Tensor[(2,), float32]) -> Tensor[(2,), float32] { %a }", 1, "needs a 'main'"),
        ("def @main(%a: Tensor[(2,), float32]) { %a }", 1, "needs a return type"),
        (f"{GOOD_HEAD} {{ %a.0 }}", 1, "only tuple values can be indexed"),
    ],
)
def test_parse_errors_give_line_column_and_reason(text, line, needle):
    with pytest.raises(ParseError) as info:
        nbyoc.parse(text)
    assert needle in str(info.value)
    assert info.value.line == line and info.value.column >= 1


def test_parse_rejects_non_text():
    with pytest.raises(ParseError, match="takes a str"):
        nbyoc.parse(b"fn () { }")


@pytest.mark.parametrize("text", ["fn () { " + "(" * 5000, "fn () { const(" + "[" * 5000])
def test_absurd_nesting_is_refused_by_the_nesting_limit_not_a_crash(text):
    # Refused at the 101st bracket, before the parser recurses any deeper.
    with pytest.raises(LimitError, match=r"line 1, column .*: brackets: nested 101 levels deep"):
        nbyoc.parse(text)


X = "fn (%x: Tensor[(1, 1, 2, 2), float32]) "


@pytest.mark.parametrize(
    "text, needle",
    [
        # issue 35: each of these escaped as JSONDecodeError, ValueError or OverflowError
        (X + '{ sum(%x, axis="\\q") }', 'bad string "\\q": Invalid \\escape'),
        (X + "{ sum(%x, axis=" + "9" * 5000 + ") }", "an integer of 5000 digits is longer"),
        (X + "{ add(%x, const(" + "9" * 5000 + ", dtype=float32)) }", "5000 digits"),
        (X + "{ resize(%x, scales=[1.0, 1.0, inf, 1.0]) }", "4 positive, finite values"),
        (X + "{ leaky_relu(%x, alpha=1" + "0" * 400 + ") }", "alpha must be a number"),
        (X + '{ add(%x, const(base64="é", shape=[], dtype=float32)) }', "bad base64 data"),
        ("fn (%x: Tensor[(3,), float32], %w: Tensor[(3,), float32]) { conv(%x, %w) }",
         "needs (N, C, spatial...) input"),
    ],
)  # fmt: skip
def test_malformed_values_are_parse_errors(text, needle):
    with pytest.raises(ParseError) as info:
        nbyoc.parse(text)
    assert needle in str(info.value)


def _deep_tuple(depth: int) -> str:
    lines = ["fn (%x: Tensor[(3,), float32]) {", "  %0 = (%x,);"]
    lines += [f"  %{k} = (%{k - 1},);" for k in range(1, depth)]
    return "\n".join([*lines, f"  %{depth - 1}", "}"])


def test_a_tuple_nested_deeper_than_the_limit_is_refused_where_it_is_built():
    # issue 35: 3,000 levels were read, then printing and compiling hit RecursionError.
    with pytest.raises(
        LimitError, match="line 102, column 10: a tuple type: nested 101 levels deep"
    ):
        nbyoc.parse(_deep_tuple(3000))
    f = nbyoc.parse(_deep_tuple(100))
    assert nbyoc.ir.structural_equal(nbyoc.parse(str(f)), f)
    with limits.override(nesting=5), pytest.raises(LimitError, match="nested 6 levels deep"):
        nbyoc.parse(_deep_tuple(6))
    with pytest.raises(LimitError, match="brackets: nested 101"):
        nbyoc.parse("fn (%x: Tensor[(3,), float32]) {" + "exp(" * 101 + "%x" + ")" * 101 + "}")
    nbyoc.parse("fn (%x: Tensor[(3,), float32]) {" + "exp(" * 100 + "%x" + ")" * 100 + "}")
