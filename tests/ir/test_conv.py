"""conv, max_pool, avg_pool, batch_norm, layer_norm, gemm and the global pools against
oracles written out here with plain loops (slow, obvious), and on every backend."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import NbyocTypeError
from nbyoc.ir.ops.conv import COORDINATE_MODES, NEAREST_MODES
from tests.helpers import reload


def padded(x, pads, fill):
    k = x.ndim - 2
    return np.pad(x, [(0, 0), (0, 0), *zip(pads[:k], pads[k:])], constant_values=fill)


def window(xp, n, c, start, strides, dilations, kernel):
    """The elements of one window of channel c of batch n, as a flat list."""
    k = len(kernel)
    out = []
    for offsets in itertools.product(*(range(kk) for kk in kernel)):
        idx = tuple(start[d] * strides[d] + offsets[d] * dilations[d] for d in range(k))
        out.append(xp[(n, c, *idx)])
    return out


def conv_oracle(x, w, bias, strides, pads, dilations, group):
    k = x.ndim - 2
    xp = padded(x.astype(np.float64), pads, 0)
    n_ = x.shape[0]
    m_, cg = w.shape[:2]
    kernel = w.shape[2:]
    out_shape = [
        (xp.shape[2 + d] - (dilations[d] * (kernel[d] - 1) + 1)) // strides[d] + 1 for d in range(k)
    ]
    out = np.zeros((n_, m_, *out_shape))
    for n, m in itertools.product(range(n_), range(m_)):
        g = m // (m_ // group)
        for pos in itertools.product(*(range(o) for o in out_shape)):
            total = 0.0
            for ci in range(cg):
                values = window(xp, n, g * cg + ci, pos, strides, dilations, kernel)
                total += np.dot(values, w[m, ci].astype(np.float64).reshape(-1))
            out[(n, m, *pos)] = total + (bias[m] if bias is not None else 0)
    return out


CONV_CASES = [
    # (x shape, w shape, strides, pads, dilations, group, auto_pad, bias)
    ((2, 3, 9), (4, 3, 3), (1,), (0, 0), (1,), 1, "NOTSET", True),
    ((1, 2, 7, 8), (3, 2, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 1, "NOTSET", False),
    ((1, 4, 6, 6), (4, 1, 3, 3), (1, 1), None, (1, 1), 4, "SAME_UPPER", True),  # depthwise
    ((1, 4, 7, 5), (6, 2, 2, 3), (2, 2), None, (1, 1), 2, "SAME_LOWER", False),
    ((1, 2, 4, 5, 3), (2, 2, 2, 3, 2), (1, 2, 1), (0, 1, 1, 1, 0, 0), (1, 1, 2), 1, "NOTSET", True),
    ((2, 2, 6, 6), (2, 2, 3, 3), (1, 1), None, (2, 2), 1, "VALID", False),
]


def _padding_of(x_shape, w_shape, strides, pads, dilations, auto_pad):
    k = len(x_shape) - 2
    if auto_pad == "NOTSET":
        return pads or (0,) * 2 * k
    if auto_pad == "VALID":
        return (0,) * 2 * k
    begins, ends = [], []
    for size, kk, s, d in zip(x_shape[2:], w_shape, strides, dilations):
        total = max(0, (math.ceil(size / s) - 1) * s + d * (kk - 1) + 1 - size)
        lo, hi = total // 2, total - total // 2
        begins.append(lo if auto_pad == "SAME_UPPER" else hi)
        ends.append(hi if auto_pad == "SAME_UPPER" else lo)
    return tuple(begins + ends)


def check_conv(xs, ws, strides, pads, dilations, group, auto_pad, with_bias, seed=1):
    """The host's conv of random data equals the loop oracle's."""
    rng = np.random.default_rng(seed)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in (xs, ws, (ws[0],)))
    params = [nbyoc.var("x", xs), nbyoc.var("w", ws)] + (
        [nbyoc.var("b", b.shape)] if with_bias else []
    )
    y = nbyoc.conv(*params, strides=strides, pads=pads, dilations=dilations, group=group,
                   auto_pad=auto_pad)  # fmt: skip
    got = nbyoc.compile(nbyoc.function(params, y), backend="host")(
        x, w, *([b] if with_bias else [])
    )
    full_pads = _padding_of(xs, ws[2:], strides, pads, dilations, auto_pad)
    want = conv_oracle(x, w, b if with_bias else None, strides, full_pads, dilations, group)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{len(c[0]) - 2}d-{c[6]}-g{c[5]}")
def test_conv_matches_the_loop_oracle(case):
    check_conv(*case)


@st.composite
def window_geometry(draw, max_rank: int = 2, min_rank: int = 1, kernel_sizes=(1, 3)):
    """A random (x shape, kernel, strides, pads, dilations, auto_pad) whose output has at
    least one element per axis."""
    k = draw(st.integers(min_rank, max_rank))
    kernel = tuple(draw(st.integers(*kernel_sizes)) for _ in range(k))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(k))
    dilations = tuple(draw(st.integers(1, 2)) for _ in range(k))
    auto_pad = draw(st.sampled_from(["NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]))
    # pads smaller than the kernel (ONNX's rule), so every window touches the input
    pads = tuple(draw(st.integers(0, kernel[d % k] - 1)) for d in range(2 * k))
    spatial = []
    for d in range(k):
        reach = dilations[d] * (kernel[d] - 1) + 1
        spatial.append(draw(st.integers(max(1, reach - pads[d] - pads[k + d]), reach + 4)))
    if auto_pad == "VALID":
        spatial = [max(n, dilations[d] * (kernel[d] - 1) + 1) for d, n in enumerate(spatial)]
    return (
        tuple(spatial),
        kernel,
        strides,
        pads if auto_pad == "NOTSET" else None,
        dilations,
        auto_pad,
    )


@settings(max_examples=25, deadline=None)
@given(geometry=window_geometry(), groups=st.sampled_from([(1, 1), (2, 1), (2, 2), (3, 3)]),
       batch=st.integers(1, 2), with_bias=st.booleans())  # fmt: skip
def test_conv_geometry_matches_the_loop_oracle(geometry, groups, batch, with_bias):
    """Random kernels, strides, pads (explicit or automatic), dilations and groups
    (depthwise among them) against the loop oracle."""
    spatial, kernel, strides, pads, dilations, auto_pad = geometry
    group, per_group = groups
    xs = (batch, group * per_group, *spatial)
    ws = (group * 2, per_group, *kernel)
    check_conv(xs, ws, strides, pads, dilations, group, auto_pad, with_bias, seed=3)


def pool_oracle(x, kernel, strides, pads, dilations, kind, count_include_pad=False):
    k = len(kernel)
    fill = -np.inf if kind == "max" else np.nan
    xp = padded(x.astype(np.float64), pads, fill)
    out_shape = [(xp.shape[2 + d] - (dilations[d] * (kernel[d] - 1) + 1)) // strides[d] + 1
                 for d in range(k)]  # fmt: skip
    out = np.zeros(x.shape[:2] + tuple(out_shape))
    for n, c in itertools.product(*(range(s) for s in x.shape[:2])):
        for pos in itertools.product(*(range(o) for o in out_shape)):
            values = np.array(window(xp, n, c, pos, strides, dilations, kernel))
            if kind == "max":
                out[(n, c, *pos)] = values.max()
            else:
                real = values[~np.isnan(values)]
                count = values.size if count_include_pad else real.size
                out[(n, c, *pos)] = real.sum() / count
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize(
    "shape, kernel, strides, pads, dilations",
    [((1, 2, 9), (3,), (2,), (1, 1), (1,)), ((2, 3, 7, 6), (3, 2), (2, 1), (1, 0, 1, 1), (1, 2)),
     ((1, 1, 4, 5, 6), (2, 2, 3), (1, 2, 2), (0, 1, 1, 1, 0, 2), (1, 1, 1))],
)  # fmt: skip
@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("backend", ["host", "llvm", "examplejson"])
def test_pools_match_the_loop_oracle(kind, shape, kernel, strides, pads, dilations,
                                     count_include_pad, backend):  # fmt: skip
    if kind == "max" and count_include_pad:
        pytest.skip("count_include_pad is avg_pool's")
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    v = nbyoc.var("x", shape)
    extra = {"count_include_pad": count_include_pad} if kind == "avg" else {}
    y = nbyoc.call_op(f"{kind}_pool", v, kernel_shape=kernel, strides=strides, pads=pads,
                      dilations=dilations, **extra)  # fmt: skip
    fn = reload(nbyoc.compile(nbyoc.function([v], y), backend=backend))
    assert list(fn.runtime_modules) == ([] if backend == "host" else [f"{backend}_0"])
    want = pool_oracle(x, kernel, strides, pads, dilations, kind, count_include_pad)
    np.testing.assert_allclose(fn(x), want, rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(geometry=window_geometry(min_rank=2, kernel_sizes=(4, 7)),
       dtype=st.sampled_from(["float32", "float16", "int8"]), nans=st.integers(0, 3),
       batch=st.integers(1, 2))  # fmt: skip
def test_large_max_pool_windows_match_the_loop_oracle(geometry, dtype, nans, batch):
    """2-D max pools of 16 taps or more take row maxima, then column maxima of those
    (llvm's ``windows._separable_max``): the same elements as the oracle's windows, NaN
    winning, so equal exactly."""
    spatial, kernel, strides, pads, dilations, auto_pad = geometry
    shape = (batch, 3, *spatial)
    rng = np.random.default_rng(6)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    if dtype != "int8":
        x.reshape(-1)[rng.integers(0, x.size, nans)] = np.nan
    v = nbyoc.var("x", shape, dtype)
    y = nbyoc.call_op("max_pool", v, kernel_shape=kernel, strides=strides, pads=pads,
                      dilations=dilations, auto_pad=auto_pad)  # fmt: skip
    full_pads = _padding_of(shape, kernel, strides, pads, dilations, auto_pad)
    want = pool_oracle(x, kernel, strides, full_pads, dilations, "max")
    got = nbyoc.compile(nbyoc.function([v], y), backend="llvm")(x)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want.astype(dtype))


@pytest.mark.parametrize("backend", ["host", "llvm"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_max_pool_lets_nan_win(backend, dtype):
    x = np.array([[[1.0, np.nan, 3.0, 0.0, -np.inf, -np.inf]]], dtype)
    v = nbyoc.var("x", x.shape, dtype)
    f = nbyoc.function([v], nbyoc.max_pool(v, (2,), strides=(2,)))
    got = nbyoc.compile(f, backend)(x)
    np.testing.assert_array_equal(got, np.array([[[np.nan, 3.0, -np.inf]]], dtype))


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda x, w: nbyoc.conv(x, nbyoc.var("w", (4, 2, 3, 3))), "x has 3 channels"),
        (lambda x, w: nbyoc.conv(x, w, group=2), "group must divide"),
        (lambda x, w: nbyoc.conv(x, w, strides=(1,)), "strides needs 2 positive values"),
        (lambda x, w: nbyoc.conv(x, w, pads=(1, 1)), "pads holds 2 begins then 2 ends"),
        (lambda x, w: nbyoc.conv(x, w, auto_pad="SAME"), "auto_pad must be one of"),
        (lambda x, w: nbyoc.conv(x, nbyoc.var("k", (4, 3, 9, 9))), "window .* is larger"),
        (lambda x, w: nbyoc.max_pool(x, (2,)), "kernel_shape needs 2 positive sizes"),
        (lambda x, w: nbyoc.max_pool(x, (2, 2), pads=(2, 0, 0, 0)), "smaller than the kernel"),
    ],
)
def test_windowed_ops_say_what_is_wrong(build, message):
    with pytest.raises(NbyocTypeError, match=message):
        build(nbyoc.var("x", (1, 3, 8, 8)), nbyoc.var("w", (4, 3, 3, 3)))


@pytest.mark.parametrize("backend", ["host", "llvm", "csource", "examplejson"])
def test_norms_gemm_and_global_pools_on_every_backend(backend):
    rng = np.random.default_rng(3)
    x, s, b, m, v = (nbyoc.var(n, sh) for n, sh in
                     [("x", (2, 3, 4, 5)), ("s", (3,)), ("b", (3,)), ("m", (3,)), ("v", (3,))])  # fmt: skip
    a, bb, c = nbyoc.var("a", (4, 6)), nbyoc.var("bb", (5, 6)), nbyoc.var("c", (5,))
    ls, lb = nbyoc.var("ls", (4, 5)), nbyoc.var("lb", (5,))
    outs = [nbyoc.batch_norm(x, s, b, m, v, 1e-3), nbyoc.layer_norm(x, ls, lb, axis=2),
            nbyoc.gemm(a, bb, c, 0.5, 2.0, False, True), nbyoc.global_avg_pool(x),
            nbyoc.global_max_pool(x)]  # fmt: skip
    f = nbyoc.function([x, s, b, m, v, a, bb, c, ls, lb], outs)
    args = [rng.standard_normal(p.type.shape).astype(np.float32) for p in f.params]
    args[4] = np.abs(args[4])
    X, S, B, M, V, A, BB, C, LS, LB = (arr.astype(np.float64) for arr in args)
    per = (slice(None), None, None)
    mu, var = X.mean((2, 3), keepdims=True), X.var((2, 3), keepdims=True)
    want = [(X - M[per]) / np.sqrt(V[per] + 1e-3) * S[per] + B[per],
            (X - mu) / np.sqrt(var + 1e-5) * LS + LB, 0.5 * (A @ BB.T) + 2 * C,
            X.mean((2, 3), keepdims=True), X.max((2, 3), keepdims=True)]  # fmt: skip
    got = reload(nbyoc.compile(f, backend=backend))(*args)
    for g, w_ in zip(got, want):
        assert g.dtype == np.float32 and g.shape == w_.shape
        np.testing.assert_allclose(g, w_, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    "y_shape, w_shape, strides, pads, dilations, group",
    [((2, 3, 9), (4, 3, 3), (2,), (1, 0), (1,), 1),
     ((1, 4, 8, 7), (6, 2, 3, 2), (2, 3), (1, 1, 0, 1), (1, 2), 2),
     ((1, 2, 5, 6, 4), (2, 2, 2, 3, 2), (1, 2, 2), (0, 1, 1, 1, 0, 0), (2, 1, 1), 1)],
)  # fmt: skip
def test_conv_transpose_is_the_adjoint_of_conv(y_shape, w_shape, strides, pads, dilations, group):
    """<conv(y, w), x> = <y, conv_transpose(x, w)> for every x, y: the definition of the
    transposed convolution, checked without a second implementation."""
    rng = np.random.default_rng(4)
    y, w = rng.standard_normal(y_shape), rng.standard_normal(w_shape)
    attrs = {"strides": strides, "pads": pads, "dilations": dilations, "group": group}
    yv, wv = nbyoc.var("y", y_shape, "float64"), nbyoc.var("w", w_shape, "float64")
    forward = nbyoc.conv(yv, wv, **attrs)
    x = rng.standard_normal(forward.shape)
    k = len(y_shape) - 2
    extra = tuple(
        (y_shape[2 + i] + pads[i] + pads[k + i] - (dilations[i] * (w_shape[2 + i] - 1) + 1))
        % strides[i] for i in range(k)
    )  # fmt: skip
    xv = nbyoc.var("x", forward.shape, "float64")
    back = nbyoc.conv_transpose(xv, wv, output_padding=extra, **attrs)
    assert back.shape == y_shape
    f = nbyoc.function([yv, wv, xv], [forward, back])
    conv_y, transposed_x = nbyoc.compile(f, backend="host")(y, w, x)
    np.testing.assert_allclose(np.vdot(conv_y, x), np.vdot(y, transposed_x), rtol=1e-10)


def test_conv_transpose_with_bias_and_its_errors():
    x, w, b = nbyoc.var("x", (1, 4, 3, 3)), nbyoc.var("w", (4, 2, 2, 2)), nbyoc.var("b", (2,))
    y = nbyoc.conv_transpose(x, w, b, strides=(2, 2))
    fn = nbyoc.compile(nbyoc.function([x, w, b], y), backend="host")
    ones = [np.ones(v.type.shape, np.float32) for v in (x, w, b)]
    np.testing.assert_allclose(fn(*ones), np.full((1, 2, 6, 6), 4 + 1, np.float32))
    with pytest.raises(NbyocTypeError, match="output_padding must be below the stride"):
        nbyoc.conv_transpose(x, w, output_padding=(2, 2))
    with pytest.raises(NbyocTypeError, match="w must be"):
        nbyoc.conv_transpose(x, nbyoc.var("v", (3, 2, 2, 2)))


GRID = np.array([[[[1, 2], [3, 4]]]], np.float32)


@pytest.mark.parametrize(
    "attrs, want",
    [
        # ONNX's resize_upsample_scales_nearest and _linear node cases (half_pixel).
        ({"scales": (1, 1, 2, 3)}, np.repeat(np.repeat(GRID, 2, axis=2), 3, axis=3)[0, 0]),
        ({"scales": (1, 1, 2, 2), "mode": "linear"},
         [[1, 1.25, 1.75, 2], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5], [3, 3.25, 3.75, 4]]),
        ({"sizes": (1, 1, 3, 3), "mode": "linear", "coordinate_transformation_mode": "align_corners"},
         [[1, 1.5, 2], [2, 2.5, 3], [3, 3.5, 4]]),
        ({"sizes": (1, 1, 1, 1), "mode": "linear",
          "coordinate_transformation_mode": "pytorch_half_pixel"}, [[1]]),
        ({"scales": (1, 1, 0.6, 0.6), "coordinate_transformation_mode": "asymmetric",
          "nearest_mode": "floor"}, [[1]]),
        ({"scales": (1, 1, 1.5, 1.5), "nearest_mode": "round_prefer_ceil"},
         [[1, 2, 2], [3, 4, 4], [3, 4, 4]]),
    ],
)  # fmt: skip
@pytest.mark.parametrize("backend", ["host", "llvm"])
def test_resize_gives_known_values(attrs, want, backend):
    x = nbyoc.var("x", GRID.shape)
    y = nbyoc.resize(x, **attrs)
    again = nbyoc.parse(str(nbyoc.function([x], y))).body  # the normal form survives
    assert nbyoc.structural_equal(again, y)
    fn = reload(nbyoc.compile(nbyoc.function([x], y), backend=backend))
    assert list(fn.runtime_modules) == ([] if backend == "host" else ["llvm_0"])
    np.testing.assert_allclose(fn(GRID)[0, 0], np.asarray(want, np.float32), rtol=1e-6)


@settings(max_examples=12, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple),
    factors=st.lists(st.sampled_from([0.5, 0.6, 1.0, 1.5, 2.0, 3.0]), min_size=4, max_size=4),
    by_sizes=st.booleans(),
    mode=st.sampled_from(["nearest", "linear"]),
    coordinates=st.sampled_from(COORDINATE_MODES),
    nearest=st.sampled_from(NEAREST_MODES),
    dtype=st.sampled_from(["float32", "float64", "float16", "uint8"]),
)
def test_resize_on_llvm_matches_the_host(shape, factors, by_sizes, mode, coordinates, nearest,
                                         dtype):  # fmt: skip
    """Random shapes, scales or sizes, modes and dtypes: llvm computes each output's
    source positions as the host does (nearest: the same elements, exactly)."""
    if mode == "linear" and dtype == "uint8":
        dtype = "float32"
    scales = tuple(factors[: len(shape)])
    sizes = tuple(max(1, int(n * f)) for n, f in zip(shape, scales))
    x = nbyoc.var("x", shape, dtype)
    y = nbyoc.resize(x, sizes=sizes if by_sizes else None, scales=None if by_sizes else scales,
                     mode=mode, coordinate_transformation_mode=coordinates,
                     nearest_mode=nearest)  # fmt: skip
    f = nbyoc.function([x], y)
    data = (np.random.default_rng(5).uniform(0, 9, shape)).astype(dtype)
    want = nbyoc.compile(f, backend="host")(data)
    fn = nbyoc.compile(f, backend="llvm")
    assert list(fn.runtime_modules) == (["llvm_0"] if y.type.size else [])  # empty: host
    got = fn(data)
    assert got.dtype == want.dtype and got.shape == want.shape
    if mode == "nearest":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-3 if dtype == "float16" else 1e-5)


def test_resize_refuses_what_it_cannot_mean():
    x = nbyoc.var("x", (1, 1, 2, 2))
    with pytest.raises(NbyocTypeError, match="give sizes or scales"):
        nbyoc.resize(x)
    with pytest.raises(NbyocTypeError, match="scales needs 4 positive, finite values"):
        nbyoc.resize(x, scales=(2, 2))
    with pytest.raises(NbyocTypeError, match="linear mode takes float tensors"):
        nbyoc.resize(nbyoc.var("i", (1, 1, 2, 2), "int32"), scales=(1, 1, 2, 2), mode="linear")
    with pytest.raises(NbyocTypeError, match="coordinate_transformation_mode must be one of"):
        nbyoc.resize(x, scales=(1, 1, 2, 2), coordinate_transformation_mode="tf_crop_and_resize")


@settings(max_examples=10, deadline=None)
@given(geometry=window_geometry(max_rank=3), kind=st.sampled_from(["max", "avg"]),
       count_include_pad=st.booleans(), dtype=st.sampled_from(["float32", "float64"]))  # fmt: skip
def test_pool_geometry_matches_the_loop_oracle(geometry, kind, count_include_pad, dtype):
    """Random windows on the host and on llvm, against the loop oracle."""
    spatial, kernel, strides, pads, dilations, auto_pad = geometry
    shape = (1, 2, *spatial)
    x = np.random.default_rng(4).standard_normal(shape).astype(dtype)
    v = nbyoc.var("x", shape, dtype)
    extra = {"count_include_pad": count_include_pad} if kind == "avg" else {}
    y = nbyoc.call_op(f"{kind}_pool", v, kernel_shape=kernel, strides=strides, pads=pads,
                      dilations=dilations, auto_pad=auto_pad, **extra)  # fmt: skip
    full_pads = _padding_of(shape, kernel, strides, pads, dilations, auto_pad)
    want = pool_oracle(x, kernel, strides, full_pads, dilations, kind, count_include_pad)
    for backend in ("host", "llvm"):
        got = nbyoc.compile(nbyoc.function([v], y), backend=backend)(x)
        assert got.dtype == x.dtype, backend
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=backend)


@pytest.mark.parametrize(
    "make",
    [
        lambda: nbyoc.conv(nbyoc.var("x", (4,)), nbyoc.var("w", (4,))),
        lambda: nbyoc.conv(nbyoc.var("x", (1,)), nbyoc.var("w", (1,))),
        lambda: nbyoc.max_pool(nbyoc.var("x", (4,)), kernel_shape=(1,)),
        lambda: nbyoc.avg_pool(nbyoc.var("x", (1, 4)), kernel_shape=(1,)),
    ],
)
def test_windowed_ops_on_inputs_without_a_spatial_axis_are_type_errors(make):
    # issue 35: conv on 1-D input raised IndexError; a pool said "needs -1 positive sizes".
    with pytest.raises(NbyocTypeError, match=r"needs \(N, C, spatial...\) input"):
        make()


@pytest.mark.parametrize("scale", [float("inf"), float("nan"), 0.0, -2.0])
def test_resize_scales_must_be_positive_and_finite(scale):
    # issue 35: an infinite scale raised OverflowError computing the output size.
    with pytest.raises(NbyocTypeError, match="scales needs 4 positive, finite values"):
        nbyoc.resize(nbyoc.var("x", (1, 1, 2, 2)), scales=(1.0, 1.0, scale, 1.0))


def test_conv_transpose_makes_only_the_output_its_pads_keep():
    # issue 35 (found by the from_onnx fuzz test): a stride of 2**40 cropped back by pads
    # to a small output made a 128 TiB array before cropping.
    import tracemalloc

    stride = 2**40
    x, w = nbyoc.var("x", (1, 1, 3)), nbyoc.var("w", (1, 1, 3))
    # Uncropped: 2 * stride + 3 positions; the pads keep positions 1 to 7, where only
    # x[0] * w[1] and x[0] * w[2] land.
    y = nbyoc.conv_transpose(x, w, strides=(stride,), pads=(1, 2 * stride - 5))
    assert y.shape == (1, 1, 7)
    run = nbyoc.compile(nbyoc.function([x, w], y), backend=[])
    tracemalloc.start()
    try:
        got = run(np.ones((1, 1, 3), np.float32), np.array([[[1, 2, 3]]], np.float32))
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    np.testing.assert_array_equal(got, [[[2, 3, 0, 0, 0, 0, 0]]])
    assert peak < 1 << 20
