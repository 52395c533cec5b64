"""Every op against NumPy: values, result dtype and shape, for every dtype and
broadcasting case; and type errors that say what is wrong and how to fix it."""

import builtins
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import nbyoc
from nbyoc.errors import NbyocTypeError
from nbyoc.ir.ops.nn import ACTIVATIONS

DTYPES = nbyoc.DTYPES
PAIRS = list(itertools.product(DTYPES, DTYPES))


def sigmoid(x):
    # In float64, rounded to the dtype NumPy's exp gives (float16 for int8, as exp does).
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.exp(x.reshape(-1)[:0]).dtype)


# The test's own oracle: what NumPy computes for each op (kept apart from nbyoc's table).
BINARY = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": lambda a, b: a**b,
    "floor_divide": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "fmod": np.fmod,
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less": lambda a, b: a < b,
    "less_equal": lambda a, b: a <= b,
    "greater": lambda a, b: a > b,
    "greater_equal": lambda a, b: a >= b,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


def reciprocal(x):
    if x.dtype.kind != "f":
        raise TypeError("nbyoc refuses integer reciprocals (they truncate)")
    return np.reciprocal(x)


def erf(x):
    out_dtype = np.sin(x.reshape(-1)[:0]).dtype
    return (
        np.array([math.erf(v) for v in x.astype(np.float64).reshape(-1)])
        .reshape(x.shape)
        .astype(out_dtype)
    )


UNARY = {
    "negative": lambda x: -x,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": sigmoid,
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,  # half to even, like np.rint
    "sign": np.sign,
    "reciprocal": reciprocal,
    "sin": np.sin,
    "cos": np.cos,
    "erf": erf,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "logical_not": np.logical_not,
}


def arrays_for(shape, dtype, rng, low=1, high=4):
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if kind in "iu":
        return rng.integers(max(low, 0) if kind == "u" else low, high, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def numpy_or_error(fn, *arrays):
    """NumPy's result, or None where NumPy refuses the dtypes (nbyoc must refuse too)."""
    try:
        if any(a.dtype == BFLOAT16 for a in arrays):
            return as_bfloat16_does(fn, *arrays)
        return fn(*arrays)
    except TypeError:
        return None


BFLOAT16 = np.dtype("bfloat16")


def as_bfloat16_does(fn, *arrays):
    """NumPy's result with bfloat16 as nbyoc defines it: of the dtype float16 would give
    in its place (float32 next to float16 itself), the values computed in float32 and
    rounded to it once."""
    proxy = np.float32 if any(a.dtype == np.float16 for a in arrays) else np.float16
    dtype = np.asarray(fn(*(a.astype(proxy) if a.dtype == BFLOAT16 else a for a in arrays))).dtype
    if dtype == np.float16 and proxy is np.float16:
        dtype = BFLOAT16
    return np.asarray(
        fn(*(a.astype(np.float32) if a.dtype == BFLOAT16 else a for a in arrays))
    ).astype(dtype)


def run(build, *arrays):
    """Build a graph over parameters shaped like ``arrays`` and run it on the host."""
    params = [nbyoc.var(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    out = build(*params)
    got = nbyoc.compile(nbyoc.function(params, out), backend="host")(*arrays)
    return got, out.type


def check(got, out_type, expected):
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, "the executor's dtype differs from NumPy's"
    assert got.shape == expected.shape
    assert out_type.dtype == expected.dtype.name, "the type rule differs from NumPy"
    assert out_type.shape == expected.shape
    if expected.dtype == BFLOAT16:  # (both computed in float32, rounded to 8 bits)
        got, expected = got.astype(np.float32), expected.astype(np.float32)
        rtol = 2.0**-8
    else:
        rtol = {np.float16: 1e-3, np.float32: 1e-6}.get(expected.dtype.type, 1e-12)
    np.testing.assert_allclose(got, expected, rtol=rtol)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("da,db", PAIRS)
def test_binary_ops_every_dtype_pair(name, da, db):
    rng = np.random.default_rng(0)
    a, b = arrays_for((3, 4), da, rng), arrays_for((4,), db, rng)
    expected = numpy_or_error(BINARY[name], a, b)
    if expected is None:
        with pytest.raises(NbyocTypeError, match="NumPy refuses"):
            run(lambda x, y: nbyoc.call_op(name, x, y), a, b)
        return
    got, t = run(lambda x, y: nbyoc.call_op(name, x, y), a, b)
    check(got, t, expected)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(list(BINARY)),
    dtypes=st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)),
    shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
)
def test_binary_ops_broadcast_like_numpy(name, dtypes, shapes):
    rng = np.random.default_rng(1)
    a, b = (arrays_for(s, d, rng) for s, d in zip(shapes.input_shapes, dtypes))
    expected = numpy_or_error(BINARY[name], a, b)
    if expected is None:
        return  # refusals: test_binary_ops_every_dtype_pair
    got, t = run(lambda x, y: nbyoc.call_op(name, x, y), a, b)
    assert t.shape == shapes.result_shape
    check(got, t, expected)


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 1, 3), (1, 2, 1, 2)])
def test_unary_ops(name, dtype, shape):
    x = arrays_for(
        shape,
        dtype,
        np.random.default_rng(2),
        low=-3 if name not in ("log", "sqrt", "log1p") else 1,
    )
    expected = numpy_or_error(UNARY[name], x)
    if expected is None:
        with pytest.raises(NbyocTypeError, match=r"NumPy refuses|takes floats"):
            run(lambda v: nbyoc.call_op(name, v), x)
        return
    got, t = run(lambda v: nbyoc.call_op(name, v), x)
    check(got, t, expected)


def test_sigmoid_is_stable_at_the_extremes():
    x = np.array([-1000, -30, 0, 30, 1000], np.float32)
    got, _ = run(nbyoc.sigmoid, x)
    np.testing.assert_allclose(got, [0, 9.357623e-14, 0.5, 1, 1], rtol=1e-6)


REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (2, 0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, dtype, axis, keepdims):
    x = arrays_for((2, 3, 4), dtype, np.random.default_rng(3), low=-5, high=5)
    got, t = run(lambda v: nbyoc.call_op(name, v, axis=axis, keepdims=keepdims), x)
    check(got, t, numpy_or_error(lambda v: REDUCE[name](v, axis=axis, keepdims=keepdims), x))


@pytest.mark.parametrize("name", REDUCE)
def test_reduction_of_a_scalar(name):
    x = np.asarray(3, np.int32)
    got, t = run(lambda v: nbyoc.call_op(name, v), x)
    check(got, t, REDUCE[name](x))


@pytest.mark.parametrize("da,db", PAIRS)
@pytest.mark.parametrize(
    "sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 2)), ((1, 3, 4), (2, 4, 2)), ((4,), (4, 3)),
              ((3, 4), (4,)), ((4,), (4,)), ((2, 1, 2, 3), (5, 3, 2))]
)  # fmt: skip
def test_matmul(da, db, sa, sb):
    rng = np.random.default_rng(4)
    a, b = arrays_for(sa, da, rng), arrays_for(sb, db, rng)
    got, t = run(lambda x, y: x @ y, a, b)
    check(got, t, numpy_or_error(np.matmul, a, b))


@pytest.mark.parametrize("dtype", DTYPES)
def test_layout_ops(dtype):
    x = arrays_for((2, 3, 4), dtype, np.random.default_rng(5))
    got, t = run(lambda v: nbyoc.reshape(v, (4, -1)), x)
    check(got, t, x.reshape(4, -1))
    got, t = run(nbyoc.transpose, x)
    check(got, t, x.T)
    got, t = run(lambda v: nbyoc.transpose(v, (1, -1, 0)), x)
    check(got, t, np.transpose(x, (1, 2, 0)))


@pytest.mark.parametrize(
    "dtypes", [("float32", "float32", "float32"), ("int32", "float32", "int64")]
)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(dtypes, axis):
    rng = np.random.default_rng(6)
    shapes = [(2, 3), (2, 3), (2, 3)]
    parts = [arrays_for(s, d, rng) for s, d in zip(shapes, dtypes)]
    got, t = run(lambda *xs: nbyoc.concatenate(xs, axis=axis), *parts)
    check(got, t, np.concatenate(parts, axis=axis))


def test_every_registered_op_has_a_builder_and_a_test():
    tested = (
        set(BINARY) | set(UNARY) | set(REDUCE) | {"matmul", "reshape", "transpose", "concatenate"}
    ) | {"softmax", "log_softmax"}  # composite: tests/transform/test_legalize.py
    tested |= {"where", "cast", "clip", "argmax", "argmin"} | set(ACTIVATIONS)  # below, test_nn
    tested |= {"slice", "gather", "squeeze", "unsqueeze", "flatten", "broadcast_to", "expand",
               "tile", "pad", "identity"}  # tests/ir/test_index.py  # fmt: skip
    tested |= {"scatter_elements", "scatter_nd"}  # tests/ir/test_scatter.py
    tested |= {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"}  # tests/ir/test_scan.py
    tested |= {"sort", "argsort", "argtopk", "take_along_axis", "searchsorted", "interp"}
    # (tests/ir/test_sort.py)
    tested |= {"svdvals"}  # tests/ir/test_linalg.py
    tested |= {"conv", "conv_transpose", "resize", "max_pool", "avg_pool", "batch_norm", "layer_norm", "gemm",
               "global_avg_pool", "global_max_pool"}  # tests/ir/test_conv.py  # fmt: skip
    tested |= {
        "lstm",
        "gru",
        "rnn",
    }  # tests/ir/test_recurrent.py, tests/frontend/test_onnx_recurrent.py
    tested |= {"cond", "loop"}  # tests/ir/test_control.py, tests/frontend/test_onnx_control_flow.py
    tested |= {"composite"}  # tests/transform/test_patterns.py
    tested |= {"require_nonempty"}  # tests/frontend/test_jit_masks.py
    assert set(nbyoc.ir.list_ops()) == tested
    for name in nbyoc.ir.list_ops():
        assert callable(getattr(nbyoc, name)), name


A = nbyoc.var("a", (3, 4), "float32")
B = nbyoc.var("b", (5,), "int32")


@pytest.mark.parametrize(
    "build,needles",
    [
        (lambda: A + B, ["add", "Tensor[(3, 4), float32]", "Tensor[(5,), int32]", "broadcast", "equal or 1"]),
        (lambda: A @ A, ["matmul", "inner dimensions differ", "4 vs 3", "transpose"]),
        (lambda: nbyoc.matmul(A, nbyoc.var("s", (), "float32")), ["matmul", "at least one dimension"]),
        (lambda: nbyoc.sum(A, axis=2), ["sum", "axis 2 is out of range", "[-2, 1]"]),
        (lambda: nbyoc.sum(A, axis=(0, -2)), ["repeats an axis"]),
        (lambda: nbyoc.max(nbyoc.var("e", (0, 3)), axis=0), ["max", "length 0"]),
        (lambda: nbyoc.reshape(A, (5, -1)), ["reshape", "cannot infer the -1"]),
        (lambda: nbyoc.reshape(A, (5, 2)), ["reshape", "10 elements", "12"]),
        (lambda: nbyoc.reshape(A, (-1, -1)), ["one -1"]),
        (lambda: nbyoc.transpose(A, (0, 0)), ["transpose", "permutation"]),
        (lambda: nbyoc.concatenate([A, B]), ["concatenate", "same rank"]),
        (lambda: nbyoc.concatenate([A, nbyoc.var("c", (3, 5))], axis=0), ["same size on every other axis"]),
        (lambda: nbyoc.concatenate([A], axis=3), ["axis 3 is out of range"]),
        (lambda: nbyoc.call_op("add", A), ["add takes 2 operand(s), got 1"]),
        (lambda: nbyoc.call_op("sum", A, axes=1), ["unknown attribute", "axes", "allowed: axis, keepdims"]),
        (lambda: nbyoc.sum(A, keepdims=1), ["keepdims must be True or False"]),
        (lambda: nbyoc.exp(nbyoc.tuple([A, A])), ["exp", "not a tensor", "expr[index]"]),
        (lambda: A + "x", ["cannot use 'x'"]),
    ],
)  # fmt: skip
def test_type_errors_name_the_op_the_operands_and_a_fix(build, needles):
    with pytest.raises(NbyocTypeError) as info:
        build()
    for needle in needles:
        assert needle in str(info.value)


def test_unknown_op_suggests_a_close_name():
    with pytest.raises(nbyoc.errors.UnknownOpError, match="did you mean 'multiply'"):
        nbyoc.call_op("multiplyy", A, A)


# -- where, cast, clip ----------------------------------------------------------------


@pytest.mark.parametrize("dtypes", [("bool", "int8", "uint8"), ("float32", "float32", "int64"),
                                    ("int32", "float16", "float64"), ("uint8", "bool", "bool")])  # fmt: skip
def test_where_like_numpy(dtypes):
    rng = np.random.default_rng(7)
    c, x, y = (arrays_for(s, d, rng, low=0) for s, d in zip([(3, 1), (4,), (3, 4)], dtypes))
    got, t = run(nbyoc.where, c, x, y)
    check(got, t, np.where(c, x, y))


@pytest.mark.parametrize("source", DTYPES)
@pytest.mark.parametrize("target", DTYPES)
def test_cast_like_astype(source, target):
    x = arrays_for((2, 5), source, np.random.default_rng(8), low=-3, high=100)
    got, t = run(lambda v: nbyoc.cast(v, target), x)
    check(got, t, x.astype(target))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "float16"])
def test_clip_like_numpy(dtype):
    x = arrays_for((3, 4), dtype, np.random.default_rng(9), low=0, high=50)
    got, t = run(lambda v: nbyoc.clip(v, 3, 20), x)
    check(got, t, np.clip(x, np.dtype(dtype).type(3), np.dtype(dtype).type(20)))
    got, t = run(lambda v: nbyoc.clip(v, max=10), x)
    check(got, t, np.minimum(x, np.dtype(dtype).type(10)))


def test_clip_refuses_what_it_cannot_mean():
    with pytest.raises(NbyocTypeError, match=r"min=0\.5 is not an integer"):
        nbyoc.clip(nbyoc.var("x", (2,), "int32"), 0.5, 3)
    with pytest.raises(NbyocTypeError, match="clip takes numbers"):
        nbyoc.clip(nbyoc.var("x", (2,), "bool"), 0, 1)
    # a bound beyond the dtype's range never binds
    assert nbyoc.clip(nbyoc.var("x", (2,), "uint8"), -5, 300).op.name == "clip"


def test_comparison_operators_build_ops_and_equality_stays_identity():
    x, y = nbyoc.var("x", (3,), "uint8"), nbyoc.var("y", (3,), "int8")
    assert (x < y).op.name == "less" and (x > 0).op.name == "greater"
    assert (x >= 1.5).type.dtype == "bool"
    with pytest.raises(NbyocTypeError, match=r"write nbyoc.equal\(x, y\)"):
        x == y  # noqa: B015
    assert x in [x] and {x: 1}[x] == 1


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_argmin_like_numpy(name, dtype, axis, keepdims):
    x = arrays_for((3, 4, 5), dtype, np.random.default_rng(10), low=0, high=4)  # ties: first wins
    if np.dtype(dtype).kind == "f":
        x[1, 2, 3] = x[2, 0, 1] = np.nan  # the first NaN wins
    got, t = run(lambda v: nbyoc.call_op(name, v, axis=axis, keepdims=keepdims), x)
    check(got, t, getattr(np, name)(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
def test_reductions_without_identity_refuse_empty_axes(name):
    with pytest.raises(NbyocTypeError, match=r"empty|length 0"):
        nbyoc.call_op(name, nbyoc.var("x", (2, 0)), axis=1)
    assert nbyoc.prod(nbyoc.var("x", (2, 0)), axis=1).shape == (2,)  # prod of nothing is 1


@pytest.mark.parametrize("backend", ["host", "llvm", "csource", "examplejson"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint64"])
def test_clip_at_and_past_the_ends_of_an_integer_range(backend, dtype):
    # A bound at or past the far end binds every element to that end; at or past its
    # own end it binds nothing. (max=0 of an unsigned dtype once never bound.)
    info = np.iinfo(dtype)
    x = np.array([info.min, 0, 5, info.max], dtype)
    cases = [(None, info.min), (None, info.min - 5), (info.max, None), (info.max + 5, None),
             (info.min, None), (None, info.max), (info.min - 5, info.max + 5), (0, 0)]  # fmt: skip
    for low, high in cases:
        v = nbyoc.var("x", (4,), dtype)
        fn = nbyoc.compile(nbyoc.function([v], nbyoc.clip(v, low, high)), backend=backend)
        lo = info.min if low is None else builtins.min(builtins.max(low, info.min), info.max)
        hi = info.max if high is None else builtins.min(builtins.max(high, info.min), info.max)
        expected = np.minimum(np.maximum(x, x.dtype.type(lo)), x.dtype.type(hi))
        np.testing.assert_array_equal(fn(x), expected, err_msg=f"clip({low}, {high})")
