"""Control flow in the IR: ``cond`` and ``loop`` against plain Python, their type errors,
the text form and JSON carrying their bodies, every backend compiling the bodies, and
an executable with a loop saved and loaded in another process."""

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import ExecutionError, NbyocTypeError
from nbyoc.ir.serialize import from_json, to_json
from nbyoc.ir.structural import structural_digest, structural_equal
from nbyoc.runtime.compiles import compile_counts

from ..helpers import run_fresh

BACKENDS = ["host", "llvm", "csource", "examplejson"]
TRUE = nbyoc.const(np.array(True))


def _halving(limit: float):
    """A loop body: while the sum is above ``limit``, halve the state and record it;
    ``w`` is captured (read by every trip)."""
    i, c, s, w = (nbyoc.var("i", (), "int64"), nbyoc.var("c", (), "bool"), nbyoc.var("s", (4,)),
                  nbyoc.var("w", (4,)))  # fmt: skip
    nxt = s * 0.5 + w
    return nbyoc.function([i, c, s, w], (nbyoc.greater(nbyoc.sum(nxt), limit), nxt))


def _while(x, w, limit):
    """The Python meaning of ``loop(True, x, w, body=_halving(limit), carried=1)``."""
    s = x
    while True:
        s = (s * np.float32(0.5) + w).astype(np.float32)
        if not s.sum(dtype=np.float32) > limit:
            return s


def _model(limit=5.0, trips=None):
    x, w = nbyoc.var("x", (4,)), nbyoc.var("w", (4,))
    out = nbyoc.loop(TRUE, x, w, body=_halving(limit), carried=1, trips=trips)
    return nbyoc.function([x, w], out[0])


def test_a_while_loop_runs_until_its_condition_fails():
    x, w = np.array([64, 32, 16, 8], np.float32), np.full(4, 0.25, np.float32)
    got = nbyoc.compile(_model(), "host")(x, w)
    np.testing.assert_array_equal(got, _while(x, w, 5.0))


def test_trips_bound_the_loop_and_scan_outputs_stack_each_trip():
    i, c, s = nbyoc.var("i", (), "int64"), nbyoc.var("c", (), "bool"), nbyoc.var("s", (2,))
    body = nbyoc.function([i, c, s], (c, s + 1.0, s * nbyoc.cast(i, "float32")))
    x = nbyoc.var("x", (2,))
    f = nbyoc.function([x], nbyoc.loop(TRUE, x, body=body, trips=4))
    state, scans = nbyoc.compile(f, "host")(np.zeros(2, np.float32))
    assert state.tolist() == [4.0, 4.0]
    assert scans.tolist() == [[0, 0], [1, 1], [4, 4], [9, 9]]
    zero = nbyoc.function([x], nbyoc.loop(TRUE, x, body=body, trips=0))
    state, scans = nbyoc.compile(zero, "host")(np.ones(2, np.float32))
    assert state.tolist() == [1.0, 1.0] and scans.shape == (0, 2)


def test_a_loop_whose_condition_cuts_its_scans_short_is_an_error_when_it_runs():
    i, c, s = nbyoc.var("i", (), "int64"), nbyoc.var("c", (), "bool"), nbyoc.var("s", (2,))
    body = nbyoc.function([i, c, s], (nbyoc.less(i, 1), s + 1.0, s))
    x = nbyoc.var("x", (2,))
    f = nbyoc.function([x], nbyoc.loop(TRUE, x, body=body, trips=5)[1])
    with pytest.raises(ExecutionError, match="stopped it after 2 of its 5 trips"):
        nbyoc.compile(f, "host")(np.zeros(2, np.float32))


def test_a_false_condition_runs_no_trip():
    x, w = np.ones(4, np.float32), np.zeros(4, np.float32)
    flag, xv, wv = nbyoc.var("go", (), "bool"), nbyoc.var("x", (4,)), nbyoc.var("w", (4,))
    f = nbyoc.function([flag, xv, wv], nbyoc.loop(flag, xv, wv, body=_halving(0.0), carried=1)[0])
    np.testing.assert_array_equal(nbyoc.compile(f, "host")(np.array(False), x, w), x)


def test_cond_takes_the_branch_its_predicate_picks():
    p, x, v = nbyoc.var("p", (), "bool"), nbyoc.var("x", (3,)), nbyoc.var("v", (3,))
    f = nbyoc.function(
        [p, x],
        nbyoc.cond(p, x, then_branch=nbyoc.function([v], nbyoc.exp(v)),
                   else_branch=nbyoc.function([v], v - 1.0)),
    )  # fmt: skip
    data = np.arange(3, dtype=np.float32)
    for backend in BACKENDS:
        run = nbyoc.compile(f, backend)
        np.testing.assert_allclose(run(np.array(True), data), np.exp(data), rtol=1e-6)
        np.testing.assert_array_equal(run(np.array(False), data), data - 1)


def test_type_errors_say_what_the_body_must_be():
    x, v = nbyoc.var("x", (3,)), nbyoc.var("v", (3,))
    p = nbyoc.var("p", (), "bool")
    u = nbyoc.var("u", (4,))
    wide = nbyoc.function([u], u * 1.0)
    with pytest.raises(NbyocTypeError, match=r"then_branch takes .* but is given"):
        nbyoc.cond(p, x, then_branch=wide, else_branch=nbyoc.function([v], v))
    with pytest.raises(NbyocTypeError, match="both must return the same types"):
        nbyoc.cond(p, x, then_branch=nbyoc.function([v], v),
                   else_branch=nbyoc.function([v], nbyoc.sum(v)))  # fmt: skip
    with pytest.raises(NbyocTypeError, match="predicate must be a bool scalar"):
        nbyoc.cond(x, x, then_branch=nbyoc.function([v], v), else_branch=nbyoc.function([v], v))
    i, c = nbyoc.var("i", (), "int64"), nbyoc.var("c", (), "bool")
    shrinking = nbyoc.function([i, c, v], (c, v[:2]))
    with pytest.raises(NbyocTypeError, match="each carried value of its type"):
        nbyoc.loop(TRUE, x, body=shrinking)
    scanning = nbyoc.function([i, c, v], (c, v, v))
    with pytest.raises(NbyocTypeError, match="needs trips="):
        nbyoc.loop(TRUE, x, body=scanning)
    with pytest.raises(NbyocTypeError, match="attribute body must be an nbyoc Function"):
        nbyoc.call_op("loop", TRUE, x, body="f", carried=1)


def test_the_text_form_and_json_carry_the_bodies():
    f = _model(trips=7)
    assert "body=fn (%i: Tensor[(), int64]" in str(f)
    assert structural_equal(nbyoc.parse(str(f)), f)
    assert structural_equal(from_json(to_json(f)), f)
    assert structural_digest(_model(5.0)) != structural_digest(_model(6.0))  # bodies differ


@pytest.mark.parametrize("backend", BACKENDS[1:])
def test_every_backend_compiles_the_body_and_matches_the_host(backend):
    x, w = np.array([64, 32, 16, 8], np.float32), np.full(4, 0.25, np.float32)
    before = compile_counts()
    run = nbyoc.compile(_model(limit=5.0 + BACKENDS.index(backend)), backend)
    np.testing.assert_array_equal(run(x, w), nbyoc.compile(run.module["main"], "host")(x, w))
    if backend == "llvm":  # (main holds only the loop: what compiled was its body)
        assert compile_counts().get("llvm modules", 0) > before.get("llvm modules", 0)


def test_symbolic_sizes_reach_into_the_body():
    x, w = nbyoc.var("x", ("n",)), nbyoc.var("w", ("n",))
    i, c, s, v = (nbyoc.var("i", (), "int64"), nbyoc.var("c", (), "bool"), nbyoc.var("s", ("n",)),
                  nbyoc.var("v", ("n",)))  # fmt: skip
    body = nbyoc.function([i, c, s, v], (nbyoc.less(i, 2), s * 0.5 + v))
    f = nbyoc.function([x, w], nbyoc.loop(TRUE, x, w, body=body, carried=1)[0])
    run = nbyoc.compile(f, "llvm")
    for n in (3, 5):
        data = np.arange(n, dtype=np.float32)
        # (three trips, i = 0, 1, 2, of s -> s / 2 + v from s = v: 1.5, 1.75, 1.875 v)
        np.testing.assert_allclose(run(data, data), data * 1.875)


def test_a_saved_loop_runs_in_another_process(tmp_path):
    run = nbyoc.compile(_model(), "llvm")
    run.save(tmp_path / "loop.nbyoc")
    x, w = np.array([64, 32, 16, 8], np.float32), np.full(4, 0.25, np.float32)
    code = (
        "import json, sys, numpy as np, nbyoc\n"
        "run = nbyoc.load(sys.argv[1])\n"
        "x, w = np.array([64, 32, 16, 8], np.float32), np.full(4, 0.25, np.float32)\n"
        "print(json.dumps(run(x, w).tolist()))\n"
    )
    got = run_fresh(code, tmp_path, str(tmp_path / "loop.nbyoc"))
    assert got == _while(x, w, 5.0).tolist()
