"""``nbyoc.dask.apply`` on Dask's threaded scheduler: every function of the NumPy corpus
over chunked arrays, with whole axes where they fit and with tree reductions where they
do not; random chunkings (hypothesis); the other backends; errors; the per-process cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.dask import BlockError, tasks
from nbyoc.runtime.compiles import compile_counts

from ..frontend.numpy_corpus import CASES, STATIC
from ..helpers import examples, run_fresh

da = pytest.importorskip("dask.array")

#: Corpus functions whose ops need whole axes (slices), refused when nothing fits.
NEEDS_WHOLE_AXES = {"central_difference_2d": "slice", "laplacian": "slice"}
#: The corpus functions run by default, with the default budget and with the small one
#: that turns their reductions and contractions into trees (rows, matmuls, whole-array
#: and integer reductions, slices, two outputs, scalars); the whole corpus with
#: --run-slow.
QUICK = {"attention", "mlp", "softmax", "unbiased_variance", "total", "integer_mean",
         "two_outputs", "central_difference_2d", "reshape_transpose", "gather_rows"}  # fmt: skip


def halves(array) -> object:
    """``array`` as a Dask array cut in two along every axis (a scalar as it is)."""
    if isinstance(array, np.ndarray) and array.ndim:
        return da.from_array(array, chunks=tuple(max(1, (n + 1) // 2) for n in array.shape))
    return array


def payloads(array) -> list[dict]:
    """The block payloads in ``array``'s Dask graph (data nodes holding the dict)."""
    values = [getattr(v, "value", v) for v in array.dask.values()]
    return [v for v in values if isinstance(v, dict) and "digest" in v]


def compute(value):
    if isinstance(value, (tuple, list)):
        return type(value)(compute(v) for v in value)
    return value.compute(scheduler="threads")


def assert_equal_to_numpy(got, expected, name, inputs=()):
    """Equal values, dtype and shape; floats within rounding: a tree sums in another
    order than NumPy's pairwise sum, so float32 work (in ``inputs`` or the result)
    differs from NumPy's at float32's precision even in a float64 result."""
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected), name
        for g, e in zip(got, expected):
            assert_equal_to_numpy(g, e, name, inputs)
        return
    expected = np.asarray(expected)  # Dask gives 0-d arrays where NumPy gives scalars
    assert got.dtype == expected.dtype and got.shape == expected.shape, (name, got, expected)
    if expected.dtype.kind == "f":
        single = [np.asarray(a).dtype == np.float32 for a in (expected, *inputs)]
        rtol = 3e-5 if any(single) else 1e-10
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def corpus_cases():
    return [
        pytest.param(name, budget, marks=() if name in QUICK else pytest.mark.slow)
        for name in sorted(CASES)
        for budget in (None, 64)
    ]  # fmt: skip


@pytest.mark.parametrize("name,budget", corpus_cases())
def test_the_corpus_on_chunked_arrays_equals_numpy(name, budget):
    """Every array cut in two along every axis; with the default budget every axis an op
    needs whole is made whole, with 64 bytes reductions over cut axes run as trees."""
    fn, first, _ = CASES[name]
    args = first()
    jitted = nbyoc.jit(fn, static_argnames=STATIC.get(name, ()))
    chunked = [halves(a) for a in args]
    if budget and name in NEEDS_WHOLE_AXES:
        with pytest.raises(BlockError, match=NEEDS_WHOLE_AXES[name]):
            nbyoc.dask.apply(jitted, *chunked, block_bytes=budget)
        return
    result = nbyoc.dask.apply(jitted, *chunked, block_bytes=budget)
    assert_equal_to_numpy(compute(result), fn(*args), name, args)


def test_a_cut_row_axis_stays_cut_and_each_block_is_one_task():
    x = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)
    chunked = da.from_array(x, chunks=(16, 16))
    y = nbyoc.dask.apply(CASES["softmax"][0], chunked)
    assert y.chunks == ((16,) * 4, (16,))
    tasks_per_layer = {len(layer) for name, layer in y.dask.layers.items()
                       if name.startswith("run_block")}  # fmt: skip
    assert tasks_per_layer == {4}  # one nbyoc kernel per block, nothing else per block
    assert_equal_to_numpy(compute(y), CASES["softmax"][0](x), "softmax")


def test_a_sum_over_a_cut_axis_is_a_tree_or_a_whole_axis_by_the_budget():
    x = np.arange(4096, dtype=np.float32).reshape(512, 8)
    chunked = da.from_array(x, chunks=(64, 8))
    whole = nbyoc.dask.apply(lambda x: x.sum(axis=0), chunked)  # 16 KiB fits
    tree = nbyoc.dask.apply(lambda x: x.sum(axis=0), chunked, block_bytes=4096, split_every=2)
    layers = " ".join(tree.dask.layers)
    assert "rechunk" in " ".join(whole.dask.layers) and "rechunk" not in layers
    assert layers.count("partial") >= 2  # 8 partial sums, combined two at a time
    for result in (whole, tree):
        assert_equal_to_numpy(compute(result), x.sum(axis=0), "sum")


@pytest.mark.parametrize("backend", ["csource", "examplejson"])
def test_the_other_backends_run_the_blocks_too(backend):
    x = np.random.default_rng(1).standard_normal((40, 12)).astype(np.float32)
    chunked = da.from_array(x, chunks=(10, 12))
    softmax = CASES["softmax"][0]
    rows = nbyoc.dask.apply(softmax, chunked, backend=backend)
    total = nbyoc.dask.apply(lambda x: (x * x).sum(axis=0), chunked, backend=backend,
                             block_bytes=256)  # fmt: skip
    assert_equal_to_numpy(compute(rows), softmax(x), "softmax")
    assert_equal_to_numpy(compute(total), (x * x).sum(axis=0), "sum")


GRAPHS = {
    "bias_gelu": lambda x, b: x * 0.5 * (1.0 + np.tanh(0.79788456 * (x + b))),
    "row_norm": lambda x, b: (
        (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1) + b
    ),
    "column_softmax": lambda x, b: (
        np.exp(x - x.max(axis=0)) / np.exp(x - x.max(axis=0)).sum(axis=0) + b
    ),
    "sum_all": lambda x, b: (x * b).sum(),
    "gram": lambda x, b: ((x @ WEIGHTS).T @ x) * b,
}
WEIGHTS = np.linspace(-1, 1, 45, dtype=np.float32).reshape(9, 5)  # fmt: skip


@settings(max_examples=examples(12), deadline=None)
@given(
    graph=st.sampled_from(sorted(GRAPHS)),
    rows=st.integers(1, 40),
    row_chunk=st.integers(1, 40),
    col_chunk=st.integers(1, 9),
    budget=st.sampled_from([None, 64, 512]),
    split_every=st.sampled_from([None, 2, 3]),
)
def test_random_chunkings_and_budgets_equal_numpy(graph, rows, row_chunk, col_chunk, budget,
                                                   split_every):  # fmt: skip
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 9)).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    fn = GRAPHS[graph]
    chunked = da.from_array(x, chunks=(row_chunk, col_chunk))
    bias = da.from_array(b, chunks=col_chunk)
    result = nbyoc.dask.apply(fn, chunked, bias, block_bytes=budget, split_every=split_every)
    assert_equal_to_numpy(compute(result), fn(x, b), graph)


def test_numpy_arrays_scalars_constants_and_several_outputs():
    x = np.random.default_rng(2).standard_normal((30, 6)).astype(np.float32)
    per_row = np.arange(30, dtype=np.float32)[:, None]  # a constant cut like the rows

    def fn(x, w, scale):
        y = x @ w * scale + per_row
        return y, y.max(axis=1)

    w = np.ones((6, 3), np.float32)
    got = nbyoc.dask.apply(fn, da.from_array(x, chunks=(7, 6)), w, 2.5)
    assert isinstance(got, tuple) and got[0].chunks[0] == (7, 7, 7, 7, 2)
    assert_equal_to_numpy(compute(got), fn(x, w, 2.5), "fn")


def test_results_come_back_in_the_structure_returned():
    x = np.arange(24, dtype=np.float32).reshape(8, 3)

    def fn(x):
        return {"double": x * 2.0, "stats": (x.sum(axis=1), [x.max(axis=1)])}

    got = nbyoc.dask.apply(fn, da.from_array(x, chunks=(3, 3)))
    assert list(got) == ["double", "stats"] and isinstance(got["stats"][1], list)
    want = fn(x)
    np.testing.assert_array_equal(got["double"].compute(), want["double"])
    np.testing.assert_array_equal(got["stats"][0].compute(), want["stats"][0])
    np.testing.assert_array_equal(got["stats"][1][0].compute(), want["stats"][1][0])


def test_an_nbyoc_jit_function_keeps_its_static_arguments_and_backend():
    jitted = nbyoc.jit(lambda x, axis: x.sum(axis=axis), static_argnames=["axis"],
                       backend="csource")  # fmt: skip
    x = np.ones((8, 4), np.float32)
    y = nbyoc.dask.apply(jitted, da.from_array(x, chunks=(2, 4)), 1)
    assert_equal_to_numpy(compute(y), x.sum(axis=1), "sum")
    assert [p["backend"] for p in payloads(y)] == ["csource"]


def test_ops_needing_whole_axes_that_do_not_fit_are_all_listed_at_once():
    x = da.zeros((64, 64), chunks=(8, 8), dtype=np.float32)
    with pytest.raises(BlockError) as info:
        nbyoc.dask.apply(lambda x: (x.argmax(axis=0), x[1:, :-1]), x, block_bytes=1024)
    message = str(info.value)
    for part in ("argmax on axis 0", "slice on axis 0", "slice on axis 1", "1.0 KiB",
                 "block_bytes"):  # fmt: skip
        assert part in message, message


def test_bad_arguments_are_refused_clearly():
    x = da.zeros((4, 4), chunks=2)
    with pytest.raises(nbyoc.errors.NbyocTypeError, match="takes a function"):
        nbyoc.dask.apply("np.exp", x)
    for bad in (-1, 0.5, "a lot", True):
        with pytest.raises(nbyoc.errors.NbyocTypeError, match="block_bytes"):
            nbyoc.dask.apply(np.exp, x, block_bytes=bad)
    for size in (64e3, "64 kB", 64_000):  # the same budget, three ways
        assert compute(nbyoc.dask.apply(np.exp, x, block_bytes=size)).shape == (4, 4)
    assert_equal_to_numpy(compute(nbyoc.dask.apply(np.add, x, 1.5)), np.full((4, 4), 1.5), "add")
    with pytest.raises(nbyoc.errors.NbyocTypeError, match="missing"):
        nbyoc.dask.apply(lambda a, b: a + b, x)
    ones = da.ones((4, 4), chunks=2)
    filtered = ones[ones.sum(axis=1) > 0]  # blocks of unknown length
    with pytest.raises(nbyoc.errors.NbyocError, match=r"compute_chunk_sizes\(\)"):
        nbyoc.dask.apply(lambda a: a * 2, filtered)
    with pytest.raises(nbyoc.errors.NbyocError, match=r"unknown op|np\.fft|not supported"):
        nbyoc.dask.apply(lambda a: np.fft.fft(a), x)


def test_the_payload_is_data_and_loads_only_through_nbyoc():
    x = da.ones((8, 4), chunks=(4, 4), dtype=np.float32)
    y = nbyoc.dask.apply(lambda x: np.exp(x) * np.arange(4, dtype=np.float32), x)
    (payload,) = payloads(y)

    def leaves(value):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from leaves(k)
                yield from leaves(v)
        elif isinstance(value, (tuple, list)):
            for v in value:
                yield from leaves(v)
        else:
            yield value

    kinds = {type(v) for v in leaves(payload)}
    assert kinds <= {str, int, type(None), np.ndarray}, kinds
    text, arrays = payload["functions"][((4, 4),)]
    assert json.loads(text)["format"] == "nbyoc-ir" and len(arrays) == 1
    broken = {**payload, "digest": "x", "functions": {((4, 4),): (text[:-20], arrays)}}
    with pytest.raises(nbyoc.errors.LoadError, match="not valid JSON"):
        tasks.run_block(broken, np.ones((4, 4), np.float32))
    with pytest.raises(nbyoc.errors.LoadError, match=r"not an nbyoc\.dask block payload"):
        tasks.run_block({"functions": {}}, np.ones((4, 4), np.float32))
    with pytest.raises(nbyoc.errors.NbyocError, match=r"no block function for blocks of shapes"):
        tasks.run_block(payload, np.ones((3, 4), np.float32))


def test_blocks_of_every_length_share_one_compiled_function():
    x = da.from_array(np.ones((100, 8), np.float32), chunks=(30, 8))  # 30, 30, 30 and 10
    before, modules = dict(tasks.compiles), compile_counts().get("llvm modules", 0)
    fn = lambda x: np.tanh(x) * 3.0  # noqa: E731
    for _ in range(2):
        assert_equal_to_numpy(compute(nbyoc.dask.apply(fn, x)), np.tanh(np.ones((100, 8))).astype(np.float32) * 3, "tanh")  # fmt: skip
    # one block function, its first dimension symbolic, for (30, 8) and (10, 8), once
    assert tasks.compiles["block"] - before["block"] == 1
    made = compile_counts().get("llvm modules", 0) - modules
    rechunked = da.from_array(np.ones((100, 8), np.float32), chunks=(7, 8))  # 7s and a 2
    compute(nbyoc.dask.apply(fn, rechunked))
    assert compile_counts().get("llvm modules", 0) - modules == made  # no new kernel


def test_import_nbyoc_works_without_dask_and_apply_says_what_to_install(tmp_path):
    code = (
        "import json, sys; sys.modules['dask'] = None; sys.modules['dask.array'] = None\n"
        "import numpy as np, nbyoc\n"
        "try:\n    nbyoc.dask.apply(np.exp, np.ones(3))\n"
        "except nbyoc.errors.MissingDependencyError as e:\n    print(json.dumps(str(e)))\n"
    )
    assert "pip install 'nbyoc[dask]'" in run_fresh(code, tmp_path)
