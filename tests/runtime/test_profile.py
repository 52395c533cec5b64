"""``fn.profile``: a row per region (with its backend) and per host op, medians that
add up to the total with the executor's row, bytes moved, through symbolic sizes and
control flow; the executable itself is left as it was."""

import json

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocError


def region_and_host_op(backend: str):
    """``(exp(x) * 2) @ y``: a region on ``backend`` (csource has no matmul: the host
    runs it)."""
    x, y = nbyoc.var("x", (16, 8)), nbyoc.var("y", (8, 4))
    return nbyoc.function([x, y], (nbyoc.exp(x) * 2.0) @ y)


def arrays(*shapes):
    return [np.ones(shape, np.float32) for shape in shapes]


def test_a_region_and_a_host_op_each_get_a_row_with_backend_share_and_bytes():
    fn = nbyoc.compile(region_and_host_op("csource"), "csource")
    p = fn.profile(*arrays((16, 8), (8, 4)), repeat=3)
    by_kind = {row.kind: row for row in p.rows}
    assert set(by_kind) == {"region", "host op", "executor"}
    region, host = by_kind["region"], by_kind["host op"]
    assert (region.name, region.backend, region.ops) == ("@csource_0", "csource", "exp, multiply")
    assert (host.name, host.backend, host.ops) == ("the result", "host", "matmul")
    # reads x, writes exp(x) * 2; reads that and y, writes the (16, 4) result
    assert region.bytes_moved == 2 * 16 * 8 * 4
    assert host.bytes_moved == (16 * 8 + 8 * 4 + 16 * 4) * 4
    assert p.rows[-1].kind == "executor"
    assert sum(row.seconds for row in p.rows) == pytest.approx(p.total)
    assert sum(row.share for row in p.rows) == pytest.approx(1.0)
    assert all(row.seconds >= 0 for row in p.rows) and p.repeat == 3 and p.sizes == {}
    assert [r.seconds for r in p.rows[:-1]] == sorted(
        (r.seconds for r in p.rows[:-1]), reverse=True
    )


def test_the_table_prints_every_row_and_the_total_and_the_dict_is_json():
    fn = nbyoc.compile(region_and_host_op("csource"), "csource")
    p = fn.profile(*arrays((16, 8), (8, 4)), repeat=2)
    text = str(p)
    lines = text.splitlines()
    assert lines[0] == "profile: median of 2 calls after a warm-up"
    assert lines[1].split() == ["what", "backend", "time/call", "share", "bytes", "moved", "ops"]
    assert lines[-1].startswith("total") and "100.0%" in lines[-1]
    assert any(line.startswith("@csource_0  csource") for line in lines)
    assert len(lines) == 2 + len(p.rows) + 1
    data = json.loads(json.dumps(p.as_dict()))
    assert data["repeat"] == 2 and len(data["rows"]) == len(p.rows)
    assert data["rows"][0].keys() == {"name", "kind", "backend", "ops", "seconds", "share",
                                      "bytes_moved"}  # fmt: skip


def test_one_region_for_all_of_main_and_the_host_alone():
    x = nbyoc.var("x", (4,))
    f = nbyoc.function([x], nbyoc.exp(x) + 1.0)
    p = nbyoc.compile(f, "llvm").profile(*arrays((4,)), repeat=2)
    assert [(r.kind, r.backend) for r in p.rows] == [("region", "llvm"), ("executor", "host")]
    p = nbyoc.compile(f, "host").profile(*arrays((4,)), repeat=2)
    assert sorted(r.ops for r in p.rows if r.kind == "host op") == ["add", "exp"]


def test_symbolic_sizes_are_profiled_in_the_build_for_the_arrays_sizes():
    x = nbyoc.var("x", ("n", 3))
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.exp(x) * 2.0), "llvm")
    p = fn.profile(*arrays((5, 3)), repeat=2)
    assert p.sizes == {"n": 5} and "(sizes n=5)" in str(p)
    (region,) = [r for r in p.rows if r.kind == "region"]
    assert region.backend == "llvm" and region.bytes_moved == 2 * 5 * 3 * 4
    assert fn.profile(*arrays((7, 3)), repeat=1).sizes == {"n": 7}


def test_a_control_flow_op_is_one_host_op_row_its_bodies_included():
    i, c, t = nbyoc.var("i", (), "int64"), nbyoc.var("c", (), "bool"), nbyoc.var("t", (2,))
    step = nbyoc.function([i, c, t], (c, nbyoc.exp(t) * 0.5))
    x = nbyoc.var("x", (2,))
    out = nbyoc.loop(nbyoc.const(np.array(True)), x, body=step, trips=3)
    fn = nbyoc.compile(nbyoc.function([x], out[0] + 1.0), "llvm")
    p = fn.profile(*arrays((2,)), repeat=2)
    assert "loop" in [r.ops for r in p.rows if r.kind == "host op"]


def test_profiling_leaves_the_executable_as_it_was():
    fn = nbyoc.compile(region_and_host_op("csource"), "csource")
    steps = list(fn._main._steps)
    fn.profile(*arrays((16, 8), (8, 4)), repeat=1)
    assert fn._main._steps == steps
    assert all(a is b for a, b in zip(fn._main._steps, steps))


@pytest.mark.parametrize("repeat", [0, -1, 1.5, True])
def test_repeat_must_be_a_positive_int(repeat):
    fn = nbyoc.compile(region_and_host_op("csource"), "csource")
    with pytest.raises(NbyocError, match="repeat must be a positive int"):
        fn.profile(*arrays((16, 8), (8, 4)), repeat=repeat)


def test_wrong_arrays_are_refused_as_a_call_refuses_them():
    fn = nbyoc.compile(region_and_host_op("csource"), "csource")
    with pytest.raises(nbyoc.errors.ArgumentError):
        fn.profile(*arrays((16, 8)))


def two_layer_mlp():
    """A program on llvm (work enough): two matmuls, each with its epilogue, and a
    softmax's row group."""
    x = nbyoc.var("x", (256, 128))
    rng = np.random.default_rng(0)
    w1 = nbyoc.const(rng.standard_normal((128, 256)).astype(np.float32) / 16)
    w2 = nbyoc.const(rng.standard_normal((256, 64)).astype(np.float32) / 16)
    hidden = nbyoc.relu(x @ w1 + 0.5)
    return nbyoc.function([x], nbyoc.softmax(hidden @ w2, axis=-1))


def test_an_llvm_program_is_profiled_stage_by_stage():
    fn = nbyoc.compile(two_layer_mlp(), "llvm")
    (symbol,) = fn.runtime_modules
    assert fn.runtime_modules[symbol].lowered.program is not None  # (a program)
    x = np.random.default_rng(1).standard_normal((256, 128)).astype(np.float32)
    want = fn(x)
    p = fn.profile(x, repeat=3)
    whats = [row.what for row in p.stages]
    assert any(w.startswith("matmul 256x256 (256x128 @ 128x256) + add, relu") for w in whats)
    assert any(w.startswith("matmul 256x64 (256x256 @ 256x64)") for w in whats), whats
    assert {row.region for row in p.stages} == {f"@{symbol}"}
    assert all(row.seconds >= 0 and row.share == pytest.approx(row.seconds / p.total)
               for row in p.stages)  # fmt: skip
    assert [r.seconds for r in p.stages] == sorted((r.seconds for r in p.stages), reverse=True)
    text = str(p)
    assert "inside the regions, each stage run alone" in text and "matmul 256x64" in text
    assert json.loads(json.dumps(p.as_dict()))["stages"][0].keys() == {
        "region", "what", "seconds", "share"}  # fmt: skip
    np.testing.assert_array_equal(fn(x), want)  # (the executable left as it was)


def test_a_program_run_one_stage_at_a_time_computes_what_it_computes_whole():
    """``stage_programs``: every stage of every driver's run swapped to the front of
    its run alone, run in order, gives the program's own result bit for bit."""
    from nbyoc.codegen.llvm.module import program_kernel, storage_views
    from nbyoc.codegen.llvm.program import STEP_SLOTS, stage_programs

    x = nbyoc.var("x", (2, 16, 32, 32))
    rng = np.random.default_rng(0)
    w1, w2 = (nbyoc.const(rng.standard_normal((16, 16, 3, 3)).astype(np.float32) / 12)
              for _ in range(2))  # fmt: skip
    y = nbyoc.relu(nbyoc.conv(x, w1, pads=[1, 1, 1, 1]))
    y = nbyoc.conv(y, w2, pads=[1, 1, 1, 1]) + x
    f = nbyoc.function([x], y * nbyoc.mean(y, axis=(2, 3), keepdims=True))
    fn = nbyoc.compile(f, "llvm")
    (module,) = fn.runtime_modules.values()
    lowered, executor = module.lowered, module.compiled.executor
    assert executor is not None
    runs = stage_programs(lowered.program, lowered.program_labels)
    assert all(label for label, _ in runs)
    assert len(runs) > len(lowered.program[2]) // STEP_SLOTS  # (a driver's run of several)
    data = np.random.default_rng(2).standard_normal((2, 16, 32, 32)).astype(np.float32)
    out = np.empty((2, 16, 32, 32), np.float32)
    arguments = (data, *module._constants, out, *module._scratch_buffers(), *module._trailing)
    for _, program in runs:
        storage_views(lowered, program_kernel(lowered, executor, program))(*arguments)
    np.testing.assert_array_equal(out, fn(data))


def test_a_backend_without_stages_shows_its_regions_whole():
    fn = nbyoc.compile(region_and_host_op("csource"), "csource")
    assert fn.profile(*arrays((16, 8), (8, 4)), repeat=2).stages == ()
