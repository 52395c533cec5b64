"""``nbyoc.jit``: NumPy functions traced per signature, compared with NumPy itself
(values, dtype, shape, scalar or array) on every backend, two signatures each."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError

from .numpy_corpus import CASES, STATIC

BACKENDS = ["llvm", "csource", "examplejson"]
#: The corpus functions every backend runs by default (a row group, a matmul, slicing,
#: gather, integer and bool dtypes, casts, static and weak arguments, two outputs); the
#: whole corpus runs on llvm, and on the other backends with --run-slow.
QUICK = {"softmax", "layer_norm", "mlp", "laplacian", "gather_rows", "accuracy",
         "integer_arithmetic", "to_uint8", "polynomial", "weighted_sum", "two_outputs",
         "nan_safe"}  # fmt: skip


def corpus_cases() -> list:
    return [
        pytest.param(name, backend, marks=() if backend == "llvm" or name in QUICK
                     else pytest.mark.slow)
        for name in sorted(CASES)
        for backend in BACKENDS
    ]  # fmt: skip


def assert_like_numpy(got, expected, name: str) -> None:
    """Same structure, NumPy scalar where NumPy gives one, same dtype and shape, and the
    values: exact for integers and bools, within rounding for floats."""
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), name
        for g, e in zip(got, expected):
            assert_like_numpy(g, e, name)
        return
    assert isinstance(got, np.ndarray) == isinstance(expected, np.ndarray), (name, got)
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (name, got, expected)
    if expected.dtype.kind == "f":
        rtol = 2e-5 if expected.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name,backend", corpus_cases())
def test_the_corpus_matches_numpy_on_two_signatures(name, backend):
    fn, first, second = CASES[name]
    jitted = nbyoc.jit(fn, backend=backend, static_argnames=STATIC.get(name, ()))
    for make in (first, second):
        args = make()
        assert_like_numpy(jitted(*args), fn(*args), name)
        assert_like_numpy(jitted(*make()), fn(*args), name)  # the compiled path, again
    assert len(jitted.signatures) == 2, jitted.signatures


def test_the_corpus_has_forty_functions_or_more():
    assert len(CASES) >= 40


def test_a_signature_is_traced_once_and_scalars_are_inputs_not_constants():
    traces = []

    def scale(x, s):
        traces.append(1)
        return x * s

    jitted = nbyoc.jit(scale)
    x = np.arange(4, dtype=np.float32)
    for s in (2.0, 3.5, -1.0):
        assert_like_numpy(jitted(x, s), scale(x, s), "scale")
    assert len(traces) == 1 + 3  # one trace, then NumPy's own three calls above
    assert jitted.signatures == ["(x: float32[4], s: float)"]
    jitted(x, 2)  # an int is another kind of weak scalar
    jitted(np.arange(4), 2.0)  # int64 * float -> float64, as in NumPy
    assert jitted(np.arange(4), 2.0).dtype == np.float64
    assert len(jitted.signatures) == 3


def test_numpy_scalars_are_strong_python_scalars_weak():
    jitted = nbyoc.jit(lambda x, s: x + s)
    x = np.ones(3, np.float32)
    assert jitted(x, 1.5).dtype == np.float32  # weak: follows the array
    assert jitted(x, np.float64(1.5)).dtype == (x + np.float64(1.5)).dtype
    i = np.ones(3, np.int8)
    assert jitted(i, 3).dtype == np.int8 and jitted(i, 3.0).dtype == np.float64


def test_keywords_defaults_and_static_arguments():
    def f(x, axis=0, scale=2.0):
        return x.sum(axis=axis) * scale

    jitted = nbyoc.jit(f, static_argnames=["axis"])
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert_like_numpy(jitted(x), f(x), "f")
    assert_like_numpy(jitted(x, axis=1), f(x, axis=1), "f")
    assert_like_numpy(jitted(x, 1, scale=0.5), f(x, 1, scale=0.5), "f")
    assert sorted(jitted.signatures) == [
        "(x: float64[3, 4], axis=0, scale: float)",
        "(x: float64[3, 4], axis=1, scale: float)",
    ]


def test_trace_returns_the_function_and_the_executable_is_reused():
    jitted = nbyoc.jit(lambda a, b: np.tanh(a) @ b)
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    traced = jitted.trace(a, b)
    assert isinstance(traced, nbyoc.ir.Function)
    assert "tanh" in str(traced) and "matmul" in str(traced)
    assert nbyoc.parse(str(traced)) is not None
    assert jitted.signatures == []  # tracing compiles nothing
    jitted(a, b)
    assert jitted.signatures == ["(a: float32[2, 3], b: float32[3, 4])"]


def test_decorator_with_options_and_repr():
    @nbyoc.jit(backend="csource")
    def double(x):
        return x + x

    assert double.__name__ == "double" and "double" in repr(double)
    assert_like_numpy(double(np.ones(3)), np.full(3, 2.0), "double")


def test_an_unsupported_numpy_function_names_itself_and_the_user_s_line():
    def f(x):
        return np.nancumsum(x)  # the line the error must show

    with pytest.raises(NbyocTypeError, match=r"numpy\.nancumsum") as raised:
        nbyoc.jit(f)(np.ones(3))
    message = str(raised.value)
    assert "test_numpy_jit.py" in message and "return np.nancumsum(x)" in message


def test_branching_on_a_traced_value_points_at_np_where():
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(NbyocTypeError, match=r"np\.where") as raised:
        nbyoc.jit(f)(np.ones(3))
    assert "if x.sum() > 0:" in str(raised.value)


@pytest.mark.parametrize(
    "fn,args,needle",
    [
        (lambda x: float(x.sum()), (np.ones(2),), "float\\(\\) of a graph value"),
        (lambda x, axis: x.sum(axis=axis), (np.ones((2, 2)), [0]), "hashable"),
        (lambda x: np.where(x > 0), (np.ones(2),), "np.where\\(c, x, y\\)"),
        (lambda x: "text", (np.ones(2),), "returned str"),
    ],
)
def test_bad_uses_raise_clear_errors(fn, args, needle):
    with pytest.raises(NbyocTypeError, match=needle):
        nbyoc.jit(fn)(*args)


def test_wrong_arguments_and_functions_are_refused():
    jitted = nbyoc.jit(lambda x, y: x + y)
    with pytest.raises(NbyocTypeError, match="missing a required argument"):
        jitted(np.ones(2))
    with pytest.raises(NbyocTypeError, match="no \\*args"):
        nbyoc.jit(lambda *xs: xs[0])
    with pytest.raises(NbyocTypeError, match="no parameter"):
        nbyoc.jit(lambda x: x, static_argnames=["y"])
    with pytest.raises(NbyocTypeError, match="takes a function"):
        nbyoc.jit(3)


def test_a_fresh_process_finds_the_kernels_of_a_seen_signature_on_disk(tmp_path):
    code = (
        "import numpy as np, nbyoc\n"
        "@nbyoc.jit\n"
        "def f(x, y):\n"
        "    return np.exp(x) * y + 1.0\n"
        "x = np.ones((8, 8), np.float32)\n"
        "np.testing.assert_allclose(f(x, x), np.exp(x) * x + 1.0, rtol=1e-6)\n"
        "(executable,) = [entry[2] for entry in f._compiled.values()]\n"
        "stats = executable.runtime_modules['llvm_0'].kernel.stats\n"
        "print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))\n"
    )
    env = dict(os.environ, NBYOC_CACHE_DIR=str(tmp_path))
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    assert runs[0].stdout.split()[1] != "0", "the first process compiles"
    assert runs[1].stdout.split() == ["1", "0"], "the second finds Numba's disk cache"


def test_alternating_signatures_each_get_their_own_code():
    """The last signature is tried first; any other call must still get NumPy's answer."""
    jitted = nbyoc.jit(lambda x, s: x * s)
    f32, f64, i32 = np.ones(3, np.float32), np.ones(3), np.ones(3, np.int32)
    calls = [(f32, 2.0), (f64, 2.0), (f32, 2.0), (f32, 2), (f32, np.asarray(2.0)),
             (i32, 2.5), (f32, True), (np.ones(4, np.float32), 2.0), (f32, 2.0)]  # fmt: skip
    for x, s in calls * 2:
        assert_like_numpy(jitted(x, s), x * s, f"{x.dtype} * {type(s).__name__}")
    # seven signatures, and for the one whose length changed a size-generic version
    assert len(jitted.signatures) == 8 and "(x: float32[s0], s: float)" in jitted.signatures


def test_defaults_then_positional_calls_of_other_lengths():
    def f(x, scale=2.0, shift=None):
        return x * scale if shift is None else x * scale + shift

    jitted = nbyoc.jit(f)
    x = np.arange(3, dtype=np.float32)
    for args in [(x,), (x, 3.0), (x,), (x, 3.0, 1.0), (x, 3.0), (x,)]:
        assert_like_numpy(jitted(*args), f(*args), "f")


@pytest.mark.parametrize(
    "dtype,n", [(np.uint8, -1), (np.uint8, 256), (np.int8, 300), (np.int8, -129),
                (np.int32, 2**40), (np.uint64, -1), (np.int64, 2**63), (np.float32, 2**64)],
)  # fmt: skip
def test_a_python_int_that_does_not_fit_its_array_raises_overflow_as_numpy_does(dtype, n):
    # issue 35, item 3: the kernel would wrap it (uint8 + -1 -> 255 more)
    add = nbyoc.jit(lambda x, n: x + n, backend="host")
    x = np.array([1, 2], dtype)
    if np.dtype(dtype).kind in "iu":
        with pytest.raises(OverflowError):
            x + n
    else:  # NumPy converts it to float; nbyoc.jit traces Python ints as int64
        assert np.isfinite(x + n).all()
    with pytest.raises(
        nbyoc.errors.ValueOutOfRangeError, match=f"Python integer {n} out of bounds"
    ):
        add(x, n)


def test_python_ints_in_range_and_computed_ones_are_checked_like_numpy():
    f = nbyoc.jit(lambda x, n, m: x + (n * 2 - m))
    x = np.array([1, 2], np.uint8)
    for n, m in [(3, 1), (127, 0), (0, 0), (1, 2)]:
        if 0 <= n * 2 - m <= 255:
            np.testing.assert_array_equal(f(x, n, m), x + (n * 2 - m))
        else:
            with pytest.raises(nbyoc.errors.ValueOutOfRangeError, match="Python-int expression"):
                f(x, n, m)
    # the bounds of the dtype itself pass, on both ends; a float partner takes any int64
    mul = nbyoc.jit(lambda x, n: x * n)
    for n in (-128, 127):
        np.testing.assert_array_equal(mul(np.ones(2, np.int8), n), np.ones(2, np.int8) * n)
    assert mul(np.ones(2, np.float32), 2**40).tolist() == [2.0**40] * 2
    # a call of another signature is not refused by the last signature's check
    assert f(np.array([1, 2], np.int16), 200, 0).tolist() == [401, 402]


def test_static_floats_compile_apart_by_sign_and_a_nan_compiles_once():
    # issue 35, item 4: -0.0 == 0.0 and nan != nan must not decide signatures
    divide = nbyoc.jit(lambda x, s: x / s, static_argnames=["s"])
    ones = np.ones(2, np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        assert divide(ones, 0.0).tolist() == [np.inf, np.inf]
        assert divide(ones, -0.0).tolist() == [-np.inf, -np.inf]
        assert divide(ones, (-0.0, 1)[0]).tolist() == [-np.inf, -np.inf]
        for _ in range(3):
            assert np.isnan(divide(ones, float("nan"))).all()
    assert len(divide.signatures) == 3, divide.signatures
    pick = nbyoc.jit(lambda x, s: x * s[0], static_argnames=["s"])
    assert pick(ones, (0.0,)).tolist() == [0.0, 0.0]
    assert [np.signbit(v) for v in pick(ones, (-0.0,))] == [True, True]


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.bool_, np.float32])
def test_np_clip_promotes_and_refuses_python_bounds_as_numpy_does(dtype):
    clip = nbyoc.jit(lambda x, lo, hi: np.clip(x, lo, hi), static_argnames=["lo", "hi"])
    x = np.array([1, 0, 1], dtype)
    bounds = [(300, None), (-300, None), (None, 300), (None, -300), (2**70, None),
              (-(2**70), 2**70), (0.5, None), (1, 2.0), (0, 1), (False, True),
              (np.int16(3), None), (None, np.float64(0.5))]  # fmt: skip
    for low, high in bounds:
        try:
            expected = np.clip(x, low, high)
        except (OverflowError, TypeError):
            with pytest.raises(nbyoc.NbyocError):
                clip(x, low, high)
            continue
        got = clip(x, low, high)
        assert got.dtype == expected.dtype, (low, high)
        np.testing.assert_array_equal(got, expected, err_msg=f"np.clip(x, {low}, {high})")
