"""nbyoc.ir.signs: signs known from a graph's structure, which codegens may rely on."""

import numpy as np
import pytest

import nbyoc
from nbyoc.ir.signs import MAX_DEPTH, nonnegative, nonpositive

X = nbyoc.var("x", (4, 6))


@pytest.mark.parametrize(
    "expr",
    [
        X - nbyoc.max(X, axis=1, keepdims=True),
        X - nbyoc.max(X, axis=(0, 1), keepdims=True),
        -nbyoc.abs(X),
        -(X * X),
        nbyoc.minimum(X, -nbyoc.relu(X)),
        -nbyoc.exp(X) * 0.5,
        (-nbyoc.abs(X)) + nbyoc.const(np.float32(-1.0)),
        nbyoc.const(np.array([-1.0, 0.0, -np.inf, np.nan], np.float32)),
    ],
)
def test_never_positive(expr):
    assert nonpositive(expr)


@pytest.mark.parametrize(
    "expr",
    [
        X,
        X - 1.0,
        X - nbyoc.max(X + 1.0, axis=1, keepdims=True),  # the maximum of something else
        nbyoc.max(X, axis=1, keepdims=True) - X,
        -nbyoc.abs(X) + 1.0,
        -nbyoc.abs(X) * X,
        nbyoc.const(np.array([-1.0, 0.5], np.float32)),
        -nbyoc.abs(nbyoc.var("i", (3,), "int8")),  # integers wrap: abs(-128) is -128
    ],
)
def test_not_known_never_positive(expr):
    assert not nonpositive(expr)


def test_a_maximum_without_keepdims_broadcasts_against_other_elements():
    square = nbyoc.var("s", (5, 5))
    assert not nonpositive(square - nbyoc.max(square, axis=1))
    assert nonpositive(square - nbyoc.max(square, axis=1, keepdims=True))


def test_never_negative_and_the_depth_limit():
    assert nonnegative(nbyoc.exp(X) + nbyoc.relu(X) * nbyoc.sigmoid(X))
    assert nonnegative(nbyoc.maximum(X, nbyoc.abs(X)))
    assert not nonnegative(X + nbyoc.abs(X))
    deep = nbyoc.abs(X)
    for _ in range(MAX_DEPTH + 2):
        deep = deep + deep
    assert not nonnegative(deep)  # true, but deeper than the questions look
