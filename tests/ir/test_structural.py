"""Structural equality and hashing: equal for the same graph, different for any change."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings

import nbyoc
from nbyoc import structural_equal, structural_hash

from ..strategies import graphs


def diamond(shape=(4, 4), dtype="float32", op="add", name="a", const=2.0, share=True):
    a, b = nbyoc.var(name, shape, dtype), nbyoc.var("b", shape, dtype)
    t = a * b
    u = t if share else a * b
    return nbyoc.function([a, b], nbyoc.call_op(op, t, b) * (u - const))


def test_same_graph_built_twice_is_equal_with_equal_hash():
    assert structural_equal(diamond(), diamond())
    assert structural_hash(diamond()) == structural_hash(diamond())


def test_variable_names_do_not_matter():
    assert structural_equal(diamond(name="a"), diamond(name="zzz"))
    assert structural_hash(diamond(name="a")) == structural_hash(diamond(name="zzz"))


@pytest.mark.parametrize(
    "changed",
    [
        dict(shape=(4, 5)),
        dict(dtype="float64"),
        dict(op="subtract"),
        dict(const=3.0),
        dict(share=False),  # the same arithmetic, but computed twice rather than shared
    ],
)
def test_any_change_changes_equality_and_hash(changed):
    assert not structural_equal(diamond(), diamond(**changed))
    assert structural_hash(diamond()) != structural_hash(diamond(**changed))


def test_wiring_and_attributes_and_function_attrs_matter():
    a, b = nbyoc.var("a", (2, 3)), nbyoc.var("b", (2, 3))
    f = nbyoc.function([a, b], a - b)
    swapped = nbyoc.function([a, b], b - a)
    reordered = nbyoc.function([b, a], a - b)
    assert structural_hash(f) != structural_hash(swapped)
    # parameters match by position: fn(b, a) { a - b } is fn(a, b) { b - a } renamed
    assert structural_equal(reordered, swapped)
    s0 = nbyoc.function([a], nbyoc.sum(a, axis=0))
    s1 = nbyoc.function([a], nbyoc.sum(a, axis=1))
    s_neg = nbyoc.function([a], nbyoc.sum(a, axis=-1))
    assert not structural_equal(s0, s1) and structural_equal(s1, s_neg)
    assert not structural_equal(f, f.with_attrs(Compiler="x"))


def test_constants_compare_bit_for_bit():
    x = nbyoc.var("x", (2,))
    f = lambda v: nbyoc.function([x], x + nbyoc.const(np.array(v, np.float32)))  # noqa: E731
    assert structural_equal(f([np.nan, 1]), f([np.nan, 1]))
    assert not structural_equal(f([0.0, 1]), f([-0.0, 1]))


def test_modules_and_expressions_compare_too():
    x = nbyoc.var("x", (3,))
    assert structural_equal(x + 1.0, nbyoc.var("y", (3,)) + 1.0)
    m1 = nbyoc.ir.IRModule({"main": diamond()})
    m2 = nbyoc.ir.IRModule({"main": diamond()})
    assert structural_equal(m1, m2) and structural_hash(m1) == structural_hash(m2)
    assert not structural_equal(m1, diamond())


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_hash_agrees_with_equality_on_random_graphs(f):
    g = nbyoc.parse(str(f))
    assert structural_equal(f, g) and structural_hash(f) == structural_hash(g)


def test_hash_is_stable_across_processes():
    code = (
        "import nbyoc\n"
        "a, b = nbyoc.var('a', (4, 4)), nbyoc.var('b', (4, 4))\n"
        "print(nbyoc.structural_hash(nbyoc.function([a, b], (a + b) * 2.0)))\n"
    )
    a, b = nbyoc.var("a", (4, 4)), nbyoc.var("b", (4, 4))
    here = structural_hash(nbyoc.function([a, b], (a + b) * 2.0))
    env_seed = {"PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**__import__("os").environ, **env_seed})  # fmt: skip
    assert int(out.stdout) == here
