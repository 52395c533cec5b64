"""annotate_target -> merge_compiler_regions -> partition_graph, and the Executable
that runs the result: every case checked with verify after each pass, a save ->
load round trip, and numbers equal to the host's."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.ir import Call, Constant, GlobalVar, Tuple, TupleGetItem
from nbyoc.transform import annotate_target, merge_compiler_regions, partition_graph
from nbyoc.transform.merge import counted_calls

from ..helpers import reload
from ..strategies import assert_same_results, graphs, random_inputs
from .backends import ARITH, F32_ONLY, REDUCE, TRANSC


def passes(f, backends, merge=True, bind_constants=True, max_size=None):
    """Run the three passes, verifying after each; return the module."""
    regions = nbyoc.verify(annotate_target(f, backends))
    if merge:
        regions = nbyoc.verify(merge_compiler_regions(regions, max_size))
    return nbyoc.verify(partition_graph(regions, bind_constants))


def run_both(f, backends, seed=0, **options):
    """Compile for ``backends`` (after a save -> load round trip) and on the host;
    the results must be identical. Returns the offloaded Executable."""
    fn = reload(nbyoc.compile(f, backends, **options))
    args = random_inputs(f, seed)
    with np.errstate(all="ignore"):
        assert_same_results(fn(*args), nbyoc.compile(f, "host")(*args))
    return fn


def externals(mod):
    return {name: f for name, f in mod.functions.items() if name != "main"}


def calls_in(func):
    return [n for n in nbyoc.ir.post_order([func.body]) if isinstance(n, Call)]


def reference():
    a, b, c, d = (nbyoc.var(n, (10, 10)) for n in "abcd")
    return nbyoc.function([a, b, c, d], ((a + b) - c) * d)


def test_reference_graph_is_one_region_merged_and_three_unmerged():
    merged = passes(reference(), ARITH)
    assert list(externals(merged)) == ["t_arith_0"]
    assert [c.op.name for c in calls_in(merged["t_arith_0"])] == ["add", "subtract", "multiply"]
    assert [p.name_hint for p in merged["t_arith_0"].params] == ["in0", "in1", "in2", "in3"]
    unmerged = passes(reference(), ARITH, merge=False)
    assert list(externals(unmerged)) == ["t_arith_0", "t_arith_1", "t_arith_2"]
    fn = run_both(reference(), ARITH)
    assert fn.runtime_modules["t_arith_0"].calls == 1
    run_both(reference(), ARITH, merge=False)


def test_external_functions_carry_compiler_and_symbol():
    ext = passes(reference(), ARITH)["t_arith_0"]
    assert dict(ext.attrs) == {"Compiler": "t_arith", "global_symbol": "t_arith_0"}


def test_unsupported_op_in_between_falls_back_to_the_host():
    a, b = nbyoc.var("a", (4, 4)), nbyoc.var("b", (4, 4))
    f = nbyoc.function([a, b], (nbyoc.sqrt(a * b) + b) * a)  # sqrt: no backend has it
    mod = passes(f, ARITH)
    assert list(externals(mod)) == ["t_arith_0", "t_arith_1"]
    assert [c.op.name for c in calls_in(mod["main"]) if not isinstance(c.op, GlobalVar)] == ["sqrt"]
    run_both(f, ARITH)


def test_several_backends_in_priority_order():
    a = nbyoc.var("a", (3,))
    f = nbyoc.function([a], nbyoc.exp(a + a) * a)

    def owners(mod):
        return {name: [c.op.name for c in calls_in(fn)] for name, fn in externals(mod).items()}

    # add and multiply cannot merge: multiply reads add through exp, which is on t_transc
    assert owners(passes(f, [ARITH, TRANSC])) == {
        "t_arith_0": ["add"], "t_transc_0": ["exp"], "t_arith_1": ["multiply"]}  # fmt: skip
    assert owners(passes(f, [TRANSC, ARITH])) == {
        "t_transc_0": ["add", "exp"],
        "t_arith_0": ["multiply"],
    }
    run_both(f, [ARITH, TRANSC])
    run_both(f, [TRANSC, ARITH])


def test_predicates_see_the_typed_call():
    x32, x64 = nbyoc.var("x", (3,), "float32"), nbyoc.var("y", (3,), "float64")
    f = nbyoc.function([x32, x64], [x32 + x32, x64 + x64])
    mod = passes(f, F32_ONLY)
    (ext,) = externals(mod).values()
    assert [c.type.dtype for c in calls_in(ext)] == ["float32"]
    run_both(f, F32_ONLY)


def test_multiple_outputs_are_returned_once_each():
    a, b = nbyoc.var("a", (3,)), nbyoc.var("b", (3,))
    s = a + b
    d = s - b  # s is used by d inside the region, and four times outside
    f = nbyoc.function([a, b], [nbyoc.exp(s), nbyoc.tanh(s), s, nbyoc.exp(d), d])
    mod = passes(f, ARITH)
    (ext,) = externals(mod).values()
    assert isinstance(ext.body, Tuple) and len(ext.body.fields) == 2  # s and d, each once
    run_both(f, ARITH)


def test_value_consumed_inside_and_outside_the_region():
    a = nbyoc.var("a", (5,))
    t = a * a
    f = nbyoc.function([a], [(t + a) - t, nbyoc.exp(t)])
    mod = passes(f, ARITH)
    (ext,) = externals(mod).values()
    assert isinstance(ext.body, Tuple) and len(ext.body.fields) == 2
    main_getitems = [
        n for n in nbyoc.ir.post_order([mod["main"].body]) if isinstance(n, TupleGetItem)
    ]
    assert {g.index for g in main_getitems} == {0, 1}
    run_both(f, ARITH)


def test_constants_used_only_inside_are_bound_else_passed():
    a = nbyoc.var("a", (2, 2))
    w = nbyoc.const(np.array([[1, 2], [3, 4]], np.float32))
    shared = nbyoc.const(np.float32(3))
    f = nbyoc.function([a], [(a * w) + shared, nbyoc.exp(shared)])
    mod = passes(f, ARITH)
    (ext,) = externals(mod).values()
    bound = [n for n in nbyoc.ir.post_order([ext.body]) if isinstance(n, Constant)]
    assert len(bound) == 1 and bound[0].data.shape == (2, 2)
    assert len(ext.params) == 2  # a, and the constant the host also uses
    as_params = passes(f, ARITH, bind_constants=False)
    (ext,) = externals(as_params).values()
    assert not [n for n in nbyoc.ir.post_order([ext.body]) if isinstance(n, Constant)]
    assert len(ext.params) == 3
    run_both(f, ARITH)
    run_both(f, ARITH, bind_constants=False)


def test_diamond_through_the_host_is_not_merged_into_a_cycle():
    a = nbyoc.var("a", (4,))
    first = a * a  # A
    middle = nbyoc.sqrt(first)  # on the host
    f = nbyoc.function([a], first + middle)  # B reads A directly and through the host
    mod = passes(f, ARITH)
    assert list(externals(mod)) == ["t_arith_0", "t_arith_1"]
    run_both(f, ARITH)


def test_no_cycle_through_two_regions():
    # x -> p (arith) -> q (transc) -> r (transc) -> s (arith), and p -> s directly.
    # Joining p and s would need q, r first, which need p: refused.
    x = nbyoc.var("x", (3,))
    p = x * x
    r = nbyoc.tanh(nbyoc.exp(p))
    f = nbyoc.function([x], p - r)
    regions = nbyoc.verify(merge_compiler_regions(annotate_target(f, [ARITH, TRANSC])))
    assert len(regions.members()) == 3
    run_both(f, [ARITH, TRANSC])


def test_two_independent_regions_sharing_an_input():
    a = nbyoc.var("a", (3,))
    left = nbyoc.exp(a + a)
    right = nbyoc.sum(nbyoc.relu(a))
    f = nbyoc.function([a], [left, right])
    mod = passes(f, [TRANSC, REDUCE])
    backends = sorted(fn.attrs["Compiler"] for fn in externals(mod).values())
    assert backends == ["t_reduce", "t_transc"]
    for ext in externals(mod).values():
        assert [p.type for p in ext.params] == [a.type]
    run_both(f, [TRANSC, REDUCE])


def test_siblings_reading_one_input_share_a_region():
    a, b = nbyoc.var("a", (5,)), nbyoc.var("b", (5,))
    f = nbyoc.function([a, b], [a + b, a - b])
    mod = passes(f, ARITH)
    assert list(externals(mod)) == ["t_arith_0"]
    assert [p.type for p in mod["t_arith_0"].params] == [a.type, b.type]  # (each read once)
    run_both(f, ARITH)
    # (a computed value read by two regions: they join too)
    shared = nbyoc.exp(a)  # (on the host)
    f = nbyoc.function([a], [shared * shared, shared + 1.0])
    assert len(externals(passes(f, ARITH))) == 1
    run_both(f, ARITH)


def test_siblings_with_a_path_between_them_through_the_host_stay_apart():
    a = nbyoc.var("a", (4,))
    first = a * a
    second = a + nbyoc.sqrt(first)  # (reads a, and first through the host)
    f = nbyoc.function([a], [first, second])
    assert len(externals(passes(f, ARITH))) == 2
    run_both(f, ARITH)


def test_regions_sharing_only_a_constant_are_not_siblings():
    a, b = nbyoc.var("a", (4,)), nbyoc.var("b", (4,))
    one = nbyoc.const(np.ones(4, np.float32))
    f = nbyoc.function([a, b], [nbyoc.exp(a) * one, nbyoc.exp(b) + one])
    assert len(externals(passes(f, ARITH))) == 2
    run_both(f, ARITH)


def test_max_size_bounds_sibling_merging():
    a = nbyoc.var("a", (4,))
    f = nbyoc.function([a], [a + a, a * a, a - a])
    assert len(externals(passes(f, ARITH, max_size=2))) == 2
    assert len(externals(passes(f, ARITH))) == 1


def test_siblings_past_the_cap_gather_in_runs_instead_of_staying_alone():
    # [a + 1, a * 2, ...] all read a: at a cap of 2 the first two join; each later one
    # once stayed alone (2, 1, 1, 1), now the next starts a run of its own (2, 2, 1).
    a = nbyoc.var("a", (4,))
    f = nbyoc.function([a], [a + 1.0, a * 2.0, a - 3.0, a + 4.0, a * 5.0])
    sizes = [len(calls_in(e)) for e in externals(passes(f, ARITH, max_size=2)).values()]
    assert sizes == [2, 2, 1]
    run_both(f, ARITH, max_size=2)


def test_views_do_not_count_towards_max_size():
    # A row of x sliced, reshaped, scaled and reshaped back, stacked: four calls a row,
    # one of them work. Counted, a cap of 8 cut 4 rows (17 calls) apart; uncounted, the
    # four products and the concatenate are 5: one region.
    x = nbyoc.var("x", (4, 3))
    rows = [
        nbyoc.reshape(nbyoc.reshape(nbyoc.slice(x, [i], [i + 1], [0]), (3,)) * float(i), (1, 3))
        for i in range(4)
    ]
    f = nbyoc.function([x], nbyoc.concatenate(rows, axis=0))
    assert len(externals(nbyoc.partition(f, "llvm", max_size=8))) == 1
    assert len(externals(nbyoc.partition(f, "llvm", max_size=4))) == 2
    assert counted_calls(calls_in(f)) == 5
    run_both(f, "llvm", max_size=4)


@pytest.mark.parametrize("backend", ["llvm", "csource", "examplejson"])
def test_each_backend_runs_sibling_ops_as_one_region(backend):
    """``[a + b, a - b]``: one external function on every backend; on llvm, one loop
    computing both (its stage function reads a and b once per element)."""
    a, b = nbyoc.var("a", (64, 64)), nbyoc.var("b", (64, 64))
    f = nbyoc.function([a, b], [a + b, a - b])
    fn = run_both(f, backend)
    assert len(externals(fn.module)) == 1
    if backend == "llvm":
        from nbyoc.codegen.llvm.lower import lower

        (region,) = externals(fn.module).values()
        (stage,) = lower(region).schedule.stages  # (one loop nest, both ops in it)
        assert sorted(n.op.name for n in stage.nodes) == ["add", "subtract"]


def test_min_size_keeps_small_regions_on_the_host():
    a = nbyoc.var("a", (3,))
    f = nbyoc.function([a], nbyoc.exp((a + a) * a) - a)
    mod = nbyoc.partition(f, ARITH, min_size=3)
    assert list(externals(mod)) == []
    mod = nbyoc.partition(f, ARITH, min_size=2)
    assert [c.op.name for c in calls_in(mod["t_arith_0"])] == ["add", "multiply"]
    run_both(f, ARITH, min_size=2)
    with pytest.raises(nbyoc.NbyocError, match="min_size"):
        nbyoc.partition(f, ARITH, min_size=0)


def test_max_size_caps_merged_regions_and_a_long_chain_splits_into_runs():
    a = nbyoc.var("a", (3,))
    y = a
    for k in range(10):
        y = y * a if k % 2 else y + a
    f = nbyoc.function([a], y)
    sizes = lambda mod: [len(calls_in(e)) for e in externals(mod).values()]  # noqa: E731
    assert sizes(nbyoc.partition(f, ARITH, max_size=4)) == [4, 4, 2]
    assert sizes(nbyoc.partition(f, ARITH, max_size=None)) == [10]
    assert sizes(nbyoc.partition(f, ARITH)) == [10]  # the default cap is far above this
    assert sizes(nbyoc.partition(f, ARITH, max_size=1)) == [1] * 10
    fn = run_both(f, ARITH, max_size=3)
    assert len(fn.runtime_modules) == 4
    for bad in (0, -2, True, 2.5, "3"):
        with pytest.raises(nbyoc.NbyocError, match="max_size must be a positive int"):
            nbyoc.partition(f, ARITH, max_size=bad)


def test_symbols_are_numbered_in_evaluation_order_and_sanitised():
    name = "t-odd.name"
    nbyoc.register_op_support(name, "negative")
    a = nbyoc.var("a", (2,))
    f = nbyoc.function([a], -nbyoc.exp(-a))
    mod = nbyoc.partition(f, name)
    assert list(externals(mod)) == ["t_odd_name_0", "t_odd_name_1"]
    assert mod["t_odd_name_0"].attrs["Compiler"] == name
    first_call = next(c for c in calls_in(mod["main"]) if isinstance(c.op, GlobalVar))
    assert first_call.op.name_hint == "t_odd_name_0" and first_call.args[0] is mod["main"].params[0]


def test_partitioned_module_prints_which_backend_runs_what():
    text = str(nbyoc.partition(reference(), ARITH))
    assert "// @t_arith_0 runs on t_arith: add, subtract, multiply" in text
    assert "@t_arith_0(%a, %b, %c, %d) /* Tensor[(10, 10), float32] */  // runs on t_arith" in text
    assert nbyoc.structural_equal(nbyoc.parse(text), nbyoc.partition(reference(), ARITH))
    annotated = str(annotate_target(reference(), ARITH))
    assert "%0 = add(%a, %b) /* Tensor[(10, 10), float32] */;  // t_arith, region 0" in annotated


def test_merging_is_idempotent_and_deterministic():
    once = merge_compiler_regions(annotate_target(reference(), ARITH))
    twice = merge_compiler_regions(once)
    assert dict(once.region) == dict(twice.region)
    assert str(nbyoc.partition(reference(), ARITH)) == str(nbyoc.partition(reference(), ARITH))


def test_get_source_and_executable_report_the_backend():
    fn = nbyoc.compile(reference(), ARITH)
    assert list(fn.sources) == ["t_arith_0"]
    assert "multiply" in fn.get_source("t_arith_0")
    assert fn.backend == ARITH


OPS_BY_BACKEND = {ARITH: ["add", "subtract", "multiply", "divide", "maximum", "negative"],
                  TRANSC: ["exp", "tanh", "add", "sigmoid"], REDUCE: ["sum", "max", "mean", "matmul", "relu"]}  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(f=graphs(min_nodes=3, max_nodes=14), backends=st.lists(st.sampled_from(sorted(OPS_BY_BACKEND)), min_size=1, max_size=3, unique=True),
       merge=st.booleans(), bind=st.booleans(), cap=st.one_of(st.none(), st.integers(1, 4)))  # fmt: skip
def test_random_graphs_partition_and_run_like_the_host(f, backends, merge, bind, cap):
    mod = passes(f, backends, merge=merge, bind_constants=bind, max_size=cap)
    for ext in externals(mod).values():
        allowed = OPS_BY_BACKEND[ext.attrs["Compiler"]]
        assert all(c.op.name in allowed for c in calls_in(ext))
        assert cap is None or len(calls_in(ext)) <= cap
    offloaded = sum(len(calls_in(e)) for e in externals(mod).values())
    host_ops = [c for c in calls_in(mod["main"]) if not isinstance(c.op, GlobalVar)]
    assert offloaded + len(host_ops) == len(calls_in(f))
    run_both(f, backends, merge=merge, bind_constants=bind, max_size=cap)
