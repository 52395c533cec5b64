"""norm against np.linalg.norm for every ord NumPy defines for vectors and matrices,
every axis form and keepdims, in float32, float64 and int32; svdvals; and the NumPy
spellings nbyoc.jit maps onto them (np.linalg.norm, vector_norm, matrix_norm, svdvals)."""

import math

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError

VECTOR_ORDS = [None, 2, math.inf, -math.inf, 0, 1, -1, 3, 0.5, -2.5]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]
CASES = [
    *((o, axis, k) for o in VECTOR_ORDS for axis in (0, 1, -1) for k in (False, True)),
    *((o, axis, k) for o in MATRIX_ORDS for axis in ((0, 1), (2, 0), (-1, -2))
      for k in (False, True)),
    (None, None, False), (None, None, True),
]  # fmt: skip


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_every_norm_like_numpy(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4, 5)) * 3).astype(dtype)
    x.flat[::7] = 0  # (zeros: ord=0 counts them out, negative orders meet them)
    v = nbyoc.var("x", x.shape, dtype)
    outs = [nbyoc.norm(v, o, a, k) for o, a, k in CASES]
    with np.errstate(divide="ignore"):
        got = nbyoc.compile(nbyoc.function([v], outs), backend="host")(x)
        for (o, a, k), g in zip(CASES, got):
            w = np.linalg.norm(x, o, a, k)
            assert g.dtype == w.dtype and g.shape == w.shape, (o, a, k)
            rtol = 1e-5 if dtype == "float32" else 1e-12
            np.testing.assert_allclose(g, w, rtol=rtol, err_msg=str((o, a, k)))


@pytest.mark.parametrize("shape", [(5,), (3, 4), ()])
def test_norms_without_an_axis_like_numpy(shape):
    x = np.random.default_rng(1).standard_normal(shape)
    ords = [None] if not shape else VECTOR_ORDS[:8] if len(shape) == 1 else MATRIX_ORDS
    v = nbyoc.var("x", shape, "float64")
    outs = [nbyoc.norm(v, o, keepdims=k) for o in ords for k in (False, True)]
    got = nbyoc.compile(nbyoc.function([v], outs), backend="host")(x)
    for (o, k), g in zip([(o, k) for o in ords for k in (False, True)], got):
        w = np.linalg.norm(x, o, keepdims=k)
        assert g.shape == np.shape(w), (o, k)
        np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=str(o))


def test_norm_runs_fused_on_llvm():
    """The issue's example: row norms (abs, multiply, sum, sqrt: all llvm's)."""

    @nbyoc.jit
    def normalise(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    x = np.random.default_rng(2).standard_normal((64, 100)).astype(np.float32)
    np.testing.assert_allclose(normalise(x), x / np.linalg.norm(x, axis=1, keepdims=True),
                               rtol=1e-6)  # fmt: skip
    fn = nbyoc.compile(normalise.trace(x), backend="llvm")
    assert str(fn.module["main"].body).startswith("@llvm_0(%x)")  # (all of it on llvm)


def test_svdvals_like_numpy():
    x = np.random.default_rng(3).standard_normal((2, 4, 3)).astype(np.float32)
    v = nbyoc.var("x", x.shape)
    got = nbyoc.compile(nbyoc.function([v], nbyoc.svdvals(v)), backend="host")(x)
    np.testing.assert_allclose(got, np.linalg.svd(x, compute_uv=False), rtol=1e-5)
    assert got.dtype == np.float32 and got.shape == (2, 3)


@pytest.mark.parametrize(
    "build,needle",
    [
        (lambda v: nbyoc.norm(v, "fro", axis=1), "is a matrix norm"),
        (lambda v: nbyoc.norm(v, 3, axis=(0, 1)), "no matrix norm"),
        (lambda v: nbyoc.norm(v, 1), "give axis"),
        (lambda v: nbyoc.norm(v, axis=(1, 1)), "names one axis twice"),
        (lambda v: nbyoc.norm(v, axis=3), "out of range"),
        (lambda v: nbyoc.svdvals(v[0, 0]), "needs a matrix"),
        (lambda v: nbyoc.svdvals(nbyoc.cast(v, "float16")), "cast x to float32"),
    ],
)
def test_errors_say_what_to_do(build, needle):
    with pytest.raises(NbyocTypeError, match=needle):
        build(nbyoc.var("x", (3, 4, 5)))


def test_jit_maps_numpy_norm_spellings():
    def f(x):
        return (
            np.linalg.norm(x, axis=1),
            np.linalg.norm(x[0], ord="nuc"),
            np.linalg.norm(x, ord=np.inf, axis=(1, 2), keepdims=True),
            np.linalg.vector_norm(x, axis=(0, 2), ord=3, keepdims=True),
            np.linalg.vector_norm(x),
            np.linalg.matrix_norm(x, ord=-1),
            np.linalg.svdvals(x),
        )

    x = np.random.default_rng(4).standard_normal((3, 4, 5))
    for g, w in zip(nbyoc.jit(f, backend="host")(x), f(x)):
        assert g.shape == np.shape(w) and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-12)
