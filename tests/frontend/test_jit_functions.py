"""NumPy functions and operators the user corpus asked for (tests/frontend/user_corpus.py):
``np.median``, ``np.ptp``, ``np.roll``, ``np.any``/``np.all``, ``np.take``, ``np.log10``,
``np.log2`` and ``&``/``|``/``^``/``~`` of bools, each against NumPy for value, dtype and
shape, with the edge cases NumPy defines (NaN in a median, even and odd lengths, integer
medians in float64, rolls past the length), and the refusals that stand in for what
nbyoc cannot compute."""

from __future__ import annotations

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError

from .test_numpy_jit import assert_like_numpy


def _data(dtype="float32", shape=(4, 6), seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * 3
    return x.astype(dtype)


def _with_nan():
    x = _data()
    x[1, 2] = np.nan
    return x


CASES = {
    "median rows": (lambda x: np.median(x, axis=1), _data),
    "median even": (lambda x: np.median(x[:, :4], axis=1), _data),
    "median all": (lambda x: np.median(x), _data),
    "median keepdims": (lambda x: np.median(x, axis=0, keepdims=True), _data),
    "median of NaN rows": (lambda x: np.median(x, axis=1), _with_nan),
    "median of ints": (lambda x: np.median(x, axis=0), lambda: _data("int32")),
    "median float64": (lambda x: np.median(x, axis=-1), lambda: _data("float64", (3, 7))),
    "ptp": (lambda x: np.ptp(x, axis=0), _data),
    "ptp all": (lambda x: np.ptp(x), lambda: _data("int64")),
    "roll": (lambda x: np.roll(x, 2, axis=1), _data),
    "roll past the length": (lambda x: np.roll(x, -13, axis=1), _data),
    "roll flat": (lambda x: np.roll(x, 5), _data),
    "roll two axes": (lambda x: np.roll(x, (1, -2), (0, 1)), _data),
    "any": (lambda x: np.any(x > 4, axis=1), _data),
    "all": (lambda x: np.all(x > -9), _data),
    "any of ints": (lambda x: np.any(x, axis=0), lambda: _data("int32")),
    "take": (lambda x: np.take(x, np.array([3, 0, -1]), axis=1), _data),
    "take flat": (lambda x: np.take(x, np.array([[0, 23], [5, 7]])), _data),
    "log10": (lambda x: np.log10(np.abs(x) + 1), _data),
    "log2 of ints": (lambda x: np.log2(np.abs(x) + 1), lambda: _data("int32")),
    "and or not": (lambda x: (x > 0) & ~(x > 2) | (x < -2), _data),
    "xor with a bool array": (lambda x: (x > 0) ^ np.eye(4, 6, dtype=bool), _data),
    "bitwise_and ufunc": (lambda x: np.bitwise_and(x > 0, x < 1), _data),
    "labels of each row": (lambda x: x[np.arange(4), np.array([5, 0, -1, 2])], _data),
    "two arrays, broadcast": (lambda x: x[np.array([[0], [3]]), np.array([1, -2, 4])], _data),
    "arrays on axes apart": (
        lambda x: x.reshape(2, 3, 4)[np.array([1, 0]), :, np.array([3, -1])],
        _data,
    ),
    "nansum": (lambda x: np.nansum(x, axis=0), _with_nan),
    "nanmean": (lambda x: np.nanmean(x, axis=1, keepdims=True), _with_nan),
    "nanmean of an all-NaN column": (
        lambda x: np.nanmean(np.where(x > 9, x, np.nan), axis=0),
        _data,
    ),
    "nanmax": (lambda x: np.nanmax(x, axis=0), _with_nan),
    "nanmin all": (lambda x: np.nanmin(x), _with_nan),
    "nanvar ddof": (lambda x: np.nanvar(x, axis=0, ddof=1), _with_nan),
    "nanstd of ints": (lambda x: np.nanstd(x, axis=1), lambda: _data("int32")),
    "nansum of ints": (lambda x: np.nansum(x), lambda: _data("int8")),
    "percentile list": (lambda x: np.percentile(x, [5, 50, 95], axis=1), _data),
    "percentile scalar": (lambda x: np.percentile(x, 30), _data),
    "percentile of NaN rows": (lambda x: np.percentile(x, 50, axis=1), _with_nan),
    "percentile of ints": (lambda x: np.percentile(x, [10, 90], axis=0), lambda: _data("int32")),
    "quantile keepdims": (lambda x: np.quantile(x, 0.25, axis=0, keepdims=True), _data),
    "unpacked quantiles": (lambda x: np.clip(x, *np.quantile(x, [0.1, 0.9])), _data),
    "digitize": (lambda x: np.digitize(x, [-1.0, 0.0, 1.0]), _data),
    "digitize decreasing right": (
        lambda x: np.digitize(x, [1.0, 0.0, -1.0], right=True),
        lambda: _data("int32"),
    ),
    "convolve full": (lambda x: np.convolve(x[0], np.ones(3)), _data),
    "convolve valid": (lambda x: np.convolve(x[1], np.arange(4.0), mode="valid"), _data),
    "convolve same, swapped": (
        lambda x: np.convolve(np.arange(3.0), x[2], mode="same"),
        lambda: _data("float64"),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_numpy_functions_match_numpy(name):
    fn, make = CASES[name]
    assert_like_numpy(nbyoc.jit(fn)(make()), fn(make()), name)


@pytest.mark.parametrize(
    "fn,message",
    [
        (lambda x: x.astype(np.int32) & 3, "numpy.bitwise_and: & of int32 and int64 values"),
        (lambda x: ~x.astype(np.int32), "numpy.invert: ~ of int32 values"),
        (lambda x: np.eye(6)[(x > 0).astype(np.int64)], "a graph value holds no data"),
        (lambda x: np.roll(x, 1.5), "numpy.roll: needs shifts known at compile time"),
        (lambda x: np.median(x, axis=(0, 1)), "numpy.median: takes one axis or None"),
        (
            lambda x: np.average(x, weights=x),
            "numpy.average is not supported by nbyoc.jit; write (x * w).sum(axis) / w.sum()",
        ),
    ],
    ids=["int &", "int ~", "ndarray indexed", "float shift", "two axes", "average"],
)
def test_what_nbyoc_cannot_compute_is_refused_with_what_to_write(fn, message):
    with pytest.raises(NbyocTypeError) as refusal:
        nbyoc.jit(fn)(_data())
    assert str(refusal.value).startswith(message), str(refusal.value)


def test_an_ndarray_lookup_table_becomes_a_graph_value_as_the_refusal_says():
    labels = np.array([2, 0, 1, 2])
    got = nbyoc.jit(lambda labels: nbyoc.const(np.eye(3))[labels])(labels)
    np.testing.assert_array_equal(got, np.eye(3)[labels])


def test_random_draws_while_tracing_are_refused_and_numpy_is_left_as_it_was():
    """A draw while tracing would be baked into the graph: every call would return the
    same numbers. Refused in the tracing thread; NumPy's functions are back after."""
    import threading

    from nbyoc.frontend.numpy.randomness import refusing_random_draws

    normal = np.random.normal
    with pytest.raises(NbyocTypeError, match=r"numpy\.random\.uniform inside nbyoc\.jit"):
        nbyoc.jit(lambda x: x * np.random.uniform(size=x.shape))(_data())
    assert np.random.normal is normal
    drawn = []
    with refusing_random_draws():  # (another thread draws as NumPy does meanwhile)
        worker = threading.Thread(target=lambda: drawn.append(np.random.normal(size=2)))
        worker.start()
        worker.join()
    assert drawn[0].shape == (2,)


def _accumulate(x):
    total = np.zeros_like(x[0])
    for i in range(x.shape[0]):
        total += x[i] * 2
    total /= 3
    return total


def _integer_updates(x):
    y = (x * 4).astype(np.int64)
    y //= 3
    y -= 1
    y *= 2
    return y


def _bool_updates(x):
    mask = x > 0
    mask |= x < -2
    mask &= x < 2
    return mask


@pytest.mark.parametrize("fn", [_accumulate, _integer_updates, _bool_updates])
def test_augmented_assignments_keep_numpy_s_dtype(fn):
    assert_like_numpy(nbyoc.jit(fn)(_data()), fn(_data()), fn.__name__)


def _argument_update(x):
    x += 1
    return x


def _unsafe_update(x):
    y = x.astype(np.int32)
    y += 0.5
    return y


@pytest.mark.parametrize(
    "fn,message",
    [
        (_argument_update, "x += ... updates the argument 'x' in place: NumPy would change"),
        (_unsafe_update, "y += ... of int32 by float64 values: NumPy's in-place += keeps int32"),
    ],
    ids=["argument", "same_kind"],
)
def test_augmented_assignments_numpy_would_not_do_the_same_are_refused(fn, message):
    """NumPy changes the caller's array, or raises (UFuncTypeError): never a quiet new
    value."""
    with pytest.raises(NbyocTypeError) as refusal:
        nbyoc.jit(fn)(_data())
    assert str(refusal.value).startswith(message), str(refusal.value)
    if fn is _unsafe_update:
        with pytest.raises(TypeError):  # (NumPy's own refusal)
            fn(_data())
