"""llvm kernels writing their results with streaming stores (nbyoc.runtime.llvm.stream),
which they do once the arrays of a stage or row group outgrow the last-level cache
(``target.stream_min_bytes``; forced here with NBYOC_STREAM_MIN_BYTES=0): the same
numbers as the host executor on random graphs, every output byte written and none
beside it, in this process and in a fresh one loading a saved module."""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings

import nbyoc
from nbyoc.codegen.llvm import stages
from nbyoc.codegen.llvm.lower import lower
from nbyoc.codegen.llvm.module import LLVMModule
from nbyoc.runtime.llvm import target

from ..helpers import assert_close_to_host, examples, external, reload, run_fresh
from ..strategies import graphs, random_inputs

STREAM_ALL = {target.STREAM_ENV: "0"}
PARALLEL = {"llvm": {"parallel_threshold": 1}}


def _reference(shape, dtype="float32"):
    """One external function of two results sharing a subexpression."""
    a, b, c, d = (nbyoc.var(name, shape, dtype) for name in "abcd")
    t = (a + b) - c
    return external([a, b, c, d], [t, t * d], "llvm_0", "llvm")


@settings(max_examples=examples(16), deadline=None)
@given(graphs())
def test_random_graphs_streaming_every_result_match_the_host(f):
    """Every loop parallel and every stage and row group streaming: views, broadcasts,
    reductions, casts and several outputs of random graphs."""
    with mock.patch.dict(os.environ, STREAM_ALL):
        fn = reload(nbyoc.compile(f, backend="llvm", options=PARALLEL))
        assert_close_to_host(fn, f, random_inputs(f))


#: (shape, dtype): part blocks, many blocks, rows starting anywhere in a line, a stage
#: shorter than a line, each in another dtype; the whole matrix with --run-slow.
FLAT_SHAPES = [(5, 1031), (1, stages.STREAM_BLOCK * 70 + 3), (64, 100), (2, 3)]
FLAT_DTYPES = ["float32", "int8", "float64", "int32"]
FLAT_CASES = [
    pytest.param(shape, dtype, marks=() if k == d else pytest.mark.slow)
    for k, shape in enumerate(FLAT_SHAPES)
    for d, dtype in enumerate(FLAT_DTYPES)
]


@pytest.mark.parametrize("shape, dtype", FLAT_CASES)
def test_flat_stages_stream_blocks_into_outputs_anywhere_in_a_line(monkeypatch, shape, dtype):
    """A flat stage computes blocks of STREAM_BLOCK elements into buffers and streams
    each to its output (two here), fencing once per task; over blocks, a last part
    block, task boundaries inside a line and outputs of callers that start anywhere
    in a line, the results equal NumPy's, and no byte beside an output changes."""
    monkeypatch.setenv(target.STREAM_ENV, "0")
    module = LLVMModule(_reference(shape, dtype), parallel_threshold=1)
    source = module.get_source()
    assert source.count("stream_run(a") == 2 and "store_fence()" in source, source
    rng = np.random.default_rng(shape[-1])
    args = [rng.integers(-9, 9, size=shape).astype(dtype) for _ in range(4)]
    a, b, c, d = args
    expected = [(a + b) - c, ((a + b) - c) * d]
    size = np.dtype(dtype).itemsize
    nbytes = int(np.prod(shape)) * size
    for offset in (size, 64 - size, 64):
        raw = np.full(2 * nbytes + 2 * 64 + offset, 0x5A, np.uint8)
        first = raw[offset : offset + nbytes].view(dtype).reshape(shape)
        second = raw[offset + nbytes + 64 : offset + 2 * nbytes + 64].view(dtype).reshape(shape)
        module.get_function("llvm_0")(*args, first, second)
        np.testing.assert_array_equal(first, expected[0])
        np.testing.assert_array_equal(second, expected[1])
        assert (raw[:offset] == 0x5A).all()
        assert (raw[offset + nbytes : offset + nbytes + 64] == 0x5A).all()
        assert (raw[offset + 2 * nbytes + 64 :] == 0x5A).all()


def test_stages_under_the_threshold_or_not_parallel_store_as_they_go(monkeypatch):
    """A stage reading as much as it writes streams from the threshold (NBYOC_STREAM_MIN_BYTES
    here); one reading at
    least twice as much (four inputs, two results) from half of it."""
    x = nbyoc.var("x", (64, 100))
    one_to_one = nbyoc.function([x], x * 2.0)
    read_heavy = _reference((64, 100))
    array = 64 * 100 * 4
    # the largest threshold at which each streams: its footprint, twice (6 arrays) + 1
    for f, largest in ((one_to_one, 2 * array), (read_heavy, 2 * 6 * array + 1)):
        monkeypatch.setenv(target.STREAM_ENV, str(largest + 1))
        assert "stream_run" not in lower(f, parallel_threshold=1).source
        monkeypatch.setenv(target.STREAM_ENV, str(largest))
        assert "stream_run" in lower(f, parallel_threshold=1).source
        assert "stream_run" not in lower(f).source  # 6400 elements: serial


@pytest.mark.parametrize(
    "read, written, heavy, streams",
    [
        (100, 50, False, True),  # light, two thirds read: from half the threshold
        (75, 75, False, False),  # light, half read: from the threshold
        (99, 50, False, False),  # a byte short of twice the writes: not read-heavy
        (100, 100, False, True),
        (0, 200, False, True),
        (100, 50, True, False),  # heavy, read-heavy: from the threshold
        (200, 100, True, True),
        (100, 100, True, False),  # heavy, not read-heavy: never
        (10**12, 10**12, True, False),
    ],
)
def test_which_stages_stream(monkeypatch, read, written, heavy, streams):
    """The rule of ``target.writes_streaming`` at a threshold of 200 bytes."""
    monkeypatch.setenv(target.STREAM_ENV, "200")
    assert target.writes_streaming(read, written, heavy) is streams


def test_a_stage_of_heavy_ops_streams_only_when_it_reads_twice_what_it_writes(monkeypatch):
    """``tanh(a) * a`` is bound by its tanh: it never streams, even at a threshold of 0;
    ``tanh(a * b + c)`` streams once its four arrays reach the whole threshold."""
    a, b, c = (nbyoc.var(name, (64, 100)) for name in "abc")
    monkeypatch.setenv(target.STREAM_ENV, "0")
    one_to_one = nbyoc.function([a], nbyoc.tanh(a) * a)
    assert "stream_run" not in lower(one_to_one, parallel_threshold=1).source
    read_heavy = nbyoc.function([a, b, c], nbyoc.tanh(a * b + c))
    footprint = 4 * 64 * 100 * 4
    monkeypatch.setenv(target.STREAM_ENV, str(footprint + 1))
    assert "stream_run" not in lower(read_heavy, parallel_threshold=1).source
    monkeypatch.setenv(target.STREAM_ENV, str(footprint))
    fn = nbyoc.compile(read_heavy, backend="llvm", options=PARALLEL)
    assert "stream_run" in fn.get_source()
    assert_close_to_host(fn, read_heavy, random_inputs(read_heavy))


def test_float16_results_are_not_streamed(monkeypatch):
    """float16 values are computed in float32 and stored as bits: such a stage stores as
    it goes; its numbers are still the host's."""
    monkeypatch.setenv(target.STREAM_ENV, "0")
    a, b = nbyoc.var("a", (8, 300), "float16"), nbyoc.var("b", (8, 300), "float16")
    f = nbyoc.function([a, b], (a + b) * a)
    fn = nbyoc.compile(f, options=PARALLEL)
    assert "stream_run" not in fn.get_source()
    assert_close_to_host(fn, f, random_inputs(f), rtol=1e-3, atol=1e-3)


SAVE = """
import json, sys
import numpy as np
import nbyoc
a, b, c, d = (nbyoc.var(name, (33, 517)) for name in "abcd")
x = nbyoc.var("x", (33, 517))
f = nbyoc.function([a, b, c, d, x], [((a + b) - c) * d, nbyoc.softmax(x, axis=-1)])
fn = nbyoc.compile(f, options={"llvm": {"parallel_threshold": 1}})
fn.save(sys.argv[1])
print(json.dumps({"streams": fn.get_source().count("stream_")}))
"""

LOAD = """
import json, sys
import numpy as np
import nbyoc
fn = nbyoc.load(sys.argv[1])
rng = np.random.default_rng(1)
args = [rng.standard_normal((33, 517)).astype(np.float32) for _ in range(5)]
a, b, c, d, x = args
y, s = fn(*args)
e = np.exp(x - x.max(axis=-1, keepdims=True))
print(json.dumps({
    "streams": fn.get_source().count("stream_"),
    "elementwise": bool((y == ((a + b) - c) * d).all()),
    "softmax": float(np.abs(s - e / e.sum(axis=-1, keepdims=True)).max()),
}))
"""


def test_a_streaming_module_saved_in_one_process_runs_in_another(tmp_path):
    env = {**STREAM_ALL, "NBYOC_CACHE_DIR": str(tmp_path / "cache")}
    saved = run_fresh(SAVE, tmp_path, str(tmp_path / "module.nbyoc"), env=env)
    assert saved["streams"] >= 3  # the stage's run, the row group's row, their imports
    env["NBYOC_CACHE_DIR"] = str(tmp_path / "other-cache")
    seen = run_fresh(LOAD, tmp_path, str(tmp_path / "module.nbyoc"), env=env)
    assert seen["streams"] == saved["streams"]
    assert seen["elementwise"] and seen["softmax"] < 1e-6
