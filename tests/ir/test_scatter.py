"""scatter_elements and scatter_nd against hand-written NumPy loops (ONNX's reference
loops, spelled out here): every reduction, repeated and negative indices, symbolic
sizes, and the errors of a wrong graph (when it is built) and of an index out of range
(when it runs), on the host and around kernels of every backend."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import ExecutionError, NbyocTypeError, ShapeMismatchError
from tests.helpers import reload

REDUCTIONS = ["none", "add", "mul", "max", "min"]
#: What each reduction makes of the value already there and an update (the test's oracle).
COMBINE = {
    "none": lambda old, new: new,
    "add": lambda old, new: old + new,
    "mul": lambda old, new: old * new,
    "max": np.maximum,
    "min": np.minimum,
}


def scatter_elements_loop(data, indices, updates, axis, reduction):
    out = data.copy()
    for position in np.ndindex(indices.shape):
        target = list(position)
        target[axis] = int(indices[position]) % data.shape[axis]  # (negative: from the end)
        out[tuple(target)] = COMBINE[reduction](out[tuple(target)], updates[position])
    return out


def scatter_nd_loop(data, indices, updates, reduction):
    out = data.copy()
    for position in np.ndindex(indices.shape[:-1]):
        target = tuple(int(i) % n for i, n in zip(indices[position], data.shape))
        out[target] = COMBINE[reduction](out[target], updates[position])
    return out


def run(build, *arrays, backend="host"):
    """``build``'s graph over parameters shaped like ``arrays``, run on ``backend``."""
    params = [nbyoc.var(f"p{k}", a.shape, a.dtype.name) for k, a in enumerate(arrays)]
    return nbyoc.compile(nbyoc.function(params, build(*params)), backend=backend)(*arrays)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype,index_dtype", [("float32", "int64"), ("int32", "int32"),
                                               ("float64", "int32"), ("int64", "int64")])  # fmt: skip
def test_scatter_elements_matches_the_loop(reduction, axis, dtype, index_dtype):
    rng = np.random.default_rng(0)
    data = rng.integers(-9, 9, (4, 5, 3)).astype(dtype)
    shape = [3, 5, 2]
    shape[axis] = 7  # longer than data's axis: indices repeat
    indices = rng.integers(-data.shape[axis], data.shape[axis], shape).astype(index_dtype)
    updates = rng.integers(-9, 9, shape).astype(dtype)
    got = run(lambda d, i, u: nbyoc.scatter_elements(d, i, u, axis, reduction),
              data, indices, updates)  # fmt: skip
    want = scatter_elements_loop(data, indices, updates, axis % 3, reduction)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_scatter_nd_matches_the_loop(reduction, depth):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((4, 3, 5)).astype(np.float32)
    indices = np.stack(
        [rng.integers(-n, n, (6, 2)) for n in data.shape[:depth]], axis=-1
    ) if depth else np.zeros((6, 2, 0), np.int64)  # fmt: skip
    updates = rng.standard_normal((6, 2, *data.shape[depth:])).astype(np.float32)
    got = run(lambda d, i, u: nbyoc.scatter_nd(d, i, u, reduction), data, indices, updates)
    np.testing.assert_array_equal(got, scatter_nd_loop(data, indices, updates, reduction))


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
    reduction=st.sampled_from(REDUCTIONS),
)
def test_random_scatters_match_the_loops(shape, data, reduction):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.integers(-5, 5, shape).astype(np.float64)
    axis = data.draw(st.integers(0, len(shape) - 1))
    index_shape = [data.draw(st.integers(0, n)) for n in shape]
    index_shape[axis] = data.draw(st.integers(0, 6))
    indices = rng.integers(-shape[axis], shape[axis], index_shape)
    updates = rng.integers(-5, 5, index_shape).astype(np.float64)
    got = run(lambda d, i, u: nbyoc.scatter_elements(d, i, u, axis, reduction), x, indices, updates)
    np.testing.assert_array_equal(got, scatter_elements_loop(x, indices, updates, axis, reduction))

    depth = data.draw(st.integers(0, len(shape)))
    count = data.draw(st.integers(0, 5))
    tuples = np.stack([rng.integers(-n, n, count) for n in shape[:depth]] or
                      [np.zeros(count, np.int64)], axis=-1)[:, :depth]  # fmt: skip
    rows = rng.integers(-5, 5, (count, *shape[depth:])).astype(np.float64)
    got = run(lambda d, i, u: nbyoc.scatter_nd(d, i, u, reduction), x, tuples, rows)
    np.testing.assert_array_equal(got, scatter_nd_loop(x, tuples, rows, reduction))


def test_with_reduction_none_the_last_of_repeated_indices_wins():
    # (1000 writes to 3 places: NumPy's fancy assignment promises no order for these)
    rng = np.random.default_rng(2)
    indices = rng.integers(0, 3, (1, 1000))
    updates = np.arange(1000, dtype=np.float32).reshape(1, 1000)
    data = np.zeros((1, 3), np.float32)
    got = run(lambda d, i, u: nbyoc.scatter_elements(d, i, u, axis=1), data, indices, updates)
    last = [np.flatnonzero(indices[0] == k)[-1] for k in range(3)]
    np.testing.assert_array_equal(got[0], last)
    tuples = indices.reshape(1000, 1)
    rows = np.repeat(updates.reshape(1000, 1), 4, axis=1)
    got = run(nbyoc.scatter_nd, np.zeros((3, 4), np.float32), tuples, rows)
    np.testing.assert_array_equal(got, np.repeat(np.array(last, np.float32)[:, None], 4, axis=1))


def test_reductions_combine_repeated_indices_in_order():
    data = np.array([[1.0, 2.0, 3.0]], np.float32)
    indices = np.array([[1, -2, 1, 0]])
    updates = np.array([[2.0, 3.0, -4.0, 0.5]], np.float32)
    want = {"add": [1.5, 3.0, 3.0], "mul": [0.5, -48.0, 3.0], "max": [1.0, 3.0, 3.0],
            "min": [0.5, -4.0, 3.0], "none": [0.5, -4.0, 3.0]}  # fmt: skip
    for reduction, expected in want.items():
        got = run(lambda d, i, u, r=reduction: nbyoc.scatter_elements(d, i, u, 1, r),
                  data, indices, updates)  # fmt: skip
        np.testing.assert_array_equal(got[0], expected, err_msg=reduction)


def test_max_and_min_keep_nan_as_numpy_does():
    data = np.array([1.0, np.nan, 3.0], np.float32)
    with np.errstate(invalid="ignore"):  # (NumPy's maximum.at warns of the NaN it keeps)
        got = run(lambda d, i, u: nbyoc.scatter_nd(d, i, u, "max"), data,
                  np.array([[0], [1]]), np.array([np.nan, 5.0], np.float32))  # fmt: skip
    np.testing.assert_array_equal(got, [np.nan, np.nan, 3.0])


def test_the_arguments_are_not_written():
    data = np.zeros((2, 3), np.float32)
    run(lambda d, i, u: nbyoc.scatter_elements(d, i, u, reduction="add"), data,
        np.array([[1, 0, 1]]), np.ones((1, 3), np.float32))  # fmt: skip
    assert not data.any()


@pytest.mark.parametrize("backend", ["host", "llvm", "csource", "examplejson"])
def test_scatters_between_kernels_of_every_backend(backend):
    """The backends claim neither op (they run on the host), but compute what comes
    before and after; the result survives a save and load."""
    x, u = nbyoc.var("x", (4, 3)), nbyoc.var("u", (2, 3))
    i, t = nbyoc.var("i", (2, 3), "int64"), nbyoc.var("t", (2, 1), "int32")
    y = nbyoc.scatter_elements(x * 2.0, i, nbyoc.exp(u), axis=0, reduction="add") - 1.0
    z = nbyoc.scatter_nd(nbyoc.tanh(x), t, u + 1.0, reduction="max") * 3.0
    fn = reload(nbyoc.compile(nbyoc.function([x, u, i, t], [y, z]), backend=backend))
    externals = [f for name, f in fn.module.functions.items() if name != "main"]
    assert externals or backend == "host"
    assert not any("scatter" in str(f) for f in externals)
    rng = np.random.default_rng(3)
    xs, us = (
        rng.standard_normal((4, 3)).astype(np.float32),
        rng.standard_normal((2, 3)).astype(np.float32),
    )
    idx, tup = np.array([[0, 3, -1], [0, 1, 2]]), np.array([[2], [-2]], np.int32)
    got_y, got_z = fn(xs, us, idx, tup)
    np.testing.assert_allclose(
        got_y, scatter_elements_loop(xs * 2, idx, np.exp(us), 0, "add") - 1, rtol=1e-6
    )
    np.testing.assert_allclose(
        got_z, scatter_nd_loop(np.tanh(xs), tup, us + 1, "max") * 3, rtol=1e-6
    )
    with pytest.raises(ExecutionError, match=r"scatter_nd: index -5 is out of range for axis 0"):
        fn(xs, us, idx, np.array([[0], [-5]], np.int32))


@pytest.mark.parametrize(
    "build,arrays,message",
    [
        (lambda d, i, u: nbyoc.scatter_elements(d, i, u, axis=1),
         [np.zeros((2, 3)), np.array([[0, 3]]), np.zeros((1, 2))],
         r"scatter_elements: index 3 is out of range for axis 1 of data \(length 3: valid "
         r"indices are -3 to 2\)"),
        (lambda d, i, u: nbyoc.scatter_elements(d, i, u, reduction="add"),
         [np.zeros((2, 3)), np.array([[0, -3, 1]], np.int32), np.zeros((1, 3))],
         r"scatter_elements: index -3 is out of range for axis 0 of data \(length 2"),
        (lambda d, i, u: nbyoc.scatter_nd(d, i, u),
         [np.zeros((2, 3)), np.array([[1, 2], [0, 4], [7, 0]]), np.zeros(3)],
         r"scatter_nd: index 7 is out of range for axis 0 of data \(length 2"),
        (lambda d, i, u: nbyoc.scatter_nd(d, i, u, "min"),
         [np.zeros((2, 3)), np.array([[1, 2], [0, -4]]), np.zeros(2)],
         r"scatter_nd: index -4 is out of range for axis 1 of data \(length 3"),
    ],
)  # fmt: skip
def test_an_index_out_of_range_is_an_error_naming_the_op_the_axis_and_the_value(
    build, arrays, message
):
    with pytest.raises(ExecutionError, match=message):
        run(build, *arrays)


D = nbyoc.var("d", (3, 4))
I2 = nbyoc.var("i", (2, 4), "int64")
U2 = nbyoc.var("u", (2, 4))


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: nbyoc.scatter_elements(D, nbyoc.var("f", (2, 4)), U2), "indices must be int32 or int64"),
        (lambda: nbyoc.scatter_elements(D, nbyoc.var("b", (2, 4), "uint64"), U2), "indices must be int32 or int64"),
        (lambda: nbyoc.scatter_nd(D, nbyoc.var("b", (2, 1), "int8"), U2), "indices must be int32 or int64"),
        (lambda: nbyoc.scatter_elements(D, I2, nbyoc.var("h", (2, 4), "float16")),
         r"updates must have data's dtype float32, got Tensor\[\(2, 4\), float16\]; cast"),
        (lambda: nbyoc.scatter_elements(D, nbyoc.var("j", (8,), "int64"), nbyoc.var("v", (8,))),
         "indices must have data's rank 2, got rank 1"),
        (lambda: nbyoc.scatter_elements(D, I2, nbyoc.var("v", (2, 3))),
         r"updates must have the shape \(2, 4\) \(the shape of indices\)"),
        (lambda: nbyoc.scatter_elements(D, I2, nbyoc.var("v", (2, 4, 1))), r"updates must have the shape \(2, 4\)"),
        (lambda: nbyoc.scatter_elements(D, nbyoc.var("j", (2, 5), "int64"), nbyoc.var("v", (2, 5))),
         "indices axis 1 has length 5, longer than data's \\(4\\)"),
        (lambda: nbyoc.scatter_elements(D, I2, U2, axis=2), "axis 2 is out of range"),
        (lambda: nbyoc.scatter_elements(nbyoc.var("s", ()), nbyoc.var("j", (), "int64"), nbyoc.var("v", ())),
         "cannot scatter into a 0-d tensor"),
        (lambda: nbyoc.scatter_elements(D, I2, U2, reduction="sum"),
         "attribute reduction must be one of 'none', 'add', 'mul', 'max', 'min', got 'sum'"),
        (lambda: nbyoc.scatter_nd(D, nbyoc.var("j", (2, 3), "int64"), nbyoc.var("v", (2,))),
         "index tuples of length 3 name more axes than data's 2"),
        (lambda: nbyoc.scatter_nd(D, nbyoc.var("j", (), "int64"), nbyoc.var("v", (2,))),
         "indices must have at least one axis"),
        (lambda: nbyoc.scatter_nd(D, nbyoc.var("j", (5, 1), "int64"), nbyoc.var("v", (5, 3))),
         r"updates must have the shape \(5, 4\) \(indices' shape without its last axis, then "
         r"data's axes after the first 1\)"),
        (lambda: nbyoc.scatter_nd(D, nbyoc.var("j", (5, 2), "int64"), nbyoc.var("v", (5, 1))),
         r"updates must have the shape \(5,\)"),
        (lambda: nbyoc.scatter_nd(D, nbyoc.var("j", (5, 2), "int64"), nbyoc.var("v", (5,), "int32")),
         "updates must have data's dtype float32"),
        (lambda: nbyoc.scatter_nd(nbyoc.var("q", (3,), "float8_e4m3fn"), nbyoc.var("j", (1, 1), "int64"),
                                  nbyoc.var("v", (1,), "float8_e4m3fn")),
         "float8_e4m3fn is a storage dtype nbyoc does not compute in"),
    ],
)  # fmt: skip
def test_type_errors_say_what_is_wrong(build, message):
    with pytest.raises(NbyocTypeError, match=message):
        build()


def test_symbolic_sizes_are_checked_when_the_call_binds_them():
    d, i, u = nbyoc.var("d", ("n", 5)), nbyoc.var("i", ("m", 5), "int64"), nbyoc.var("u", ("m", 5))
    y = nbyoc.scatter_elements(d, i, u, axis=1)
    assert str(y.type) == "Tensor[(n, 5), float32]"
    assert [c.args for c in y.assumes] == [(nbyoc.ir.symbols.size("n"), nbyoc.ir.symbols.size("m"))]
    fn = nbyoc.compile(nbyoc.function([d, i, u], y), backend="host")
    got = fn(
        np.zeros((3, 5), np.float32), np.array([[4] * 5, [-1] * 5]), np.ones((2, 5), np.float32)
    )
    np.testing.assert_array_equal(got[:, 4], [1, 1, 0])
    with pytest.raises(ShapeMismatchError, match=r"scatter_elements' indices axis 0: size n must "
                                                 r"be at least m"):  # fmt: skip
        fn(np.zeros((1, 5), np.float32), np.zeros((2, 5), np.int64), np.ones((2, 5), np.float32))
    # the rows of a cache of n positions, written at m places
    t, r = nbyoc.var("t", ("m", 1), "int32"), nbyoc.var("r", ("m", 5))
    z = nbyoc.scatter_nd(d, t, r)
    assert z.type == d.type and not z.assumes
    # index tuples of a symbolic length: the ranks tell it, the call checks it
    j = nbyoc.var("j", (2, "k"), "int64")
    w = nbyoc.scatter_nd(d, j, nbyoc.var("v", (2,)))
    assert [str(c) for c in w.assumes] == [
        "Constraint(kind='equal', args=(k, 2), where=\"scatter_nd's index tuples (indices' "
        'last axis)")'
    ]
    fn = nbyoc.compile(nbyoc.function([d, j, w.args[2]], w), backend="host")
    got = fn(np.zeros((3, 5), np.float32), np.array([[2, -1], [0, 0]]), np.ones(2, np.float32))
    np.testing.assert_array_equal(np.flatnonzero(got), [0, 14])
    with pytest.raises(ShapeMismatchError, match=r"scatter_nd's index tuples \(indices' last "
                                                 r"axis\): sizes k and 2 must be equal"):  # fmt: skip
        fn(np.zeros((3, 5), np.float32), np.zeros((2, 1), np.int64), np.ones(2, np.float32))
    with pytest.raises(NbyocTypeError, match="rank 4 fits no k"):
        nbyoc.scatter_nd(d, j, nbyoc.var("v", (2, 1, 1, 1)))
    with pytest.raises(NbyocTypeError, match="rank 3 need index tuples of length 0, and "):
        nbyoc.scatter_nd(d, j, nbyoc.var("v", (2, 1, 1)))
    with pytest.raises(NbyocTypeError, match=r"updates must have the shape \(m, 5\)"):
        nbyoc.scatter_nd(d, t, nbyoc.var("v", ("m", 4)))


def test_the_text_form_json_and_examplejson_keep_the_attributes():
    from nbyoc.codegen.examplejson.format import to_examplejson
    from nbyoc.codegen.examplejson.parse import parse_examplejson

    j = nbyoc.var("j", (2, 1), "int32")
    f = nbyoc.function([D, I2, U2, j], [nbyoc.scatter_elements(D, I2, U2, axis=-1),
                                        nbyoc.scatter_nd(D, j, U2, "mul")])  # fmt: skip
    assert 'reduction="none"' in str(f) and "axis=1" in str(f)
    assert nbyoc.structural_equal(nbyoc.parse(str(f)), f)
    assert nbyoc.structural_equal(nbyoc.from_json(nbyoc.to_json(f)), f)
    text = to_examplejson(f.with_attrs(global_symbol="s"))
    assert "reduction: none" in text
    assert str(parse_examplejson(text)["s"].body.fields[1].attrs["reduction"]) == "mul"
