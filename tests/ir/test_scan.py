"""The scans (cumsum, cumprod, cummax, cummin, logcumsumexp) against NumPy's
``accumulate``: every axis, reverse and exclusive, the dtypes NumPy gives, on the host
and on every backend; and the NumPy spellings nbyoc.jit maps onto them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import NbyocTypeError
from tests.helpers import reload

from ..codegen.test_log1p_expm1 import offloaded_ops

#: op -> (the ufunc whose accumulate it is, the identity the oracle starts from).
UFUNCS = {
    "cumsum": (np.add, 0),
    "cumprod": (np.multiply, 1),
    "cummax": (np.maximum, None),
    "cummin": (np.minimum, None),
    "logcumsumexp": (np.logaddexp, -np.inf),
}
DTYPES = ["float32", "float64", "int32", "int8", "uint16", "bool", "float16"]


def oracle(op, x, axis, reverse, exclusive):
    """NumPy's accumulate, written apart from the op's reference: an exclusive scan is the
    inclusive scan of the identity followed by all but the last element."""
    ufunc, identity = UFUNCS[op]
    dtype = {"cumsum": np.cumsum, "cumprod": np.cumprod}.get(op)
    dtype = dtype(x[:0].reshape(0)).dtype if dtype else ufunc.accumulate(x.reshape(-1)[:1]).dtype
    x = x.astype(dtype)
    if reverse:
        x = np.flip(x, axis)
    if exclusive and x.shape[axis]:
        if identity is None:  # the extremes' identities: the dtype's ends
            lowest = op == "cummax"
            if dtype.kind == "b":
                identity = not lowest
            elif dtype.kind == "f":
                identity = -np.inf if lowest else np.inf
            else:
                identity = np.iinfo(dtype).min if lowest else np.iinfo(dtype).max
        first = np.full(np.take(x, [0], axis).shape, identity, dtype)
        x = np.concatenate([first, np.take(x, np.arange(x.shape[axis] - 1), axis)], axis)
    out = ufunc.accumulate(x, axis=axis, dtype=dtype)
    return np.flip(out, axis) if reverse else out


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0 if dtype.startswith("u") else -3, 4, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


def check(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    if want.dtype.kind == "f":
        rtol = {2: 1e-3, 4: 1e-6}.get(want.dtype.itemsize, 1e-12)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(
    op=st.sampled_from(list(UFUNCS)),
    dtype=st.sampled_from(DTYPES),
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple),
    axis=st.integers(-3, 2),
    reverse=st.booleans(),
    exclusive=st.booleans(),
)
def test_scans_match_numpy_on_the_host(op, dtype, shape, axis, reverse, exclusive):
    if not -len(shape) <= axis < len(shape):
        with pytest.raises(NbyocTypeError, match="out of range"):
            nbyoc.call_op(op, nbyoc.var("x", shape, dtype), axis=axis)
        return
    x = data(shape, dtype)
    v = nbyoc.var("x", shape, dtype)
    node = nbyoc.call_op(op, v, axis=axis, reverse=reverse, exclusive=exclusive)
    got = nbyoc.compile(nbyoc.function([v], node), backend="host")(x)
    want = oracle(op, x, axis % len(shape), reverse, exclusive)
    assert node.type.dtype == want.dtype.name
    check(got, want)


def test_exclusive_and_reverse_as_onnx_cumsum_defines_them():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    v = nbyoc.var("x", (5,), "float64")
    outs = [nbyoc.cumsum(v, 0, r, e) for r in (False, True) for e in (False, True)]
    got = nbyoc.compile(nbyoc.function([v], outs), backend="host")(x)
    want = [[1, 3, 6, 10, 15], [0, 1, 3, 6, 10], [15, 14, 12, 9, 5], [14, 12, 9, 5, 0]]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_nan_propagates_through_running_extremes_and_sums():
    x = np.array([[1.0, np.nan, 3.0, 0.5]], np.float32)
    v = nbyoc.var("x", x.shape)
    outs = [nbyoc.call_op(op, v, axis=1) for op in UFUNCS]
    with np.errstate(invalid="ignore"):
        got = nbyoc.compile(nbyoc.function([v], outs), backend="host")(x)
        for op, g in zip(UFUNCS, got):
            np.testing.assert_array_equal(g, oracle(op, x, 1, False, False), err_msg=op)


def test_a_scan_of_a_0d_tensor_says_to_reshape_it():
    with pytest.raises(NbyocTypeError, match=r"cumsum.*0-d tensor has no axis.*reshape"):
        nbyoc.call_op("cumsum", nbyoc.var("s", ()), axis=0)
    assert nbyoc.cumsum(nbyoc.var("s", ())).shape == (1,)  # (no axis: flattened, as NumPy)


def test_jit_maps_numpy_scans_functions_ufunc_methods_and_array_methods():
    def f(x):
        return (
            np.cumsum(x, axis=1),
            np.cumsum(x),
            np.cumprod(x, axis=0, dtype=np.float64),
            x.cumsum(1),
            x.cumprod(),
            np.add.accumulate(x, axis=1),
            np.multiply.accumulate(x),
            np.maximum.accumulate(x, axis=1),
            np.minimum.accumulate(x),
            np.logaddexp.accumulate(x, axis=1),
            np.cumulative_sum(x, axis=1, include_initial=True),
            np.cumulative_prod(x, axis=0),
            np.cumsum(x, axis=1, dtype=np.int8),
        )

    for dtype in ("int32", "float32", "bool"):
        x = data((3, 4), dtype, seed=1)
        with np.errstate(all="ignore"):
            want = f(x)
        for got, w in zip(nbyoc.jit(f, backend="host")(x), want):
            check(got, w)


def test_moving_average_by_cumsum_runs_in_jit():
    """The issue's example: a moving average as a difference of running sums."""

    @nbyoc.jit(static_argnames=["w"])
    def moving_average(x, w=3):
        c = np.cumsum(x, axis=-1)
        return (c[..., w:] - c[..., :-w]) / w

    x = np.random.default_rng(2).standard_normal((4, 50))
    c = np.cumsum(x, axis=-1)
    np.testing.assert_allclose(moving_average(x), (c[..., 3:] - c[..., :-3]) / 3, rtol=1e-12)


#: (op, dtype, axis, reverse, exclusive) run on every backend: each op, every axis of a
#: 3-D operand (a run per task on the last, lanes of columns on the others), both
#: directions, a widening sum, float16 and bool.
BACKEND_CASES = [
    ("cumsum", "float32", 2, False, False), ("cumsum", "int32", 1, True, True),
    ("cumprod", "float64", 0, True, False), ("cummax", "float32", 1, False, True),
    ("cummin", "int8", 2, True, True), ("logcumsumexp", "float32", 0, False, False),
    ("cumsum", "float16", 2, True, False), ("cummax", "bool", 0, False, False),
]  # fmt: skip


@pytest.mark.parametrize("backend", ["llvm", "csource", "examplejson"])
def test_scans_on_every_backend(backend):
    # (examplejson runs llvm's kernel of each op: three of them show it takes the scans)
    cases = BACKEND_CASES[-3:] if backend == "examplejson" else BACKEND_CASES
    xs = {d: data((3, 5, 300), d, seed=3) for d in dict.fromkeys(c[1] for c in cases)}
    vs = {d: nbyoc.var(f"x_{d}", x.shape, d) for d, x in xs.items()}
    outs = [nbyoc.call_op(op, nbyoc.identity(vs[d]), axis=a, reverse=r, exclusive=e)
            for op, d, a, r, e in cases]  # fmt: skip
    fn = reload(nbyoc.compile(nbyoc.function(list(vs.values()), outs), backend=backend))
    if backend != "csource":  # (csource has no scan rows: the host runs them)
        assert {op for op, *_ in cases} <= offloaded_ops(fn)
    for (op, d, axis, r, e), got in zip(cases, fn(*xs.values())):
        want = oracle(op, xs[d], axis, r, e)
        check(got, want)
        if op != "logcumsumexp":  # (step by step in NumPy's order and dtype: to the bit)
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["host", "llvm"])
def test_logaddexp_itself_like_numpy_at_the_edges(backend):
    def f(a, b):
        return np.logaddexp(a, b), np.logaddexp(a, 0.5), np.logaddexp(b.astype(np.int8), 2)

    a = np.array([1.0, -np.inf, np.inf, np.inf, np.nan, 1000.0, -1000.0, 3.0, 1e-300])
    b = np.array([2.0, -np.inf, np.inf, -np.inf, 0.0, 1000.0, -999.0, 3.0, 0.0])
    with np.errstate(all="ignore"):
        for got, want in zip(nbyoc.jit(f, backend=backend)(a, b), f(a, b)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-15 if want.dtype == np.float64 else 1e-3)
