"""``fn.verify`` and ``nbyoc.compile(..., verify=True)``: every external function run on
its real inputs next to the host, each output within its forward error bound, and a
failing region bisected to the first op that diverges (issue 39, item 4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import VerificationError
from nbyoc.runtime.verify import check_output

from ..strategies import graphs, random_inputs
from .faulty import op_names, register, swapped

ELEMENTWISE = ["add", "subtract", "multiply", "exp", "tanh", "negative", "abs"]
#: Computes every multiply as an add: the bug verify must catch and name.
SWAP = {"multiply": "add"}
WRONG = register("t_verify_wrong", ELEMENTWISE, swap=SWAP)
RIGHT = register("t_verify_right", ELEMENTWISE)


def chain():
    """One region of six ops; the third (%2) is the multiply."""
    a, b = nbyoc.var("a", (8,)), nbyoc.var("b", (8,))
    y = nbyoc.tanh(nbyoc.exp(a - b) * b + a)
    return nbyoc.function([a, b], [y, nbyoc.abs(a) + b])


def data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(0.5, 1, n).astype(np.float32)


def test_a_wrong_backend_is_caught_and_the_wrong_op_named():
    fn = nbyoc.compile(chain(), backend=WRONG)
    report = fn.verify(*data())
    assert not report.ok
    assert [(r.symbol, r.output) for r in report.failures] == [("t_verify_wrong_0", 0)]
    bad = report.failures[0]
    assert bad.backend == WRONG and bad.dtype == "float32" and bad.beyond == bad.checked == 8
    assert bad.max_abs_error > 0.1 and bad.tolerance < 1e-5
    (divergence,) = report.divergences
    assert divergence.found
    assert (divergence.symbol, divergence.backend, divergence.node, divergence.op) == (
        "t_verify_wrong_0", WRONG, "%2", "multiply",
    )  # fmt: skip
    assert divergence.line == "%2 = multiply(%1, %in1)"
    assert divergence.line in str(fn.module[divergence.symbol])  # the region's own text
    text = str(report)
    assert "FAIL" in text and "the first op that diverges is %2, multiply" in text
    assert "@t_verify_wrong_0  1" in text  # the good output's row is there too


def test_bisection_names_the_attributes_of_the_op_that_diverges():
    register("t_verify_sum", ["sum", "max", "exp", "multiply"], swap={"sum": "max"})
    x = nbyoc.var("x", (3, 4))
    f = nbyoc.function([x], nbyoc.sum(nbyoc.exp(x), axis=1, keepdims=True) * 2.0)
    fn = nbyoc.compile(f, backend="t_verify_sum")
    (divergence,) = fn.verify(np.ones((3, 4), np.float32)).divergences
    assert (divergence.node, divergence.op) == ("%1", "sum")
    assert divergence.attrs == {"axis": (1,), "keepdims": True}
    assert "sum(axis=(1,), keepdims=True)" in str(divergence)


def test_a_correct_backend_passes_on_rounding_graphs():
    fn = nbyoc.compile(chain(), backend=RIGHT)
    report = fn.verify(*data())
    assert report.ok and not report.failures and not report.divergences
    assert [row.output for row in report.rows] == [0, 1]


@pytest.mark.parametrize("backend", ["csource", "examplejson"])
def test_shipped_backends_verify_on_a_mixed_graph(backend):
    x = nbyoc.var("x", (6, 32))
    k = nbyoc.var("k", (6, 32), "int32")
    y = nbyoc.exp(x) * x - nbyoc.tanh(x * 3.0)
    f = nbyoc.function([x, k], [y, nbyoc.floor(y * 4.0), (k * 3 + 1) // 2, y > 0.5])
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((6, 32)).astype(np.float32),
            rng.integers(-50, 50, (6, 32)).astype(np.int32)]  # fmt: skip
    report = nbyoc.compile(f, backend).verify(*args)
    assert report.ok, str(report)
    assert {row.dtype for row in report.rows} >= {"float32", "int32"}


@settings(max_examples=12, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(graphs(max_params=3, min_nodes=4, max_nodes=12), st.integers(0, 99))
def test_random_graphs_verify_on_csource(f, seed):
    """No false alarm: the tolerance is the computation's own error bound."""
    with np.errstate(all="ignore"):
        report = nbyoc.compile(f, "csource").verify(*random_inputs(f, seed))
    assert report.ok, f"{f}\n{report}"


def test_integers_are_exact_and_nan_must_be_nan_on_both_sides():
    exact = check_output("s", "b", 0, np.array([1, 2]), np.array([1, 3]), np.zeros(2))
    assert (exact.beyond, exact.max_abs_error, exact.ok) == (1, 1.0, False)
    nan = np.array([np.nan, 1.0], np.float32)
    both = check_output("s", "b", 0, nan, nan.copy(), np.full(2, 1e-6))
    assert both.ok and both.max_abs_error == 0
    one = check_output("s", "b", 0, np.array([1.0, 1.0], np.float32), nan, np.full(2, 1e-6))
    assert (one.beyond, one.max_abs_error) == (1, np.inf)
    skipped = check_output("s", "b", 0, np.array([1, 5]), np.array([1, 2]), np.array([0, np.inf]))
    assert skipped.ok and (skipped.checked, skipped.skipped) == (1, 1)


def test_rtol_and_atol_widen_the_tolerance():
    fn = nbyoc.compile(chain(), backend=WRONG)
    assert fn.verify(*data(), bisect=False, atol=10.0).ok
    report = fn.verify(*data(), bisect=False)
    assert not report.ok and not report.divergences


def test_compile_verify_checks_the_first_call_only():
    fn = nbyoc.compile(chain(), backend=WRONG, verify=True)
    with pytest.raises(VerificationError, match=r"@t_verify_wrong_0 \(t_verify_wrong\)") as info:
        fn(*data())
    assert info.value.report.divergences[0].op == "multiply"
    assert isinstance(info.value, nbyoc.NbyocError)
    later = fn(*data())  # later calls run normally (wrong, as the user was told)
    assert later[0].shape == (8,)
    good = nbyoc.compile(chain(), backend=RIGHT, verify=True)
    np.testing.assert_allclose(good(*data())[0], nbyoc.compile(chain(), "host")(*data())[0])


def test_a_region_that_raises_is_reported_and_the_rest_still_verified():
    register("t_verify_crash", ELEMENTWISE, crash_on="exp")
    a, b = nbyoc.var("a", (8,)), nbyoc.var("b", (8,))
    f = nbyoc.function([a, b], nbyoc.exp(nbyoc.abs(a + b) * 2.0) + nbyoc.tanh(b))
    fn = nbyoc.compile(f, "t_verify_crash", strict=True)
    report = fn.verify(*data())
    crashed = [row for row in report.rows if row.error]
    assert crashed and "RuntimeError: the exp kernel crashed" in crashed[0].error
    assert "raised RuntimeError" in str(report)
    assert report.divergences[0].op == "exp"  # the first prefix that raises


def test_an_error_only_the_whole_region_makes_stops_the_bisection_and_says_so():
    class WrongWhole(nbyoc.runtime.Module):
        """Right for a bisection's prefixes (several outputs), wrong for the whole region."""

        type_key = "t_verify_whole"

        def __init__(self, func):
            self.func, self.run = func, nbyoc.runtime.HostFunction(func)

        def get_function(self, symbol):
            whole = len(nbyoc.ir.types.tensor_types(self.func.ret_type)) == 1

            def impl(inputs, outputs):
                if whole:
                    outputs[0][...] = 0
                    return
                for out, value in zip(outputs, self.run(*inputs)):
                    np.copyto(out, value)

            return nbyoc.runtime.destination_passing(self.func, impl)

    for op in ("exp", "add"):
        nbyoc.register_op_support("t_verify_whole", op, replace=True)
    nbyoc.register_codegen("t_verify_whole", replace=True)(WrongWhole)
    x = nbyoc.var("x", (4,))
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.exp(x) + x), "t_verify_whole")
    (divergence,) = fn.verify(np.ones(4, np.float32)).divergences
    assert not divergence.found and "built whole" in divergence.detail
    assert "bisection stopped" in str(divergence)


def test_a_backend_that_cannot_build_a_prefix_stops_the_bisection_and_says_why():
    seen = []
    name = register("t_verify_picky", ELEMENTWISE, swap={"multiply": "add"}, built=seen)
    fn = nbyoc.compile(chain(), backend=name)
    register(name, ELEMENTWISE, swap={"multiply": "add"}, refuse="exp")  # now it refuses
    (divergence,) = fn.verify(*data()).divergences
    assert not divergence.found
    assert "cannot build the region's first" in divergence.detail
    assert "NotImplementedError: exp is not written yet" in divergence.detail


def test_symbolic_sizes_verify_the_build_for_the_arguments_sizes():
    a, b = nbyoc.var("a", ("n",)), nbyoc.var("b", ("n",))
    f = nbyoc.function([a, b], nbyoc.exp(a) * b)
    with pytest.warns(nbyoc.errors.PerShapeWarning):
        fn = nbyoc.compile(f, backend=WRONG)
    report = fn.verify(*data(5))
    assert not report.ok and report.divergences[0].op == "multiply"
    assert list(fn.specializations) == [(("n", 5),)]
    assert fn.specializations[(("n", 5),)].module["main"].params[0].type.shape == (5,)
    llvm = nbyoc.compile(f)  # size-generic: verified through the binding's build
    assert llvm.verify(*data(7)).ok and llvm.verify(*data(3)).ok


def test_a_module_with_everything_on_the_host_verifies_nothing():
    x = nbyoc.var("x", (3,))
    report = nbyoc.compile(nbyoc.function([x], x * 2.0), "host").verify(np.ones(3, np.float32))
    assert report.ok and report.rows == []
    assert "everything ran on the host" in str(report)


def test_the_bisection_builds_about_log2_prefixes():
    seen = []
    name = register("t_verify_count", ELEMENTWISE, swap={"negative": "abs"}, built=seen)
    x = nbyoc.var("x", (4,))
    y = x
    for _ in range(15):
        y = nbyoc.exp(y * 0.5) - 1.0
    y = -(y + 1.0)  # the 32nd op is the wrong one
    fn = nbyoc.compile(nbyoc.function([x], nbyoc.tanh(y) * 2.0), backend=name)
    seen.clear()
    (divergence,) = fn.verify(np.linspace(0, 1, 4, dtype=np.float32)).divergences
    assert divergence.op == "negative" and divergence.line.startswith(f"{divergence.node} = neg")
    assert len(seen) <= 7  # the whole region once, then log2(34) halvings
    assert all("negative" in op_names(f) for f in seen[:1])


def test_a_backend_that_cannot_run_a_prefix_stops_the_bisection_and_says_why():
    class OneOutput(nbyoc.runtime.Module):
        """Computes multiply as add, and cannot run a function of several outputs."""

        type_key = "t_verify_one_output"

        def __init__(self, func):
            self.func, self.run = func, nbyoc.runtime.HostFunction(swapped(func, SWAP))

        def get_function(self, symbol):
            def impl(inputs, outputs):
                if len(outputs) > 1:
                    raise NotImplementedError("one output only")
                np.copyto(outputs[0], self.run(*inputs))

            return nbyoc.runtime.destination_passing(self.func, impl)

    for op in ELEMENTWISE:
        nbyoc.register_op_support("t_verify_one_output", op, replace=True)
    nbyoc.register_codegen("t_verify_one_output", replace=True)(OneOutput)
    a, b = nbyoc.var("a", (8,)), nbyoc.var("b", (8,))
    fn = nbyoc.compile(nbyoc.function([a, b], nbyoc.exp(a) * b + a), "t_verify_one_output")
    (divergence,) = fn.verify(*data()).divergences
    assert not divergence.found
    assert "raised on the region's first 3 ops (NotImplementedError: one output only)" in str(
        divergence
    )


def test_a_wrong_composite_kernel_is_named_by_its_composite():
    from nbyoc.transform.patterns import is_op, wildcard

    name = "t_verify_fused"
    nbyoc.register_patterns(name, [(f"{name}.fma", is_op("add")(
        is_op("multiply")(wildcard(), wildcard()), wildcard()))], replace=True)  # fmt: skip
    nbyoc.register_op_support(name, "exp", replace=True)

    def wrong_kernels(func):  # the fma kernel computes a * b - c
        new = {p: p for p in func.params}
        for node in nbyoc.ir.post_order([func.body], leaves=set(func.params)):
            args = [new[a] for a in nbyoc.ir.operands(node)]
            if isinstance(node, nbyoc.ir.Call) and node.op.name == "composite":
                new[node] = args[0] * args[1] - args[2]
            elif node not in new:
                new[node] = nbyoc.ir.traversal.with_operands(node, args)
        return nbyoc.function(func.params, new[func.body])

    class Fused(nbyoc.runtime.Module):
        type_key = "t_verify_fused"

        def __init__(self, func):
            self.func, self.run = func, nbyoc.runtime.HostFunction(wrong_kernels(func))

        def get_function(self, symbol):
            def impl(inputs, outputs):
                results = self.run(*inputs)
                for out, value in zip(
                    outputs, results if isinstance(results, tuple) else [results]
                ):
                    np.copyto(out, value)

            return nbyoc.runtime.destination_passing(self.func, impl)

    nbyoc.register_codegen(name, replace=True)(Fused)
    a, b = nbyoc.var("a", (8,)), nbyoc.var("b", (8,))
    fn = nbyoc.compile(nbyoc.function([a, b], nbyoc.exp(nbyoc.exp(a) * b + a)), name)
    report = fn.verify(*data())
    assert not report.ok
    (divergence,) = report.divergences
    assert divergence.op == "composite" and divergence.attrs["Composite"] == f"{name}.fma"
    assert 'Composite="t_verify_fused.fma"' in divergence.line
