"""Graceful fallback: a region whose codegen raises, or whose module fails its first
call, moves to the next backend of the compile or to the host, only that region, with a
``FallbackWarning``; ``fn.fallbacks`` records it and an archive keeps it; ``strict=True``
raises as before (issue 39, item 5)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import CodegenError, CompileError, ExecutionError, FallbackWarning
from nbyoc.runtime.fallback import Fallback

from ..helpers import run_fresh
from .faulty import FaultyModule, register

OPS = ["add", "multiply", "exp", "tanh", "negative", "gather", "abs"]
#: Its codegen has no exp: a region holding one fails to build.
NO_EXP = register("t_fb_no_exp", OPS, refuse="exp")
#: Its tanh kernel crashes when called.
CRASHY = register("t_fb_crashy", OPS, crash_on="tanh")


def graph():
    """Three regions of one backend, with sqrt (which it lacks) on the host between them."""
    a = nbyoc.var("a", (4,))
    first = nbyoc.exp(a + a)  # region 0: add, exp
    second = nbyoc.tanh(nbyoc.sqrt(first) * 2.0)  # region 1: multiply, tanh
    return nbyoc.function([a], -(nbyoc.sqrt(second + 2.0) * 3.0))  # region 2


X = np.arange(4, dtype=np.float32) / 4


def expected():
    return nbyoc.compile(graph(), "host")(X)


def regions_of(fn) -> dict:
    return {n: f.attrs.get("Compiler", "host") for n, f in fn.module.functions.items()
            if n != "main"}  # fmt: skip


def test_a_codegen_that_fails_one_region_moves_only_that_region_to_the_host():
    with pytest.warns(FallbackWarning) as caught:
        fn = nbyoc.compile(graph(), NO_EXP)
    (warning,) = caught
    message = str(warning.message)
    assert "@t_fb_no_exp_0 moved from t_fb_no_exp to host" in message
    assert "NotImplementedError: exp is not written yet" in message
    assert "strict=True" in message and warning.filename == __file__
    assert regions_of(fn) == {"t_fb_no_exp_0": "host", "t_fb_no_exp_1": NO_EXP,
                              "t_fb_no_exp_2": NO_EXP}  # fmt: skip
    assert sorted(fn.runtime_modules) == ["t_fb_no_exp_1", "t_fb_no_exp_2"]
    assert fn.fallbacks == [Fallback("t_fb_no_exp_0", NO_EXP, "host",
                                     "NotImplementedError: exp is not written yet", "codegen")]  # fmt: skip
    np.testing.assert_array_equal(fn(X), expected())
    assert "t_fb_no_exp_0" not in fn.get_source()  # the host runs it: no code of its own


def test_the_region_moves_to_the_next_backend_that_takes_all_of_it():
    with pytest.warns(FallbackWarning, match="to csource"):
        fn = nbyoc.compile(graph(), [NO_EXP, "csource", "examplejson"])
    assert regions_of(fn)["t_fb_no_exp_0"] == "csource"
    assert [(r.backend, r.to) for r in fn.fallbacks] == [(NO_EXP, "csource")]
    assert fn.runtime_modules["t_fb_no_exp_0"].type_key == "csource"
    np.testing.assert_allclose(fn(X), expected(), rtol=1e-6)


def test_a_candidate_that_does_not_take_every_call_is_passed_over():
    a = nbyoc.var("a", (4,))
    i = nbyoc.const(np.array([3, 0], np.int64))
    f = nbyoc.function([a], nbyoc.gather(nbyoc.exp(a), i, axis=0))
    with pytest.warns(FallbackWarning, match="to examplejson"):
        fn = nbyoc.compile(f, [NO_EXP, "csource", "examplejson"])
    assert fn.fallbacks[0].to == "examplejson"
    np.testing.assert_allclose(fn(X), np.exp(X)[[3, 0]], rtol=1e-6)


def test_strict_raises_the_codegen_error_as_before():
    with pytest.raises(CompileError) as info:
        nbyoc.compile(graph(), NO_EXP, strict=True)
    assert isinstance(info.value, CodegenError)
    assert str(info.value) == (
        "the 't_fb_no_exp' codegen failed on @t_fb_no_exp_0: NotImplementedError: "
        "exp is not written yet"
    )
    assert isinstance(info.value.__cause__, NotImplementedError)


def test_a_user_error_in_the_options_is_no_fallback():
    with pytest.raises(CompileError, match="unknown option"):
        nbyoc.compile(graph(), [NO_EXP, "csource"], options={"csource": {"fast": 1}})


def test_a_module_failing_its_first_call_moves_and_the_call_still_returns():
    fn = nbyoc.compile(graph(), CRASHY)
    assert fn.fallbacks == []
    with pytest.warns(FallbackWarning, match="@t_fb_crashy_1 moved from t_fb_crashy to host: "
                      "its first call failed .RuntimeError: the tanh kernel crashed") as caught:  # fmt: skip
        np.testing.assert_array_equal(fn(X), expected())
    assert caught[0].filename == __file__
    assert [(r.symbol, r.to, r.when) for r in fn.fallbacks] == [("t_fb_crashy_1", "host",
                                                                  "first call")]  # fmt: skip
    assert regions_of(fn)["t_fb_crashy_1"] == "host" and "t_fb_crashy_1" not in fn.runtime_modules
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # later calls move nothing and say nothing
        np.testing.assert_array_equal(fn(X), expected())
    assert len(fn.fallbacks) == 1


def test_a_first_call_failure_moves_to_the_next_backend():
    with pytest.warns(FallbackWarning, match="to examplejson"):
        fn = nbyoc.compile(graph(), [CRASHY, "examplejson"])
        out = fn(X)
    np.testing.assert_allclose(out, expected(), rtol=1e-6)
    assert fn.runtime_modules["t_fb_crashy_1"].type_key == "examplejson"
    assert fn.fallbacks[0].to == "examplejson"


def test_a_whole_main_that_is_one_region_is_guarded_too():
    a = nbyoc.var("a", (4,))
    fn = nbyoc.compile(nbyoc.function([a], nbyoc.tanh(a) * a), CRASHY)
    with pytest.warns(FallbackWarning):
        np.testing.assert_allclose(fn(X), np.tanh(X) * X, rtol=1e-6)
    assert fn._direct is None  # the host runs it now
    np.testing.assert_allclose(fn(X), np.tanh(X) * X, rtol=1e-6)


def test_strict_raises_the_modules_error_at_its_first_call():
    fn = nbyoc.compile(graph(), CRASHY, strict=True)
    with pytest.raises(ExecutionError, match="the tanh kernel crashed"):
        fn(X)
    assert fn.fallbacks == []


def test_an_error_the_host_makes_too_is_the_inputs_fault_and_moves_nothing():
    always = register("t_fb_always", OPS, crash_on="gather")
    a = nbyoc.var("a", (4,))
    i = nbyoc.var("i", (2,), "int64")
    fn = nbyoc.compile(nbyoc.function([a, i], nbyoc.gather(a * 2.0, i, axis=0)), always)
    with pytest.raises(ExecutionError, match="the gather kernel crashed"):
        fn(X, np.array([0, 9]))  # 9 is out of range for the host too
    assert fn.fallbacks == [] and regions_of(fn) == {"t_fb_always_0": always}


def test_first_calls_in_threads_move_a_region_once():
    fn = nbyoc.compile(graph(), CRASHY)
    results = [None] * 6

    def call(k):
        results[k] = fn(X)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        threads = [threading.Thread(target=call, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(fn.fallbacks) == 1
    for result in results:
        np.testing.assert_array_equal(result, expected())


def test_symbolic_sizes_fall_back_per_binding():
    a = nbyoc.var("a", ("n",))
    f = nbyoc.function([a], nbyoc.exp(a) * a)
    with pytest.warns(nbyoc.errors.PerShapeWarning):
        fn = nbyoc.compile(f, [NO_EXP, "csource"])
    with pytest.warns(FallbackWarning, match="to csource"):
        np.testing.assert_allclose(fn(X), np.exp(X) * X, rtol=1e-6)
    assert [(r.backend, r.to) for r in fn.fallbacks] == [(NO_EXP, "csource")]


def test_the_fallbacks_are_saved_and_loaded_in_a_fresh_process(tmp_path):
    both = register("t_fb_both", OPS, refuse="exp", crash_on="tanh")
    with pytest.warns(FallbackWarning):
        fn = nbyoc.compile(graph(), [both, "examplejson"])
    with pytest.warns(FallbackWarning, match="first call"):
        fn(X)
    assert [(r.symbol, r.to, r.when) for r in fn.fallbacks] == [
        ("t_fb_both_0", "examplejson", "codegen"), ("t_fb_both_1", "examplejson", "first call")
    ]  # fmt: skip
    assert regions_of(fn)["t_fb_both_2"] == both
    path = tmp_path / "moved.nbyoc"
    fn.save(path)
    np.save(tmp_path / "x.npy", X)
    code = """
import json, sys, warnings
import numpy as np
import nbyoc
import tests.runtime.faulty  # (the loader of the test backends' modules)
warnings.simplefilter("error")  # loading moves nothing again
fn = nbyoc.load(sys.argv[1])
out = fn(np.load(sys.argv[2]))
print(json.dumps({"fallbacks": [r.to_json() for r in fn.fallbacks], "out": out.tolist(),
                  "strict": fn.strict, "regions": {n: f.attrs.get("Compiler", "host")
                  for n, f in fn.module.functions.items() if n != "main"}}))
"""
    root = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    got = run_fresh(code, root, str(path), str(tmp_path / "x.npy"))
    assert [Fallback.from_json(r) for r in got["fallbacks"]] == fn.fallbacks
    assert got["regions"] == regions_of(fn) and got["strict"] is False
    np.testing.assert_allclose(np.array(got["out"], np.float32), expected(), rtol=1e-6)


def test_strict_is_saved_and_an_archive_without_fallbacks_loads(tmp_path):
    fn = nbyoc.compile(graph(), "examplejson", strict=True)
    fn.save(tmp_path / "strict.nbyoc")
    loaded = nbyoc.load(tmp_path / "strict.nbyoc")
    assert loaded.strict and loaded.fallbacks == []


@pytest.mark.parametrize(
    "record, needle",
    [([{"symbol": "x"}], "bad fallback record"), ("nope", "fallbacks must be a list"),
     ([dict(symbol="a", backend="b", to="host", reason="r", when="later")], "bad fallback")],
)  # fmt: skip
def test_a_malformed_fallback_record_is_a_load_error(tmp_path, record, needle):
    import json
    import zipfile

    fn = nbyoc.compile(graph(), "examplejson")
    fn.save(tmp_path / "a.nbyoc")
    with zipfile.ZipFile(tmp_path / "a.nbyoc") as z:
        members = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(members["manifest.json"])
    manifest["fallbacks"] = record
    members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(tmp_path / "b.nbyoc", "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    with pytest.raises(nbyoc.errors.LoadError, match=needle):
        nbyoc.load(tmp_path / "b.nbyoc")


def test_the_faulty_module_loader_is_what_the_archive_test_relies_on():
    assert nbyoc.runtime.get_loader(FaultyModule.type_key).__self__ is FaultyModule


def test_a_first_call_that_fails_later_keeps_the_moves_it_made_and_stays_guarded():
    a = nbyoc.var("a", (4,))
    i = nbyoc.var("i", (2,), "int64")
    first = nbyoc.tanh(a * 2.0)  # crashes on CRASHY: moved
    f = nbyoc.function([a, i], nbyoc.gather(nbyoc.sqrt(first + 2.0), i, axis=0) * 3.0)
    fn = nbyoc.compile(f, CRASHY)
    with pytest.warns(FallbackWarning), pytest.raises(ExecutionError):
        fn(X, np.array([0, 9]))  # the gather region fails on the host too: the inputs' fault
    assert [r.symbol for r in fn.fallbacks] == ["t_fb_crashy_0"]
    expected = np.sqrt(np.tanh(X * 2) + 2)[[3, 1]] * 3
    np.testing.assert_allclose(fn(X, np.array([3, 1])), expected, rtol=1e-6)
    assert len(fn.fallbacks) == 1


def test_explain_shows_where_a_moved_region_runs_and_why():
    with pytest.warns(FallbackWarning):
        fn = nbyoc.compile(graph(), [NO_EXP, "csource"])
    report = fn.explain()
    moved = [r for r in report.ops if r.symbol == "t_fb_no_exp_0"]
    assert moved and all(r.target == "csource" for r in moved)
    assert all(
        r.note.startswith(f"moved from {NO_EXP} at codegen: NotImplementedError") for r in moved
    )
    region = next(r for r in report.regions if r.symbol == "t_fb_no_exp_0")
    assert region.backend == "csource"
    kept = {r.symbol: r.backend for r in report.regions if r.symbol.startswith("t_fb_no_exp")}
    assert kept == {"t_fb_no_exp_0": "csource", "t_fb_no_exp_1": NO_EXP, "t_fb_no_exp_2": NO_EXP}
