"""The test kit's generated cases: every op with a generator makes well-typed calls, on
each dtype its type rule takes, that the host runs; the same choices make the same
case; hypothesis draws them too."""

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError
from nbyoc.testing.calls import GENERATORS, data_dtype
from nbyoc.testing.cases import NoGenerator, op_case
from nbyoc.testing.choices import FirstChoices, RandomChoices
from nbyoc.testing.inputs import random_inputs


@pytest.mark.parametrize("op", sorted(GENERATORS))
def test_each_generator_makes_calls_the_host_runs(op):
    ran = 0
    for dtype in ("float32", "int32", "bool", "uint8"):
        for seed in range(4):
            try:
                case = op_case(op, dtype, RandomChoices(seed) if seed else FirstChoices())
            except NbyocTypeError:
                continue  # (the type rule refuses the dtype, or what was drawn)
            assert case.call.op.name == op and data_dtype(case.call) == dtype
            assert any(n is case.call for n in nbyoc.ir.post_order([case.func.body]))
            with np.errstate(all="ignore"):
                nbyoc.compile(case.func, "host")(*random_inputs(case.func, case.seed))
            ran += 1
    assert ran >= 4, op


def test_the_same_choices_make_the_same_case():
    a, b = (op_case("conv", "float32", RandomChoices(seed=5)) for _ in range(2))
    assert nbyoc.structural_equal(a.func, b.func) and a.seed == b.seed
    c = op_case("conv", "float32", RandomChoices(seed=6))
    assert not nbyoc.structural_equal(a.func, c.func)


def test_an_op_without_a_generator_says_so():
    with pytest.raises(NoGenerator, match="no case generator for op 'loop'"):
        op_case("loop", "float32", FirstChoices())


def test_hypothesis_draws_cases_of_the_op_and_dtype():
    from hypothesis import given, settings

    from nbyoc.testing.strategies import op_cases

    seen = []

    @settings(max_examples=10, database=None, deadline=None)
    @given(op_cases("gather", "int8"))
    def draw(case):
        assert case.call.op.name == "gather" and data_dtype(case.call) == "int8"
        seen.append(case.func.body)

    draw()
    assert len(seen) == 10
