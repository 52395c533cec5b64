"""sort, argsort, argtopk (and the top_k builder), take_along_axis, searchsorted and interp
against NumPy and against Python's own stable sort: NaN ordering, stability, every axis,
and the NumPy spellings nbyoc.jit maps onto them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import NbyocTypeError

DTYPES = ["float32", "float64", "int32", "uint8", "bool", "float16"]


def run(outputs, *arrays, backend="host"):
    params = [nbyoc.var(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    built = outputs(*params)
    fn = nbyoc.compile(nbyoc.function(params, list(built)), backend=backend)
    return fn(*arrays)


def data(shape, dtype, seed=0):
    """Values with many ties (and NaN in floats) so that stability and NaN order show."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    values = rng.integers(0, 4, shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        values[rng.random(shape) < 0.2] = np.nan
        values[rng.random(shape) < 0.1] = -np.inf
    return values


def python_order(row, descending):
    """Python's stable sort of one row's indices: NaN the largest value."""

    def key(i):
        v = row[i].item()
        nan = v != v
        if descending:
            return (0, 0) if nan else (1, -v)
        return (1, 0) if nan else (0, v)

    return sorted(range(len(row)), key=key)


def oracle_argsort(x, axis, descending):
    moved = np.moveaxis(x, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, moved.shape[-1])
    order = np.array([python_order(r, descending) for r in rows], np.int64)
    return np.moveaxis(order.reshape(moved.shape), -1, axis)


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
    axis=st.integers(-1, 2),
    descending=st.booleans(),
    seed=st.integers(0, 5),
)
def test_sorts_are_stable_with_nan_last_like_numpy(dtype, shape, axis, descending, seed):
    if axis >= len(shape):
        return
    x = data(shape, dtype, seed)
    values, order = run(lambda v: [nbyoc.sort(v, axis, descending), nbyoc.argsort(v, axis,
                        descending)], x)  # fmt: skip
    want = oracle_argsort(x, axis, descending)
    np.testing.assert_array_equal(order, want)
    assert order.dtype == np.int64 and values.dtype == x.dtype
    np.testing.assert_array_equal(values, np.take_along_axis(x, want, axis))
    if not descending:  # NumPy's own stable sorts
        np.testing.assert_array_equal(values, np.sort(x, axis=axis, kind="stable"))
        np.testing.assert_array_equal(order, np.argsort(x, axis=axis, kind="stable"))


def test_nan_goes_last_ascending_and_first_descending():
    x = np.array([2.0, np.nan, -np.inf, 1.0, np.nan, 2.0], np.float32)
    up, down, up_order, down_order = run(
        lambda v: [nbyoc.sort(v), nbyoc.sort(v, descending=True), nbyoc.argsort(v),
                   nbyoc.argsort(v, descending=True)], x)  # fmt: skip
    np.testing.assert_array_equal(up, [-np.inf, 1, 2, 2, np.nan, np.nan])
    np.testing.assert_array_equal(down, [np.nan, np.nan, 2, 2, 1, -np.inf])
    assert up_order.tolist() == [2, 3, 0, 5, 1, 4]
    assert down_order.tolist() == [1, 4, 0, 5, 3, 2]  # (ties: the first first, both ways)


@settings(max_examples=40, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    n=st.integers(1, 7),
    k=st.integers(0, 7),
    largest=st.booleans(),
    seed=st.integers(0, 5),
)
def test_top_k_takes_the_first_k_of_the_stable_order(dtype, n, k, largest, seed):
    x = data((3, n), dtype, seed)
    if k > n:
        with pytest.raises(NbyocTypeError, match=f"k={k} is more than the {n} elements"):
            nbyoc.top_k(nbyoc.var("x", x.shape, dtype), k, largest=largest)
        return
    values, indices = run(lambda v: nbyoc.top_k(v, k, axis=1, largest=largest), x)
    want = oracle_argsort(x, 1, descending=largest)[:, :k]
    np.testing.assert_array_equal(indices, want)
    np.testing.assert_array_equal(values, np.take_along_axis(x, want, 1))


def test_take_along_axis_broadcasts_the_other_axes_like_numpy():
    x = np.arange(24.0).reshape(2, 3, 4)
    idx = np.array([[[3, -1]], [[0, 2]]])  # (2, 1, 2): axis 1 broadcasts
    (got,) = run(lambda a, i: [nbyoc.take_along_axis(a, i, axis=2)], x, idx)
    np.testing.assert_array_equal(got, np.take_along_axis(x, idx, 2))
    with pytest.raises(NbyocTypeError, match="indices need x's rank"):
        nbyoc.take_along_axis(nbyoc.var("x", (2, 3)), nbyoc.var("i", (2,), "int64"), axis=1)


def test_searchsorted_and_interp_like_numpy():
    a = np.array([0.0, 1.0, 1.0, 2.5, np.nan])
    v = np.array([[-1.0, 1.0, 2.0], [2.5, 9.0, np.nan]])
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([10.0, 0.0, 4.0])
    got = run(lambda s, w, p, q: [nbyoc.searchsorted(s, w), nbyoc.searchsorted(s, w, side="right"),
              nbyoc.interp(w, p, q), nbyoc.interp(w, p, q, left=-1.0, right=7.0)],
              a, v, xp, fp)  # fmt: skip
    want = [np.searchsorted(a, v), np.searchsorted(a, v, side="right"), np.interp(v, xp, fp),
            np.interp(v, xp, fp, left=-1.0, right=7.0)]  # fmt: skip
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_errors_say_what_to_do():
    x = nbyoc.var("x", (3, 4))
    with pytest.raises(NbyocTypeError, match=r"sorts x in place.*np\.sort"):
        x.sort()
    with pytest.raises(NbyocTypeError, match="0-d tensor has no axis"):
        nbyoc.call_op("sort", nbyoc.var("s", ()))
    with pytest.raises(NbyocTypeError, match="must be 1-D"):
        nbyoc.searchsorted(x, x)
    with pytest.raises(NbyocTypeError, match="no order="):
        np.sort(x, order="a")
    with pytest.raises(NbyocTypeError, match="period"):
        np.interp(x, np.arange(3.0), np.arange(3.0), period=2.0)


def test_jit_maps_numpy_sorting_functions_and_methods():
    def f(x, table):
        return (
            np.sort(x, axis=1)[:, -2:],  # the top-k
            np.sort(x, axis=None),
            np.argsort(x, axis=0, kind="stable"),
            x.argsort(kind="stable"),  # (nbyoc sorts stably whatever kind says)
            np.partition(x, 2, axis=1)[:, 2],  # (the kth element is in its sorted place)
            np.take_along_axis(x, np.argsort(x, axis=1, kind="stable"), axis=1),
            np.searchsorted(table, x, side="right"),
            table.searchsorted(x),
            np.searchsorted(table[::-1], x, sorter=np.arange(4)[::-1]),
            np.interp(x, table, table * 2, left=0.0),
        )

    x = data((4, 5), "float64", seed=1)
    table = np.array([0.0, 1.0, 2.0, 3.0])
    want = f(x, table)
    for backend in ("host", "llvm"):
        got = nbyoc.jit(f, backend=backend)(x, table)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
