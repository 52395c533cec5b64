"""llvm's row groups (a reduction over trailing axes fused with the elementwise ops
around it, nbyoc.codegen.llvm.rows) and its vectorised reductions (reduce.py):
against NumPy and the host executor on the same graphs, over random shapes, axes and
dtypes, with NaN and inf, and checked to be one loop over rows that vectorises."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.llvm import rows as rows_module
from nbyoc.codegen.llvm.module import LLVMModule
from nbyoc.codegen.llvm.row_blocks import SHORT_ROW
from nbyoc.runtime.llvm import target

from ..helpers import assert_close_to_host, examples, external, reload

RTOL = {"float16": 2e-2, "float32": 2e-5, "float64": 1e-12}


def row_function(source: str) -> str:
    """The text of the first row group's function (in a module of its own, ``stage``)."""
    return source.split("def stage(")[1].split("\n\n")[0]


def _rows(n_rows: int, n_cols: int, dtype: str = "float32", seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n_rows, n_cols)).astype(dtype)


NORMALISATIONS = {
    "softmax": lambda x: nbyoc.softmax(x, axis=-1),
    "log_softmax": lambda x: nbyoc.log_softmax(x, axis=-1),
    "layer_norm": lambda x: nbyoc.layer_norm(
        x, nbyoc.const(np.linspace(0.5, 1.5, x.type.shape[-1], dtype=np.float32)),
        nbyoc.const(np.float32(0.25)), axis=-1,
    ),
    "rms_norm": lambda x: x / nbyoc.sqrt(nbyoc.mean(x * x, axis=-1, keepdims=True) + 1e-6),
    "normalise": lambda x: x / nbyoc.sum(nbyoc.abs(x), axis=-1, keepdims=True),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NORMALISATIONS))
def test_normalisations_are_one_row_group_and_match_numpy(name):
    """Softmax and friends: one row group (one loop over rows, in parallel), equal to
    the host's NumPy results, also after a save and load."""
    x = nbyoc.var("x", (512, 96))
    f = nbyoc.function([x], NORMALISATIONS[name](x))
    fn = nbyoc.compile(f, backend="llvm")
    (module,) = fn.runtime_modules.values()
    source = module.get_source()
    assert len(re.findall(r"# stage \d+: row group of", source)) == 1, source
    assert "prange" in source
    data = _rows(512, 96)
    assert_close_to_host(fn, f, [data], rtol=2e-5, atol=1e-6)
    assert_close_to_host(reload(fn), f, [data], rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(NORMALISATIONS))
@pytest.mark.parametrize("columns", [2, 10, 31])
def test_normalisations_over_short_rows_run_as_blocks_of_rows(name, columns):
    """Rows under SHORT_ROW elements run a block of rows per pass, each pass one flat
    loop: over many blocks, a last part-block and the parallel tasks' boundaries they
    equal the host's NumPy, also after a save and load."""
    x = nbyoc.var("x", (1001, columns))
    f = nbyoc.function([x], NORMALISATIONS[name](x))
    fn = nbyoc.compile(f, backend="llvm", options={"llvm": {"parallel_threshold": 64}})
    source = fn.get_source()
    assert len(re.findall(r"# stage \d+: row group of", source)) == 1, source
    assert "while b0 < end:" in source, source
    data = _rows(1001, columns, seed=columns)
    assert_close_to_host(fn, f, [data], rtol=2e-5, atol=1e-6)
    assert_close_to_host(reload(fn), f, [data], rtol=2e-5, atol=1e-6)


def test_rows_of_short_row_length_and_longer_take_each_their_form():
    for columns, blocks in ((SHORT_ROW - 1, True), (SHORT_ROW, False)):
        x = nbyoc.var("x", (8, columns))
        source = nbyoc.compile(nbyoc.function([x], nbyoc.softmax(x))).get_source()
        assert ("while b0 < end:" in source) == blocks


def test_softmax_reads_its_input_twice_and_keeps_exp_in_its_output_row():
    """Pass 0 takes the max, pass 1 computes exp(x - max) into the output row and sums
    it in blocks (float32 partial sums per block, float64 across blocks: float64 ones
    in the exp loop would halve its vector width), pass 2 multiplies the row there by
    the sum's reciprocal (or divides, for a sum out of RECIPROCAL_RANGE): no buffer.
    Pass 0 of the next row runs in pass 2's loop, but for a range's last row."""
    x = nbyoc.var("x", (64, 128))
    e = nbyoc.exp(x - nbyoc.max(x, axis=-1, keepdims=True))  # softmax, as legalized
    softmax = e / nbyoc.sum(e, axis=-1, keepdims=True)
    source = LLVMModule(external([x], [softmax], "llvm_0", "llvm")).get_source()
    group = row_function(source)
    # the first row's max; the multiply and the divide, with the next row's max and not
    assert group.count("for j in range(z0):") == 5  # (the row's length, read at run time)
    assert group.count("acc0 = maximum(acc0, a0[rn, j])") == 2
    assert "* inv_rv" in group and "/ rv" in group
    assert group.count("for j in range(b0, b1):") == 1  # exp, in blocks
    assert group.count("b1 = min(b0 + 256, z0)") == 1
    assert "np.empty" not in group
    assert group.count("a1[r, j] = v2") == 1 and group.count("np.float32(a1[r, j] * inv_rv3)") == 2
    assert "maximum(" in group and "add_step(block" in group and "exp_nonpositive_f32(" in group
    assert "prefetch" not in source  # 512-byte rows: nothing to gain


#: (normalisation, rows, parallel threshold): 1 splits the rows into ranges of one or a
#: few, 1 << 30 runs one range over them all. A slice by default, all under --run-slow.
JOIN_CASES = [
    *((name, 257, 1) for name in sorted(NORMALISATIONS)),
    ("softmax", 1, 1),
    ("layer_norm", 3, 1),
    ("rms_norm", 3, 1 << 30),
    *(
        pytest.param(name, n_rows, threshold, marks=pytest.mark.slow)
        for name in sorted(NORMALISATIONS)
        for n_rows in [1, 3, 257]
        for threshold in [1, 1 << 30]
        if (n_rows, threshold) != (257, 1)
        and (name, n_rows, threshold)
        not in [("softmax", 1, 1), ("layer_norm", 3, 1), ("rms_norm", 3, 1 << 30)]
    ),
]


@pytest.mark.parametrize("name, n_rows, threshold", JOIN_CASES)
def test_the_next_rows_first_pass_joined_to_this_rows_last_matches_numpy(name, n_rows, threshold):
    """Each normalisation runs a row's first pass in the loop of the previous row's last
    pass. Every split of the rows gives the host's results: ranges of one row (nothing
    to join), of a few, and one range over all rows (in parallel or not)."""
    x = nbyoc.var("x", (n_rows, 300))
    f = nbyoc.function([x], NORMALISATIONS[name](x))
    fn = nbyoc.compile(f, backend="llvm", options={"llvm": {"parallel_threshold": threshold}})
    assert "rn = r + np.uint64(1)" in fn.get_source()
    assert_close_to_host(fn, f, [_rows(n_rows, 300, seed=n_rows)], rtol=2e-5, atol=1e-6)


def test_a_stored_reduction_of_the_first_pass_is_stored_for_the_next_row():
    """softmax and its row max as outputs: the max of row r + 1, computed in row r's
    last loop, goes to row r + 1 of its output."""
    x = nbyoc.var("x", (37, 160))
    m = nbyoc.max(x, axis=-1, keepdims=True)
    e = nbyoc.exp(x - m)
    f = nbyoc.function([x], nbyoc.ir.nodes.Tuple([e / nbyoc.sum(e, axis=-1, keepdims=True), m]))
    fn = nbyoc.compile(f, backend="llvm", options={"llvm": {"parallel_threshold": 1}})
    assert re.search(r"a\d\[rn\] = ", fn.get_source())
    assert_close_to_host(fn, f, [_rows(37, 160, seed=3)], rtol=2e-5, atol=1e-6)


def test_a_first_pass_that_stores_is_not_joined():
    """A result stored in the first pass (t = x * 2, whose softmax is the other) would be
    written a row ahead in the joined loop: that group keeps its passes apart."""
    x = nbyoc.var("x", (40, 160))
    t = x * 2.0
    f = nbyoc.function([x], nbyoc.ir.nodes.Tuple([t, nbyoc.softmax(t, axis=-1)]))
    fn = nbyoc.compile(f, backend="llvm")
    source = fn.get_source()
    assert "def stage(" in source and "rn =" not in source
    assert_close_to_host(fn, f, [_rows(40, 160, seed=4)], rtol=2e-5, atol=1e-6)


def test_a_row_value_read_by_several_results_lives_in_the_row_of_the_last():
    """exp(x - max) read by two stored results in the last pass: it lives in the row
    of the one computed after every reader (the other would overwrite it before the
    second reads it), and both results equal NumPy's."""
    x = nbyoc.var("x", (32, 200))
    e = nbyoc.exp(x - nbyoc.max(x, axis=-1, keepdims=True))
    s = nbyoc.sum(e, axis=-1, keepdims=True)
    first = e / s
    second = first + e
    f = nbyoc.function([x], nbyoc.ir.nodes.Tuple([first, second]))
    fn = nbyoc.compile(f, backend="llvm")
    group = row_function(fn.get_source())
    assert "np.empty" not in group and "a2[r, j] = v2" in group, group
    data = _rows(32, 200)
    ex = np.exp(data - data.max(axis=-1, keepdims=True))
    expected = ex / ex.sum(axis=-1, keepdims=True)
    got_first, got_second = fn(data)
    np.testing.assert_allclose(got_first, expected, rtol=2e-6)
    np.testing.assert_allclose(got_second, expected + ex, rtol=2e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_long_rows_prefetch_the_next_row_in_their_second_pass(dtype):
    """Rows of 8 KiB and more ask for the next row's input (to read) and output (to
    write) block by block while pass 1 computes; the last row asks for itself. The
    numbers are NumPy's: a prefetch is only a hint."""
    columns = rows_module.PREFETCH_MIN_ROW_BYTES // np.dtype(dtype).itemsize
    x = nbyoc.var("x", (5, columns), dtype)
    g = nbyoc.var("g", (columns,), dtype)
    mean = nbyoc.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    norm = centred / nbyoc.sqrt(nbyoc.mean(centred * centred, axis=-1, keepdims=True) + 1e-5)
    module = LLVMModule(external([x, g], [norm * g], "llvm_0", "llvm"))
    source = module.get_source()
    group = row_function(source)
    assert "nxt = min(r + np.uint64(1), np.uint64(z1))" in group  # (z1: the last row, 4)
    assert "prefetch_read(a0, nxt, b0, b1)" in group  # x
    assert "prefetch_write(" in group  # the result
    data, gain = _rows(5, columns, dtype), _rows(1, columns, dtype)[0]
    out = np.empty_like(data)
    module.get_function("llvm_0")(data, gain, out)
    centred = data - data.mean(axis=-1, keepdims=True)
    expected = centred / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + 1e-5) * gain
    np.testing.assert_allclose(out, expected, rtol=2e-5 if dtype == "float32" else 1e-12)


#: Every normalisation at one shape, two in float64 at others; the rest with --run-slow.
STREAM_CASES = [
    *((name, (33, 257), "float32") for name in sorted(NORMALISATIONS)),
    ("softmax", (3, 4096), "float64"),
    ("layer_norm", (7, 1000), "float64"),
    *(
        pytest.param(name, shape, dtype, marks=pytest.mark.slow)
        for name in sorted(NORMALISATIONS)
        for shape in [(7, 1000), (3, 4096)]
        for dtype in ["float32", "float64"]
        if (name, shape, dtype)
        not in [("softmax", (3, 4096), "float64"), ("layer_norm", (7, 1000), "float64")]
    ),
]


@pytest.mark.parametrize("name, shape, dtype", STREAM_CASES)
def test_row_groups_over_the_streaming_threshold_stream_their_rows(monkeypatch, name, shape, dtype):
    """Past ``target.stream_min_bytes()`` (here forced to 0) a row group computes each
    result row into a row buffer and writes it with ``stream_row``, fencing once at
    the end, and asks for no output lines ahead: the results equal the host's NumPy
    (rows whose starts fall anywhere in a cache line: 257 and 1000 columns), also
    after a save and load, and into a caller's output that is not line-aligned."""
    monkeypatch.setenv(target.STREAM_ENV, "0")
    x = nbyoc.var("x", shape, dtype)
    f = nbyoc.function([x], NORMALISATIONS[name](x))
    fn = nbyoc.compile(f, backend="llvm")
    source = fn.get_source()
    group = row_function(source)
    # (once after the last pass joined with the next row's first, once after it alone)
    assert group.count("stream_row(a") == 2 and group.rstrip().endswith("store_fence()"), group
    assert "prefetch_write" not in group
    data = _rows(*shape, dtype, seed=shape[1])
    rtol = {"float32": 2e-5, "float64": 1e-12}[dtype]
    assert_close_to_host(fn, f, [data], rtol=rtol, atol=1e-6)
    assert_close_to_host(reload(fn), f, [data], rtol=rtol, atol=1e-6)
    (module,) = fn.runtime_modules.values()
    itemsize = np.dtype(dtype).itemsize
    raw = np.full(data.nbytes + 3 * itemsize, 7, np.uint8)
    out = raw[itemsize : itemsize + data.nbytes].view(dtype).reshape(shape)
    module.get_function("llvm_0")(data, out)
    np.testing.assert_allclose(out, fn(data), rtol=rtol, atol=1e-6)
    assert (raw[:itemsize] == 7).all() and (raw[itemsize + data.nbytes :] == 7).all()


def test_row_groups_under_the_streaming_threshold_store_as_they_go(monkeypatch):
    """Below the threshold (the default on any machine for 64 x 128) the rows are
    stored in the loop that computes them: nothing streams."""
    monkeypatch.setenv(target.STREAM_ENV, str(64 * 128 * 4 * 2 + 1))
    x = nbyoc.var("x", (64, 128))
    source = nbyoc.compile(nbyoc.function([x], nbyoc.softmax(x))).get_source()
    assert "stream_row" not in source and "store_fence" not in source
    monkeypatch.setenv(target.STREAM_ENV, str(64 * 128 * 4 * 2))
    source = nbyoc.compile(nbyoc.function([x], nbyoc.softmax(x))).get_source()
    assert "stream_row" in source


def test_the_streaming_threshold_is_a_number_of_bytes(monkeypatch):
    monkeypatch.delenv(target.STREAM_ENV, raising=False)
    assert target.stream_min_bytes() == (
        target.last_level_cache_bytes() * 3 // 4 // target.worker_threads()
    )
    for bad in ("lots", "-1", "1.5"):
        monkeypatch.setenv(target.STREAM_ENV, bad)
        with pytest.raises(ValueError, match="NBYOC_STREAM_MIN_BYTES must be a number of bytes"):
            target.stream_min_bytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dividing_by_a_row_value_multiplies_by_its_reciprocal_only_while_it_is_normal(dtype):
    """``x / sum(x)``: within 1.5 ulp of the division where the sum's reciprocal is a
    normal number; rows whose sum is subnormal, huge, zero, inf or NaN divide (a
    multiply by an infinite or subnormal reciprocal would be far off or inf)."""
    info = np.finfo(dtype)
    data = np.abs(_rows(8, 300, dtype)) + np.asarray(0.1, dtype)
    data[1] *= info.tiny / 1000  # a subnormal sum: 1 / sum overflows
    data[2] *= info.max / 1000  # a huge sum: its reciprocal is subnormal
    data[3] = 0  # 0 / 0
    data[4, 5] = np.inf
    data[5, 6] = np.nan
    data[6] *= info.tiny * 4  # small but normal: the reciprocal is used
    x = nbyoc.var("x", data.shape, dtype)
    total = nbyoc.sum(x, axis=-1, keepdims=True)
    f = nbyoc.function([x], [x / total, total])
    with np.errstate(all="ignore"):
        got, sums = nbyoc.compile(f, backend="llvm")(data)
        want = data / sums  # NumPy's division by the kernel's own sums
    for row in (1, 2, 3, 4, 5):  # divided
        np.testing.assert_array_equal(got[row], want[row])
    ulps = np.abs(got - want) / np.spacing(np.abs(want).astype(dtype))
    assert np.nanmax(ulps[[0, 6, 7]]) <= 1.5


def test_rows_with_nan_and_inf_follow_numpy():
    data = _rows(6, 50)
    data[1, 7] = np.nan
    data[2, 3] = np.inf
    data[3, :] = -np.inf
    data[4, 9] = -np.inf
    x = nbyoc.var("x", data.shape)
    outs = [nbyoc.softmax(x), nbyoc.max(x, axis=1), nbyoc.min(x, axis=1), nbyoc.sum(x, axis=1)]
    f = nbyoc.function([x], outs)
    with np.errstate(all="ignore"):
        got = nbyoc.compile(f, backend="llvm")(data)
        want = nbyoc.compile(f, backend="host")(data)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, equal_nan=True)


@st.composite
def row_programs(draw):
    """A random program over rows: elementwise ops before a reduction over the trailing
    axes, the reduced value broadcast back into more elementwise ops, a second
    reduction, and a row-value op between; random shape, split, dtype and outputs."""
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    if draw(st.booleans()):  # a row long enough for the loop along it (else blocks of rows)
        shape = (*shape[:-1], draw(st.integers(SHORT_ROW, 2 * SHORT_ROW + 3)))
    split = draw(st.integers(0, rank - 1))
    dtype = draw(st.sampled_from(["float32", "float64", "float16", "int32"]))
    first = draw(st.sampled_from(["sum", "mean", "max", "min", "prod"]))
    second = draw(st.sampled_from(["sum", "mean", "max", "min"]))
    keep = draw(st.booleans())
    column = draw(st.booleans())  # a per-column operand (layer norm's scale)
    outputs = draw(st.sets(st.integers(0, 4), min_size=1))
    return shape, split, dtype, first, second, keep, column, sorted(outputs)


def _program(shape, split, dtype, first, second, keep, column, outputs, stored=None):
    """The row program; with ``stored``, every value it names is rounded to that dtype
    (float16 storage with wide arithmetic in between, as the llvm kernel computes)."""

    def kept(value):
        return value if stored is None else nbyoc.call_op(
            "cast", nbyoc.call_op("cast", value, to=stored), to=dtype)  # fmt: skip

    x = nbyoc.var("x", shape, dtype)
    axes = tuple(range(split, len(shape)))
    pre = kept(x * 2 - 1 if dtype != "int32" else x - 3)
    r1 = kept(nbyoc.call_op(first, pre, axis=axes, keepdims=True))
    centred = kept(pre - r1)
    if column:
        centred = kept(centred * nbyoc.const(np.arange(1, 1 + np.prod(shape[split:])).reshape(
            shape[split:]).astype(dtype)))  # fmt: skip
    r2 = kept(nbyoc.call_op(second, centred * centred, axis=axes, keepdims=keep))
    row = kept(nbyoc.abs(r2) + 1)
    full = kept(centred / (row if keep else nbyoc.reshape(row, row.type.shape + (1,) * len(axes))))
    values = [pre, r1, centred, r2, full]
    return nbyoc.function([x], [values[k] for k in outputs])


@settings(max_examples=examples(40, default=12), deadline=None)
@given(row_programs(), st.integers(0, 2**31 - 1))
# A float16 product of 64 values overflows to inf when stored: the rest is inf and nan.
@example(program=((2, 32), 0, "float16", "prod", "sum", False, False, [0, 1, 2, 3, 4]), seed=0)
def test_random_row_programs_match_the_host(program, seed):
    shape, split, dtype, first, *_ = program
    # A product of thousands of values in [-2, 2] depends on its order: partial
    # products may reach both inf and 0, and inf * 0 is nan (found at 3584 float16
    # values: llvm gave nan where NumPy's order gave -0). Of up to 64 such values no
    # partial product overflows, so the result does not depend on the order.
    assume(not (dtype == "float16" and first == "prod" and math.prod(shape[split:]) > 64))
    f = _program(*program)
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        data = rng.integers(-4, 5, shape).astype(dtype)
    else:
        data = rng.uniform(-2, 2, shape).astype(dtype)
    fn = nbyoc.compile(f, backend="llvm", options={"llvm": {"parallel_threshold": 8}})
    if dtype != "float16":
        # Within the computation's forward error bound (a sum of values near 900 that
        # cancels to 0.657 is off by float32 rounding of the 900s, beyond any rtol).
        assert_close_to_host(fn, f, [data], rtol=0, atol=0)
        return
    # NumPy accumulates float16 in float16, llvm in float64: where NumPy's overflows (a
    # product of hundreds of values: inf, then inf * 0 = nan), the truth is the same
    # program in float64 with every value it stores rounded to float16 (a product that
    # only overflows once stored is inf in both). Both round each elementwise result to
    # float16, so where one of those overflows (a square of 300: inf, where the truth,
    # which keeps it unrounded, has a finite mean), llvm's inf is NumPy's.
    wide = _program(shape, program[1], "float64", *program[3:], stored="float16")
    with np.errstate(all="ignore"):
        got, want = fn(data), nbyoc.compile(f, backend="host")(data)
        truth = nbyoc.compile(wide, backend="host")(data.astype(np.float64))
    got, want, truth = ((v if isinstance(v, tuple) else (v,)) for v in (got, want, truth))
    for g, w, t in zip(got, want, truth):
        assert g.dtype == w.dtype and g.shape == w.shape
        with np.errstate(all="ignore"):
            as_numpy = ~np.isfinite(w) & ((g == w) | (np.isnan(g) & np.isnan(w)))
            w = np.where(np.isfinite(w) | as_numpy, w, t.astype(np.float16))
        np.testing.assert_allclose(g, w, rtol=5e-2, atol=5e-2)


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(st.integers(1, 9), min_size=1, max_size=4),
    st.data(),
    st.sampled_from(["sum", "mean", "max", "min", "prod"]),
    st.sampled_from(["float32", "float64", "int64", "uint8", "bool"]),
    st.booleans(),
)
def test_reductions_over_any_axes_match_numpy(shape, data, op, dtype, keepdims):
    """Any axis set (one run of axes: the (outer, reduced, inner) loops; others: plain
    loops), alone in a kernel (fuse=False keeps row groups out) and fused."""
    axes = data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))
    x = nbyoc.var("x", tuple(shape), dtype)
    node = nbyoc.call_op(op, x, axis=tuple(axes), keepdims=keepdims)
    if node.type.size == 0:
        return
    values = np.random.default_rng(1).uniform(-3, 3, shape)
    values = values.astype(dtype) if dtype != "bool" else values > 0
    f = nbyoc.function([x], node)
    want = nbyoc.compile(f, backend="host")(values)
    for fuse in (False, True):
        options = {"llvm": {"fuse": fuse, "parallel_threshold": 4}}
        got = nbyoc.compile(f, backend="llvm", options=options)(values)
        assert got.dtype == want.dtype and got.shape == want.shape
        rtol = 1e-5 if dtype == "float32" else 1e-12
        if op in ("sum", "mean") and dtype.startswith("float"):
            # Another summation order: the error scales with the sum of magnitudes, not
            # with the (possibly cancelled) result.
            scale = np.abs(values).sum(axis=tuple(axes), keepdims=keepdims)
            scale = scale / (values.size // node.type.size if op == "mean" else 1)
            assert np.all(np.abs(got - want) <= rtol * scale), (got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol)


def test_float32_row_sums_are_more_accurate_than_numpys_pairwise_sum():
    """Blocked sums (float32 partial sums per block of 256, float64 across blocks):
    against the exact sum (float64 of the float32 values, math.fsum), llvm's float32
    sums of long rows are at least as close as NumPy's."""
    import math

    data = np.random.default_rng(5).uniform(0, 1, (4, 1 << 20)).astype(np.float32)
    x = nbyoc.var("x", data.shape)
    # A sum of the input over rows (a row group's blocked sum) and over columns, and a
    # row group's blocked sum of a computed value (x * 2 is exact).
    cases = [(nbyoc.sum(x, axis=1), data, 1), (nbyoc.sum(x, axis=0), data, 0),
             (nbyoc.sum(x * 2.0, axis=1), data * np.float32(2), 1)]  # fmt: skip
    for node, summed, axis in cases:
        f = nbyoc.function([x], node)
        got = nbyoc.compile(f, backend="llvm")(data).astype(np.float64)
        theirs = np.sum(summed, axis=axis).astype(np.float64)
        lines = summed if axis == 1 else summed.T
        exact = np.array([math.fsum(line.astype(np.float64)) for line in lines])
        assert np.all(np.abs(got - exact) <= np.abs(theirs - exact) + 1e-30 * np.abs(exact))


def _assembly(module: LLVMModule) -> str:
    kernel = module.kernel
    return "\n".join(kernel.inspect_asm(s) for s in kernel.signatures)


def test_row_reductions_vectorise():
    """The sum's float64 partial sums and the max run on packed registers."""
    x = nbyoc.var("x", (8, 4096))
    f = external([x], [nbyoc.sum(x, axis=1), nbyoc.max(x, axis=1)], "llvm_0", "llvm")
    assembly = _assembly(LLVMModule(f, fuse=False, parallel_threshold=1 << 30))
    assert re.search(r"\bv?addpd\b", assembly), "the float64 partial sums are not packed"
    assert re.search(r"\bv?maxps\b", assembly), "the max is not packed"


@settings(max_examples=examples(30), deadline=None)
@given(
    st.lists(st.integers(1, 9), min_size=1, max_size=3),
    st.data(),
    st.sampled_from(["argmax", "argmin"]),
    st.sampled_from(["float32", "float64", "int16", "uint8", "bool"]),
    st.booleans(),
)
def test_argmax_and_argmin_match_numpy(shape, data, op, dtype, nans):
    """Along a contiguous run (an extreme by a vectorised pass, then a scan for its first
    index) and across inner indices (a best value and index per lane): the first
    extreme wins, and the first NaN."""
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    values = np.random.default_rng(2).integers(-3, 4, shape).astype(np.float64)  # ties
    if nans and dtype.startswith("float"):
        values[np.random.default_rng(3).random(shape) < 0.2] = np.nan
    values = values.astype(dtype) if dtype != "bool" else values > 0
    x = nbyoc.var("x", tuple(shape), dtype)
    f = nbyoc.function([x], nbyoc.call_op(op, x, axis=axis))
    got = nbyoc.compile(f, backend="llvm", options={"llvm": {"parallel_threshold": 4}})(values)
    np.testing.assert_array_equal(got, getattr(np, op)(values, axis=axis))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_one_element_operand_that_is_a_strided_view_is_read_as_a_scalar(dtype):
    # Found by the random graphs: a slice of one element (a strided view of a float16
    # array) read by a row group was reshaped, which Numba refuses on a strided array.
    p = nbyoc.var("p", (2,), dtype)
    w = nbyoc.where(nbyoc.less(p, p), p, p)
    one = w[1:2]
    f = nbyoc.function([p], [nbyoc.softmax(w, axis=0), nbyoc.min(one * 0.5, axis=0, keepdims=True)])
    x = np.array([0.5, -1.25], dtype)
    assert_close_to_host(reload(nbyoc.compile(f, backend="llvm")), f, [x], rtol=RTOL[dtype])
