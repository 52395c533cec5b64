"""In-place updates under ``nbyoc.jit``: ``y[key] = v``, ``y[mask] = v``, ``y[idx] = v``
and ``y += v``, each against NumPy for value, dtype and structure, with NumPy's aliasing:
other names for the array, views taken before the update (read after it), and updates
written through views (``frontend/numpy/aliasing.py``). What NumPy would do differently
from a jitted function (changing the caller's array, a write through a read-only or
layout-dependent view) is refused with the error that says so."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import ExecutionError, NbyocTypeError

from .test_numpy_jit import assert_like_numpy


def _data(shape=(5, 6), dtype="float64", seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * 4
    return x.astype(dtype)


def _fresh(args):
    return [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]


def aliases(x):
    y = x * 2
    z = y  # another name for the same array sees every update
    y[y > 3] = 3
    y[0] += 10
    return z


def loop_rows(x):
    out = np.zeros_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * i
    return out


def empty_like_filled(x):
    out = np.empty_like(x)
    out[:, 0] = x[:, 0]
    out[:, 1:] = np.cumsum(x[:, 1:], axis=1)
    return out


def strided(x):
    y = x + 0
    y[1::3, ::-2] = -1
    y[::2, 1] = np.arange(y[::2, 1].shape[0])
    return y


def view_read_after(x):
    y = x * 1.0
    first = y[0]  # a view: sees the update below
    y[0] = 10.0
    return first + 1


def write_through_view(x):
    y = x * 1.0
    row = y[1]
    row[2:] = 5
    row *= 2
    return y


def write_through_transpose(x):
    y = x + 1
    t = y.T
    t[0] = 0
    return y, t


def nested_views(x):
    y = x.copy()
    y[1][2] = 100.0  # a view's element, as loops over rows write it
    inner = y[1:, 1:]
    inner[0, 0] = -7.0
    return y


def fancy(x, idx):
    y = x.copy()
    y[idx] = -x[idx]
    y[[0, -1]] += 100
    return y


def fancy_columns(x, idx):
    y = x.copy()
    y[:, idx] = 7
    return y


def pairs_of_indices(x, idx):
    y = x.copy()
    y[np.arange(3), idx[:3]] = 0  # (row, column) pairs, as a loss picks its labels
    y[idx, idx[::-1]] += 5
    return y


def repeated_indices(x):
    y = x.copy()
    y[[1, 1, 3]] = np.array([[1.0], [2.0], [3.0]])  # the last of repeats wins
    return y


def masked_in_place(x):
    y = x.copy()
    y[y < 0] *= -2
    y[np.abs(y) > 5] = 0
    return y


def masked_from_other(x):
    y = np.zeros_like(x)
    m = x > 0
    y[m] = x[m]
    return y


def masked_rows(x):
    y = x.copy()
    y[x[:, 0] > 0] = np.arange(x.shape[1], dtype=x.dtype)
    return y


def scalar_rebinds(x):
    s = x.sum()
    t = s  # NumPy's scalars are immutable: t keeps the old value
    s += 1
    return t, s


def int_truncates(x):
    y = (x * 3).astype(np.int32)
    y[1:3] = 2.7
    y[-1] = x[0]
    return y


def copies_stay(x):
    y = x * 2
    c, a, f = y.copy(), y.astype(y.dtype), y.flatten()
    y[:] = 0
    return c, a, f, y


def augmented_aliases(x):
    y = x * 2
    z = y
    y += 1
    y /= 4
    return z


def bool_update(x):
    b = x > 0
    b[0] = True
    b[:, -1] |= x[:, 0] < -1
    return b


def reshape_view(x):
    y = x * 1.0
    r = y.reshape(-1)
    r[:3] = 0  # a reshape of a whole array is a view: y sees it
    return y


def expand_then_write(x):
    y = x + 0
    e = np.expand_dims(y, 0)
    e[0, 0] = 1
    return y


def out_argument(x):
    y = np.zeros_like(x)
    np.add(x, 1, out=y)
    np.multiply(y, 2, out=y)
    return y


def ellipsis_and_none(x):
    y = x * 1
    y[..., -1] = 0
    y[None, 2] = 9
    return y


def histogram(labels, weights):
    totals = np.zeros_like(weights, shape=(4,))
    np.add.at(totals, labels, weights)  # repeated labels add up (unbuffered)
    peaks = np.full_like(weights, -np.inf, shape=(4,))
    np.maximum.at(peaks, labels, weights)
    return totals, peaks


CASES = {f.__name__: (f, lambda: (_data(),)) for f in (
    aliases, loop_rows, empty_like_filled, strided, view_read_after, write_through_view,
    write_through_transpose, nested_views, repeated_indices, masked_in_place,
    masked_from_other, masked_rows, scalar_rebinds, int_truncates, copies_stay,
    augmented_aliases, bool_update, reshape_view, expand_then_write, out_argument,
    ellipsis_and_none,
)}  # fmt: skip
CASES["fancy"] = (fancy, lambda: (_data(), np.array([2, 0, -1])))
CASES["pairs_of_indices"] = (pairs_of_indices, lambda: (_data(), np.array([2, 0, -1, 4, 1])))
CASES["fancy_columns"] = (fancy_columns, lambda: (_data(), np.array([1, 3, 1])))
CASES["histogram"] = (histogram, lambda: (np.array([0, 2, 2, 3, 0, 2]), _data((6,))))
CASES["float32 loop"] = (loop_rows, lambda: (_data(dtype="float32"),))
CASES["int64 strided"] = (strided, lambda: (_data(dtype="int64"),))


@pytest.mark.parametrize("name", list(CASES))
def test_updates_match_numpy(name):
    fn, make = CASES[name]
    args = make()
    want = fn(*_fresh(args))
    assert_like_numpy(nbyoc.jit(fn)(*args), want, name)
    for a, b in zip(args, make()):
        np.testing.assert_array_equal(a, b)  # (the caller's arrays are left alone)


@pytest.mark.parametrize("backend", ["csource", "examplejson"])
@pytest.mark.parametrize("name", ["aliases", "strided", "fancy", "write_through_view"])
def test_updates_match_numpy_on_every_backend(name, backend):
    fn, make = CASES[name]
    assert_like_numpy(nbyoc.jit(fn, backend=backend)(*make()), fn(*make()), name)


def test_an_index_out_of_range_raises_when_the_function_runs():
    def put(x, idx):
        y = x.copy()
        y[idx] = 0
        return y

    jitted = nbyoc.jit(put)
    jitted(_data(), np.array([4]))
    with pytest.raises(ExecutionError, match="IndexError: scatter_nd: index 5 is out of range"):
        jitted(_data(), np.array([5]))


def test_updates_in_a_function_compiled_for_many_sizes():
    jitted = nbyoc.jit(strided, dynamic=True)
    for shape in [(5, 6), (7, 6), (9, 4)]:
        x = _data(shape)
        assert_like_numpy(jitted(x), strided(x.copy()), str(shape))


# -- random basic indices against NumPy ---------------------------------------------------


def _slices(size):
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(bool))
    return st.builds(slice, bound, bound, step)


@st.composite
def _updates(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    key = []
    for size in shape:
        key.append(draw(st.one_of(_slices(size), st.integers(-size, size - 1))))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(key)))
        key = [*key[:at], Ellipsis, *key[at + draw(st.integers(0, len(key) - at)) :]]
    key = tuple(key)
    region = np.zeros(shape)[key].shape
    # a value of the region's shape, one broadcast to it, or a scalar
    kind = draw(st.sampled_from(["full", "row", "scalar"]))
    value_shape = region if kind == "full" else region[-1:] if kind == "row" else ()
    dtype = draw(st.sampled_from(["float64", "int32", "bool"]))
    return shape, key, value_shape, dtype


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_updates())
def test_random_basic_updates_match_numpy(case):
    shape, key, value_shape, dtype = case

    def update(x, v):
        y = x.copy()
        y[key] = v
        return y

    x = np.arange(np.prod(shape)).reshape(shape).astype(dtype)
    v = (np.arange(np.prod(value_shape), dtype=np.float64) * 1.5 - 2).reshape(value_shape)
    want = update(x, v)
    got = nbyoc.jit(update, backend="host")(x, v)
    assert_like_numpy(got, want, repr(key))


# -- what NumPy would do differently: refused ----------------------------------------------


def _argument_item(x):
    x[0] = 0
    return x


def _argument_augmented(x):
    x += 1
    return x


def _argument_view(x):
    row = x[0]
    row += 1
    return x


def _argument_transposed(x):
    x.T[0] = 1
    return x


def _read_only(x):
    b = np.broadcast_to(x[0], (3, 6))
    b[0] = 1
    return b


def _layout_dependent(x):
    y = x * 1
    r = y[:, ::2].reshape(-1)  # a copy or a view, by NumPy's memory layout
    y[0] = 0
    return r


def _per_element_values(x):
    y = x.copy()
    y[y > 0] = x
    return y


def _scalar_item(x):
    s = x.sum()
    s[()] = 1
    return s


def _growing(x):
    y = x[0] * 1
    y += x
    return y


def _broadcast_mismatch(x):
    y = x.copy()
    y[0:2] = np.ones(4)
    return y


REFUSED = {
    "argument": (_argument_item, "updates the argument 'x' in place"),
    "argument +=": (_argument_augmented, "updates the argument 'x' in place"),
    "argument's view": (_argument_view, "updates the argument 'x' in place"),
    "argument's transpose": (_argument_transposed, "updates the argument 'x' in place"),
    "read-only view": (_read_only, "read-only"),
    "layout-dependent view": (_layout_dependent, "memory layout"),
    "a value per selected element": (_per_element_values, "one value per selected element"),
    "a scalar's item": (_scalar_item, "does not support item assignment"),
    "a growing +=": (_growing, "non-broadcastable output operand"),
    "broadcast": (_broadcast_mismatch, "could not broadcast input array from shape"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_numpy_would_do_differently_is_refused(name):
    fn, message = REFUSED[name]
    with pytest.raises(NbyocTypeError, match=message) as info:
        nbyoc.jit(fn)(_data())
    assert 'test_jit_updates.py", line' in str(info.value)  # (the user's line)


def test_outside_jit_graph_values_stay_immutable():
    y = nbyoc.var("y", (3,)) * 2
    with pytest.raises(NbyocTypeError, match=r"outside nbyoc\.jit"):
        y[0] = 1
    z = y
    z += 1  # (a new value bound to z: y is the same graph value as before)
    assert z is not y
