"""``x[mask]`` under ``nbyoc.jit``: a reduction over the whole selection runs, with
NumPy's results, dtypes and empty-selection behaviour; any other use says why not."""

import warnings

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import EmptyReductionError, NbyocTypeError

REDUCTIONS = ["sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin"]
DTYPES = ["float32", "float64", "int8", "int32", "uint8", "bool"]


def data(dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random((4, 6)) > 0.5
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((4, 6)).astype(dtype)
    return rng.integers(0, 9, (4, 6)).astype(dtype)


def numpy_result(fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (NumPy's empty mean)
        return fn(x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_each_reduction_of_a_selection_is_numpys(name, dtype):
    def select(x):
        return getattr(x[x != x.reshape(-1)[0]], name)()

    x = data(dtype)
    want = numpy_result(select, x)
    got = nbyoc.jit(select)(x)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    if name in ("argmax", "argmin") or np.asarray(want).dtype.kind in "iub":
        assert got == want
    else:  # (a masked sum adds the same values in another order)
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype != "float64" else 1e-12)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_an_empty_selection_behaves_as_in_numpy(name):
    def select(x):
        return getattr(x[x > 100], name)()

    x = data("float32")
    jitted = nbyoc.jit(select)
    if name in ("max", "min", "argmax", "argmin"):
        with pytest.raises(ValueError) as info:
            select(x)
        with pytest.raises(EmptyReductionError) as ours:
            jitted(x)
        assert str(ours.value) == str(info.value)
    else:
        want = numpy_result(select, x)
        got = jitted(x)
        np.testing.assert_array_equal(got, want)  # 0, 1, or NaN
        assert np.asarray(got).dtype == np.asarray(want).dtype


def test_numpys_functions_and_ufunc_reductions_take_a_selection():
    x = data("float32")
    for fn in (
        lambda x: np.sum(x[x > 0]),
        lambda x: np.mean(x[x > 0]),
        lambda x: np.max(x[x > 0]),
        lambda x: np.std(x[x > 0], ddof=1),
        lambda x: np.add.reduce(x[x > 0]),
        lambda x: np.maximum.reduce(x[x > 0]),
    ):
        np.testing.assert_allclose(nbyoc.jit(fn)(x), fn(x), rtol=1e-5)


def test_a_selection_in_a_larger_function():
    def clipped_mean(x, limit):
        inside = np.abs(x) < limit
        return x[inside].mean(), inside.sum()

    x = data("float64")
    mean, count = nbyoc.jit(clipped_mean)(x, 1.0)
    want_mean, want_count = clipped_mean(x, 1.0)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-12)
    assert count == want_count


@pytest.mark.parametrize(
    "fn, asked",
    [
        (lambda x: x[x > 0] * 2.0, "returned it"),
        (lambda x: x[x > 0] + x, "arithmetic with a value of shape"),
        (lambda x: x[x > 0] + x[x < 1], "two masks"),
        (lambda x: x[x > 0].shape, ".shape"),
        (lambda x: x[x > 0].sum(axis=0), "reduces the whole selection only"),
        (lambda x: np.sort(x[x > 0]), "numpy.sort"),
        (lambda x: x[x[:, 0] > 0], "depends on the data"),  # a mask of another shape
    ],
)
def test_other_uses_say_the_shape_depends_on_the_data(fn, asked):
    with pytest.raises(NbyocTypeError, match=r"depends on the data|whole selection") as info:
        nbyoc.jit(fn)(data("float32"))
    assert asked in str(info.value)
