"""``nbyoc.jit`` results come back in the structure the function returned them (dicts,
named tuples, nested tuples and lists), and ``f.lower(...)`` reaches the compiled
``Executable`` of a signature."""

import collections

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError

Stats = collections.namedtuple("Stats", "low high")
X = np.arange(12, dtype=np.float32).reshape(3, 4)


def same(got, want):
    """Equal structure (types included) with equal arrays at the leaves."""
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            same(got[k], want[k])
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    else:
        np.testing.assert_array_equal(got, want)
        assert np.asarray(got).dtype == np.asarray(want).dtype


def nested(x):
    return {
        "mean": x.mean(axis=0),
        "stats": Stats(x.min(), [x.max(axis=1), (x * 2.0,)]),
        "ordered": collections.OrderedDict(b=x + 1.0, a=x - 1.0),
    }


@pytest.mark.parametrize(
    "fn",
    [
        nested,
        lambda x: {"only": x * 2.0},
        lambda x: [x],
        lambda x: (x, [x + 1.0, {"deep": (x.sum(),)}]),
        lambda x: Stats(x, x),
    ],
)
def test_results_keep_their_structure(fn):
    jitted = nbyoc.jit(fn)
    same(jitted(X), fn(X))
    same(jitted(X), fn(X))  # (the fast path of a signature seen before)


def test_a_structure_of_a_size_generic_version_too():
    jitted = nbyoc.jit(nested)
    for rows in (3, 5, 7):  # the third size runs on the version made at the second
        data = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        same(jitted(data), nested(data))


def test_a_dict_subclass_it_cannot_rebuild_is_refused_by_name():
    counter = nbyoc.jit(lambda x: collections.Counter(a=x))
    with pytest.raises(NbyocTypeError, match="returned a Counter"):
        counter(X)


def test_lower_gives_the_executable_of_the_signature():
    jitted = nbyoc.jit(lambda x, s: x * s + 1.0)
    fn = jitted.lower(X, 2.0)
    assert isinstance(fn, nbyoc.Executable) and fn.compile_seconds > 0
    assert "llvm_0" in fn.get_source()
    assert fn.explain().summary() == "3 op calls (llvm 3) in 1 region"  # cast, multiply, add
    assert jitted.lower(X, 2.0) is fn  # not compiled again
    np.testing.assert_array_equal(jitted(X, 2.0), X * 2.0 + 1.0)
    assert len(jitted.signatures) == 1
    other = jitted.lower(X.astype(np.float64), 2.0)
    assert other is not fn and other.module["main"].params[0].type.dtype == "float64"


def test_lower_saves_and_loads(tmp_path):
    fn = nbyoc.jit(lambda x: np.exp(x) - 1.0).lower(X)
    fn.save(tmp_path / "f.nbyoc")
    np.testing.assert_allclose(nbyoc.load(tmp_path / "f.nbyoc")(X), np.exp(X) - 1.0, rtol=1e-6)


def test_compile_records_its_time():
    x = nbyoc.var("x", (2,))
    assert nbyoc.compile(nbyoc.function([x], x + 1.0), "host").compile_seconds >= 0
