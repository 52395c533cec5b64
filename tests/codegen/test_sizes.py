"""Run-time sizes in generated code (``codegen/llvm/sizes.py``): the text a ``Dim``
writes computes the value it holds, whatever the expression, and deciding by a
``Dim`` without saying so is refused."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbyoc.codegen.llvm.sizes import Dim, Sizes, ceil_div, value

from ..helpers import examples

OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
             "%": operator.mod}  # fmt: skip


@st.composite
def expressions(draw, sizes: Sizes, depth: int = 0):
    """A random expression of run-time sizes and numbers (divisors positive, as sizes,
    strides and blocks are)."""
    if depth >= 4 or draw(st.booleans()):
        if draw(st.booleans()):
            return sizes.dim(draw(st.integers(1, 500)))
        return draw(st.integers(-20, 20))
    left = draw(expressions(sizes, depth + 1))
    symbol = draw(st.sampled_from(sorted(OPERATORS)))
    right = draw(expressions(sizes, depth + 1))
    if symbol in ("//", "%") and value(right) <= 0:
        right = draw(st.integers(1, 9))
    return OPERATORS[symbol](left, right)


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_the_text_computes_the_value(data):
    sizes = Sizes()
    expression = data.draw(expressions(sizes))
    names = {f"z{k}": v for k, v in enumerate(sizes.values)}
    # embedded in a larger expression too: f"q * {dim}" must keep its precedence
    assert eval(f"3 * {expression} - 1", {}, names) == 3 * value(expression) - 1
    assert eval(str(expression), {}, names) == value(expression)


def test_neutral_operands_leave_a_size_as_it_is():
    z = Sizes().dim(7)
    assert z + 0 is z and 0 + z is z and z - 0 is z and z * 1 is z and 1 * z is z and z // 1 is z
    assert str(ceil_div(z, 4)) == "((z0 + 3) // 4)" and ceil_div(z, 4).value == 2


@pytest.mark.parametrize(
    "decide",
    [bool, int, lambda z: z < 3, lambda z: z == 7, lambda z: range(z), lambda z: max(z, 1)],
    ids=["bool", "int", "less", "equal", "range", "max"],
)
def test_a_decision_by_a_size_must_say_so(decide):
    """A choice of code by a size's value must read ``.value`` (the text then differs
    where the choice does): comparing or converting a Dim itself raises."""
    z = Sizes().dim(7)
    with pytest.raises(TypeError, match="read at run time"):
        decide(z)
    assert isinstance(z, Dim) and value(z) == 7


def test_sizes_bind_and_pass_in_order():
    sizes = Sizes()
    assert sizes.binding() == [] and sizes.argument() == "()"
    sizes.dim(4)
    assert sizes.binding() == ["z0, = z"] and sizes.argument() == "(4,)"
    sizes.dims((5, 6))
    assert sizes.binding() == ["z0, z1, z2 = z"] and sizes.argument() == "(4, 5, 6)"
    assert sizes.numba_type() == "nbt.UniTuple(nbt.int64, 3)"
