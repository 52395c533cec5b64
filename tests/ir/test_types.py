"""Types: how deeply tuples may nest (the limit ``nesting``)."""

from __future__ import annotations

import numpy as np
import pytest

import nbyoc
from nbyoc import limits
from nbyoc.errors import LimitError
from nbyoc.ir.types import TensorType, TupleType


def nested(depth: int):
    x = nbyoc.var("x", (3,))
    value = x * 2.0
    for _ in range(depth):
        value = nbyoc.tuple([value, x])
    return nbyoc.function([x], value)


def test_a_tuple_nested_past_the_limit_is_refused_when_it_is_built():
    # issue 35: a graph built 3,000 deep raised RecursionError in str, to_json and compile.
    with pytest.raises(LimitError, match="a tuple type: nested 101 levels deep"):
        nested(3000)
    with limits.override(nesting=3):
        TupleType([TupleType([TupleType([TensorType((1,))])])])
        with pytest.raises(LimitError, match="nested 4 levels deep"):
            nested(4)


def test_a_tuple_nested_as_deep_as_the_limit_prints_serialises_and_compiles():
    f = nested(100)
    assert f.ret_type.depth == 100
    assert nbyoc.structural_equal(nbyoc.parse(str(f)), f)
    assert nbyoc.structural_equal(nbyoc.from_json(nbyoc.to_json(f)), f)
    result = nbyoc.compile(f, backend="examplejson")(np.ones(3, np.float32))
    for _ in range(99):
        result = result[0]
    np.testing.assert_array_equal(result[0], np.full(3, 2, np.float32))


def test_depth_does_not_change_what_a_type_is():
    a = TupleType([TensorType((2,)), TupleType([TensorType(())])])
    assert a.depth == 2 and TupleType([TensorType((2,))]).depth == 1
    assert a == TupleType([TensorType((2,)), TupleType([TensorType(())])]) and hash(a)
    assert repr(a) == "(Tensor[(2,), float32], (Tensor[(), float32],))"
