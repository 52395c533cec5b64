"""Stage modules compiled by worker processes while the kernel compiles here
(``runtime.llvm.compile_workers``, ``runtime.llvm.compile_worker``)."""

from __future__ import annotations

import concurrent.futures
import json
import queue

import numpy as np
import pytest

import nbyoc
from nbyoc.runtime.llvm import compile_workers, kernels

from ..helpers import assert_close_to_host, run_fresh


def three_structures() -> nbyoc.ir.Function:
    """A conv, a pool and a matmul: three stage modules of their own."""
    rng = np.random.default_rng(3)
    x = nbyoc.var("x", (1, 8, 16, 16))
    w = nbyoc.const(rng.standard_normal((8, 8, 3, 3)).astype(np.float32) / 8)
    y = nbyoc.relu(nbyoc.conv(x, w, pads=(1, 1, 1, 1)))
    y = nbyoc.max_pool(y, kernel_shape=(2, 2), strides=(2, 2))
    m = nbyoc.const(rng.standard_normal((512, 24)).astype(np.float32) / 16)
    return nbyoc.function([x], nbyoc.tanh(nbyoc.reshape(y, (1, 512)) @ m))


#: A script with no ``if __name__ == "__main__"`` guard: it notes each time it runs.
PROGRAM = """
import json, pathlib, sys
with pathlib.Path(sys.argv[1]).open("a") as ran:
    ran.write("ran\\n")
import numpy as np
from numba.core import event
import nbyoc
from nbyoc.runtime.llvm import compile_workers
from tests.runtime.test_compile_workers import three_structures

sent = []
submit = compile_workers.submit
compile_workers.submit = lambda tasks: sent.extend(tasks) or submit(tasks)
func = three_structures()
with event.install_recorder("numba:compile") as compiles:
    fn = nbyoc.compile(func, backend="llvm")
names = [e.data["dispatcher"].py_func.__name__ for _, e in compiles.buffer if e.is_start]
(module,) = fn.runtime_modules.values()
modules = {a.module for a in module.lowered.addressed if a.module}
x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
host = nbyoc.compile(func, backend="host")
error = float(np.max(np.abs(fn(x) - host(x))))
print(json.dumps({"stages_here": names.count("stage"), "modules": len(modules), "error": error,
                  "sent": len(sent)}))
"""


def test_a_worker_compiles_stage_modules_without_running_the_users_script(tmp_path):
    ran = tmp_path / "ran.txt"
    env = {"NBYOC_CACHE_DIR": str(tmp_path / "cache"), "NBYOC_COMPILE_WORKERS": "1"}
    root = str(__import__("pathlib").Path(__file__).parents[2])
    result = run_fresh(PROGRAM, root, str(ran), env=env)
    assert ran.read_text() == "ran\n"  # (multiprocessing's spawn would have run it again)
    assert result["modules"] >= compile_workers.MIN_MODULES
    # (the worker takes its first module at once; this process the ones still queued)
    assert result["stages_here"] < result["modules"]
    assert result["error"] <= 1e-5  # (tanh of sums of 72 products of values about 1)
    # a second process finds them all in the cache: nothing to send
    warm = run_fresh(PROGRAM, root, str(ran), env=env)
    assert warm["sent"] == 0 and warm["stages_here"] == 0 and result["sent"] >= 3


def test_a_module_a_worker_fails_on_is_compiled_here(monkeypatch):
    """A worker's failure costs only time: the module is compiled here, as without."""

    def failing(tasks):
        futures = {}
        for task in tasks:
            futures[task["key"]] = future = concurrent.futures.Future()
            future.set_running_or_notify_cancel()
            future.set_exception(RuntimeError("nbyoc: a compile worker failed: test"))
        return futures

    monkeypatch.setenv("NBYOC_COMPILE_WORKERS", "1")
    monkeypatch.setattr(compile_workers, "submit", failing)
    func = three_structures()
    fn = nbyoc.compile(func.with_attrs(global_symbol="llvm_failing_workers"), backend="llvm")
    x = np.random.default_rng(1).standard_normal((1, 8, 16, 16)).astype(np.float32)
    assert_close_to_host(fn, func, [x], rtol=1e-5, atol=1e-5)


def test_a_worker_refuses_a_module_whose_text_is_not_its_key(tmp_path, monkeypatch):
    monkeypatch.setenv("NBYOC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NBYOC_COMPILE_WORKERS", "1")
    source = "x = 1\n"
    tasks = [
        {"key": f"{k:032x}", "source": source, "name": f"m{k}", "cache_root": str(tmp_path),
         "numba_dir": str(tmp_path)}
        for k in range(compile_workers.MIN_MODULES)
    ]  # fmt: skip
    futures = compile_workers.submit(tasks)
    assert len(futures) == len(tasks)
    for future in futures.values():
        with pytest.raises(RuntimeError, match="does not have its key"):
            future.result(timeout=120)
    assert kernels.source_key(source) not in futures


def test_too_few_modules_or_no_workers_compile_here(monkeypatch):
    assert compile_workers.submit([{"key": "k"}] * (compile_workers.MIN_MODULES - 1)) == {}
    monkeypatch.setenv("NBYOC_COMPILE_WORKERS", "0")
    assert compile_workers.worker_count() == 0
    monkeypatch.setenv("NBYOC_COMPILE_WORKERS", "many")
    with pytest.raises(ValueError, match="NBYOC_COMPILE_WORKERS must be a whole number"):
        compile_workers.worker_count()


def test_the_worker_answers_each_line_and_keeps_prints_out_of_its_answers(tmp_path):
    """The protocol itself: one answer per line, a malformed line answered as failed."""
    import subprocess
    import sys

    lines = ["not json", json.dumps({"key": "abc"})]
    done = subprocess.run(
        [sys.executable, "-m", "nbyoc.runtime.llvm.compile_worker"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["ok"] for a in answers] == [False, False]
    assert answers[0]["key"] is None and answers[1]["key"] == "abc"
    assert "KeyError" in answers[1]["error"]


def test_a_worker_is_replaced_after_its_share_of_modules(tmp_path, monkeypatch):
    """(Numba never frees a module's machine code: a worker's memory grows with each.)"""
    monkeypatch.setenv("NBYOC_COMPILE_WORKERS", "1")
    monkeypatch.setattr(compile_workers, "MODULES_PER_WORKER", 1)
    tasks = [
        {"key": f"{k:032x}", "source": "", "name": f"m{k}", "cache_root": str(tmp_path),
         "numba_dir": str(tmp_path)}
        for k in range(compile_workers.MIN_MODULES)
    ]  # fmt: skip
    for future in compile_workers.submit(tasks).values():
        with pytest.raises(RuntimeError, match="does not have its key"):
            future.result(timeout=120)


def test_a_module_no_worker_has_started_is_taken_back_from_the_end(monkeypatch):
    """``take_back`` gives the task sent last that is still queued, cancelling its future
    (a worker skips it); a task sent again while pending shares the first future."""
    monkeypatch.setattr(compile_workers, "_start_workers", lambda: True)  # (none runs)
    monkeypatch.setattr(compile_workers, "_TASKS", queue.Queue())  # (nor an earlier test's)
    tasks = [{"key": f"take-back-{k}"} for k in range(compile_workers.MIN_MODULES)]
    futures = compile_workers.submit(tasks)
    try:
        assert compile_workers.pending([t["key"] for t in tasks]) == futures
        again = compile_workers.submit([tasks[0]])
        assert again[tasks[0]["key"]] is futures[tasks[0]["key"]]
        assert compile_workers.take_back() == tasks[-1]
        assert futures[tasks[-1]["key"]].cancelled()
        assert tasks[-1]["key"] not in compile_workers.pending([tasks[-1]["key"]])
    finally:
        for future in futures.values():
            future.cancel()
    assert compile_workers.take_back() is None


#: Compiles ``three_structures`` cut into regions of at most two calls (each region
#: has fewer stage modules than are worth sending alone) and reports what was sent to
#: the workers at the first region's compile, and the error against the host.
REGIONS = """
import json, sys
import numpy as np
import nbyoc
from nbyoc.codegen.llvm import module as llvm_module
from nbyoc.runtime.llvm import compile_workers
from tests.runtime.test_compile_workers import three_structures

sends = []
submit = compile_workers.submit
compile_workers.submit = lambda tasks: sends.append(len(tasks)) or submit(tasks)
func = three_structures()
fn = nbyoc.compile(func, backend="llvm", max_size=2)
x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
error = float(np.max(np.abs(fn(x) - nbyoc.compile(func, backend="host")(x))))
print(json.dumps({"regions": len(fn.runtime_modules), "sends": sends, "error": error,
                  "left_ahead": len(llvm_module._AHEAD)}))
"""


def test_a_models_regions_are_lowered_ahead_and_their_modules_sent_at_once(tmp_path):
    """At a model's first llvm region, every region is lowered and the stage modules of
    all of them go to the workers together (``module.lower_ahead``): regions too small
    to share alone still compile in the worker, and each region's compile then uses the
    lowering made ahead."""
    env = {"NBYOC_CACHE_DIR": str(tmp_path / "cache"), "NBYOC_COMPILE_WORKERS": "1"}
    root = str(__import__("pathlib").Path(__file__).parents[2])
    result = run_fresh(REGIONS, root, env=env)
    assert result["regions"] >= 3 and result["left_ahead"] == 0
    assert result["sends"][0] >= compile_workers.MIN_MODULES  # (all regions' at once)
    assert result["error"] <= 1e-5


def test_waiting_for_a_worker_compiles_here_the_modules_none_has_started(tmp_path, monkeypatch):
    """While it waits, this process takes back the modules no worker has started, last
    sent first, and compiles them; the module it waits for may be one of them."""
    monkeypatch.setenv("NBYOC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_workers, "_start_workers", lambda: True)  # (none runs)
    monkeypatch.setattr(compile_workers, "_TASKS", queue.Queue())  # (nor an earlier test's)
    sources = [f"value = {k}\n" for k in range(compile_workers.MIN_MODULES)]
    tasks = [kernels._task(kernels.source_key(s), s) for s in sources]
    futures = compile_workers.submit(tasks)
    try:
        assert kernels._wait(futures[tasks[0]["key"]]) is False  # (taken back: not a worker's)
        assert [vars(kernels._KERNELS[t["key"]])["value"] for t in tasks] == [0, 1, 2]
        assert all(f.cancelled() for f in futures.values())
    finally:
        for task in tasks:
            futures[task["key"]].cancel()
            kernels._KERNELS.pop(task["key"], None)
            kernels._STAGES.discard(task["key"])
