"""``nbyoc.testing.check_backend``: the shipped backends pass a slice of it (all of it
with --run-slow); a backend's wrong op shows up as a mismatch with a reproducer, a
raising one as an error, a dtype its predicate refuses as a skipped row; without
hypothesis it draws from a seeded generator."""

import subprocess
import sys

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocError
from nbyoc.runtime import HostFunction, Module, destination_passing
from nbyoc.testing.check import check_backend

#: The slice CI runs: every op each backend declares, on a dtype or few, one graph each
#: (measured from a cold cache: 12 to 18 s of CPU a backend); --run-slow runs all of it
#: (llvm: 1500 graphs, 10 minutes).
SLICES = {
    "csource": ["float32", "int8", "bool"],
    "llvm": ["float32"],
    "examplejson": ["float64"],
}


@pytest.mark.parametrize("backend", sorted(SLICES))
def test_a_shipped_backend_passes_its_slice(backend):
    report = check_backend(backend, examples=1, dtypes=SLICES[backend], onnx=False)
    assert report.ok, str(report)
    ran = {row.op for row in report.rows if row.cases}
    assert ran == set(nbyoc.codegen.registry.declared_ops(backend)), str(report)


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(SLICES))
def test_a_shipped_backend_passes_all_of_it(backend):
    report = check_backend(backend, examples=2)
    assert report.ok, str(report)


def test_onnx_node_cases_of_the_ops_run_for_the_backend():
    pytest.importorskip("onnx")
    report = check_backend("csource", ops=["exp", "where"], dtypes=["float32"], examples=2)
    assert report.ok, str(report)
    exp = report.row("exp", "float32")
    assert (exp.graphs, exp.onnx, exp.passed) == (2, 2, 4)
    assert report.row("where", "float32").onnx >= 1


class WrongModule(Module):
    """Runs its function with NumPy, but adds 1 to whatever a multiply computes, and
    raises on a maximum."""

    type_key = "wrongmath_module"

    def __init__(self, func):
        self.func, self.run = func, HostFunction(func)
        ops = {n.op.name for n in nbyoc.ir.post_order([func.body]) if isinstance(n, nbyoc.ir.Call)}
        self.wrong, self.broken = "multiply" in ops, "maximum" in ops

    def get_function(self, symbol):
        def impl(inputs, outputs):
            if self.broken:
                raise RuntimeError("maximum is not written yet")
            results = self.run(*inputs)
            for out, value in zip(outputs, results if isinstance(results, tuple) else [results]):
                np.copyto(out, value + 1 if self.wrong else value, casting="unsafe")

        return destination_passing(self.func, impl)


@pytest.fixture(scope="module")
def wrongmath():
    for op in ("add", "multiply", "maximum"):
        nbyoc.register_op_support("wrongmath", op, replace=True)
    nbyoc.register_op_support(
        "wrongmath", "subtract", lambda call: call.type.dtype == "float32", replace=True
    )
    nbyoc.register_codegen("wrongmath", replace=True)(WrongModule)
    return "wrongmath"


def test_a_wrong_op_is_a_mismatch_with_its_worst_error_and_a_reproducer(wrongmath):
    report = check_backend(wrongmath, ops=["add", "multiply"], dtypes=["float32", "int32"],
                           examples=2, onnx=False)  # fmt: skip
    assert not report.ok
    for dtype in ("float32", "int32"):
        assert report.row("add", dtype).passed == 2
        multiply = report.row("multiply", dtype)
        assert (multiply.graphs, multiply.failed) == (2, 2) and multiply.worst == pytest.approx(1)
    failure = report.failures[0]
    assert (failure.op, failure.source, failure.kind) == ("multiply", "graphs", "mismatch")
    assert "beyond their bound" in failure.message
    text = failure.reproducer.split("with TEXT:\n", 1)[1]
    f = nbyoc.parse(text)  # the reproducer reproduces
    seed = int(failure.reproducer.split("seed=")[1].split(")")[0])
    args = nbyoc.testing.random_inputs(f, seed=seed)
    got, want = nbyoc.compile(f, wrongmath)(*args), nbyoc.compile(f, "host")(*args)
    assert not all(np.array_equal(g, w) for g, w in zip(np.atleast_1d(got), np.atleast_1d(want)))
    printed = str(report)
    assert "failure 1: multiply on float32 (graphs): mismatch, worst 1" in printed
    assert "reproducer: f = nbyoc.parse(TEXT)" in printed


def test_a_wrong_op_fails_onnx_s_node_cases_too(wrongmath):
    pytest.importorskip("onnx")
    report = check_backend(wrongmath, ops=["multiply"], dtypes=["float32"], examples=1)
    (onnx,) = [f for f in report.failures if f.source == "onnx"]
    assert onnx.kind == "mismatch" and onnx.worst == pytest.approx(1)
    assert "beyond rtol=" in onnx.message and "test_mul" in onnx.reproducer


def test_an_op_that_raises_is_an_error_and_a_refused_dtype_a_skipped_row(wrongmath):
    report = check_backend(wrongmath, ops=["maximum", "subtract"], dtypes=["float32", "int8"],
                           examples=1, onnx=False)  # fmt: skip
    maximum = report.row("maximum", "float32")
    assert (maximum.graphs, maximum.failed, maximum.worst) == (1, 1, None)
    assert any(f.kind == "error" and "maximum is not written yet" in f.message
               for f in report.failures)  # fmt: skip
    assert report.row("subtract", "float32").passed == 1
    skipped = report.row("subtract", "int8")
    assert skipped.cases == 0 and "predicate refused" in skipped.note


def test_a_predicate_that_raises_is_an_error():
    nbyoc.register_op_support("crashpred", "abs", lambda call: 1 / 0, replace=True)
    nbyoc.register_codegen("crashpred", replace=True)(WrongModule)
    report = check_backend("crashpred", dtypes=["int8"], examples=1, onnx=False)
    assert report.row("abs", "int8").failed == 1
    assert "predicate of crashpred/abs failed" in report.failures[0].message


def test_an_op_without_a_generator_is_a_row_saying_so():
    nbyoc.register_op_support("loopy", "loop", replace=True)
    nbyoc.register_codegen("loopy", replace=True)(WrongModule)
    report = check_backend("loopy", onnx=False)
    (row,) = report.rows
    assert (row.op, row.dtype, row.cases) == ("loop", "-", 0) and "no case generator" in row.note


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"examples": 0}, "examples must be a positive int"),
        ({"ops": ["matmul"]}, "does not declare op(s) 'matmul'"),
        ({"dtypes": ["float8_e4m3fn"]}, "unknown dtype(s)"),
    ],
)
def test_what_cannot_be_checked_is_refused(kwargs, message):
    with pytest.raises(NbyocError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_backend("csource", **kwargs)
    with pytest.raises(nbyoc.errors.UnknownBackendError):
        check_backend("no-such-backend")


def test_without_hypothesis_cases_come_from_a_seeded_generator():
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import nbyoc, nbyoc.testing\n"
        "from nbyoc.testing.check import check_backend\n"
        "r = check_backend('csource', ops=['add'], dtypes=['int16'], examples=2, onnx=False)\n"
        "print(r.generator, r.ok, r.row('add', 'int16').passed)\n"
        "try:\n"
        "    import nbyoc.testing.strategies\n"
        "except nbyoc.errors.MissingDependencyError as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == "random True 2"
    assert "pip install 'nbyoc[testing]'" in second
