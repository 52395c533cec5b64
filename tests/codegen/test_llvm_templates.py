"""One lowering of a size-generic llvm region for every binding (``codegen.llvm.templates``).

What is checked: the guards of a template are complete (a binding they hold for gets,
from the template, exactly the program a lowering at that binding makes); a binding a
template serves lowers and compiles nothing; results match the host at every binding,
including those that need templates of their own; the program reader reads symbolic
slices with Python's rules; a decision under ``deciding`` is recorded and checked."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.llvm import generic, templates
from nbyoc.codegen.llvm.lower import lower
from nbyoc.codegen.llvm.program import _picked
from nbyoc.ir.specialize import specialize
from nbyoc.ir.symbols import deciding, size
from nbyoc.runtime.compiles import compile_counts

from ..tolerance import assert_within, error_bounds


def _conv_net():
    x = nbyoc.var("x", ("n", 3, "h", "w"))
    rng = np.random.default_rng(0)
    w1 = nbyoc.const(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3)
    w2 = nbyoc.const(rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2)
    y = nbyoc.relu(nbyoc.conv(x, w1, pads=(1, 1, 1, 1)))
    y = nbyoc.max_pool(y, (2, 2), strides=(2, 2))
    y = nbyoc.relu(nbyoc.conv(y, w2, pads=(1, 1, 1, 1))) + 0.5
    return nbyoc.function([x], nbyoc.mean(y, axis=(2, 3)))


def _depthwise_net():
    """Depthwise convs (``codegen.llvm.depthwise``): their blocks of channels and rows
    are sizes the lowering chooses from the binding's."""
    x = nbyoc.var("x", ("n", 8, "h", "w"))
    rng = np.random.default_rng(2)
    w1 = nbyoc.const(rng.standard_normal((8, 1, 3, 3)).astype(np.float32) * 0.3)
    w2 = nbyoc.const(rng.standard_normal((16, 1, 5, 5)).astype(np.float32) * 0.2)
    y = nbyoc.relu(nbyoc.conv(x, w1, pads=(1, 1, 1, 1), group=8))
    y = nbyoc.conv(y, w2, strides=(2, 2), pads=(2, 1, 2, 2), group=8) + 0.5
    return nbyoc.function([x], nbyoc.mean(y, axis=(2, 3)))


def _mlp():
    x = nbyoc.var("x", ("n", 64))
    rng = np.random.default_rng(1)
    w = nbyoc.const(rng.standard_normal((64, 48)).astype(np.float32) * 0.1)
    b = nbyoc.const(rng.standard_normal(48).astype(np.float32))
    h = nbyoc.tanh(x @ w + b)
    return nbyoc.function([x], nbyoc.concatenate([h, nbyoc.exp(-h)], axis=1).sum(axis=0))


def _rows():
    x = nbyoc.var("x", ("n", "m"))
    y = nbyoc.var("y", (1, "m"))
    z = nbyoc.softmax(x * y + 1.0, axis=1)
    return nbyoc.function([x, y], nbyoc.transpose(z, (1, 0))[:, 1:])


# (a pool writes its extents into its code, by choice: a new height or width is a new
# template, a new batch size is not)
GRAPHS = {"conv_net": (_conv_net, lambda n: [(n, 3, 12 if n < 6 else 20, 16)]),
          "depthwise_net": (_depthwise_net, lambda n: [(n, 8, 9 if n < 6 else 23, 13 + n)]),
          "mlp": (_mlp, lambda n: [(n * 37, 64)]),
          "rows": (_rows, lambda n: [(2 + n, 16 * n + 3), (1, 16 * n + 3)])}  # fmt: skip
BINDINGS = (1, 2, 3, 4, 6, 9, 5)


def _arguments(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _templates_of(fn) -> list:
    symbolic = [f for f in fn.module.functions.values() if f.attrs.get("Compiler") == "llvm"]
    return [t for f in symbolic for t in templates._TEMPLATES.get(f, [])]


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_binding_matches_the_host_and_templates_are_shared(name):
    make, shapes = GRAPHS[name]
    f = make()
    fn = nbyoc.compile(f)
    for n in BINDINGS:
        args = _arguments(shapes(n), n)
        binding = fn.bind_sizes([a.shape for a in args])
        concrete = specialize(f, binding)
        got, expected = fn(*args), nbyoc.compile(concrete, "host")(*args)
        outputs = zip(*(v if isinstance(v, tuple) else (v,) for v in (got, expected)))
        for (g, e), bound in zip(outputs, error_bounds(concrete, args)):
            assert_within(g, e, bound, f"{name} at {binding}")
    made = _templates_of(fn)
    # (each template serves every binding its guards hold for: fewer than the bindings)
    assert 1 <= len(made) < len(BINDINGS)
    for template in made:  # (and none was refused)
        assert template.lowered.program is not None


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_template_gives_a_binding_it_serves_the_program_lowered_for_that_binding(name):
    """Guards complete: for every binding a template holds for, its program evaluated
    there is, slot for slot, the one a template lowered at that binding gives."""
    make, shapes = GRAPHS[name]
    fn = nbyoc.compile(make())
    for n in BINDINGS:
        fn(*_arguments(shapes(n), n))
    regions = [f for f in fn.module.functions.values() if f.attrs.get("Compiler") == "llvm"]
    lowering = lambda f: lower(f, True, 1 << 15, True, 1 << 30)  # noqa: E731
    checked = 0
    for region in regions:
        for template in templates._TEMPLATES.get(region, []):
            for n in BINDINGS:
                binding = fn.bind_sizes(shapes(n))
                binding = {k: v for k, v in binding.items() if k in _symbols(region)}
                if not template.holds(binding):
                    continue
                fresh = templates._make(region, binding, "options", lowering)
                assert _same(
                    templates.at(template.lowered, template.renamed(binding)),
                    templates.at(fresh.lowered, fresh.renamed(binding)),
                )
                checked += 1
    assert checked >= len(BINDINGS) - 1  # (the first binding is lowered for its shapes)


def _symbols(region) -> set:
    return set().union(*(p.type.symbols for p in region.params))


def _same(a, b) -> bool:
    return (
        a.inputs == b.inputs
        and a.outputs == b.outputs
        and a.scratch == b.scratch
        and all(np.array_equal(x, y) for x, y in zip(a.program, b.program))
        and [s.module for s in a.addressed] == [s.module for s in b.addressed]
    )


def test_a_binding_a_template_serves_lowers_and_compiles_nothing():
    # (rows enough that every stage runs in parallel: smaller sizes are other templates,
    # their stages serial)
    fn = nbyoc.compile(_mlp())
    for n in (20, 21):  # (the template, and its stage functions compiled)
        fn(np.ones((n * 37, 64), np.float32))
    before = compile_counts()
    for n in (23, 40, 64, 97):
        fn(np.ones((n * 37, 64), np.float32))
    after = compile_counts()
    for kind in ("llvm lowerings", "llvm modules"):
        assert after.get(kind, 0) == before.get(kind, 0), kind


def test_a_region_without_its_symbolic_function_is_lowered_for_its_shapes():
    x = nbyoc.var("x", (4, 8))
    region = nbyoc.function([x], nbyoc.exp(x))
    assert generic.source_of(region) is None
    assert templates.lowered_for(region, "options", lambda f: None) is None


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40),
    st.one_of(st.none(), st.integers(-50, 50)),
    st.one_of(st.none(), st.integers(-50, 50)),
    st.one_of(st.none(), st.integers(1, 5)),
)
def test_symbolic_slices_follow_pythons_rules(n, start, stop, step):
    """``_picked`` of a symbolic size, answered at a binding, agrees with range(n)[s]."""
    expected = range(n)[slice(start, stop, step)]
    with deciding({"n": n}):
        first, count, by = _picked(size("n"), slice(start, stop, step))
    evaluate = lambda v: v if isinstance(v, int) else v.evaluate({"n": n})  # noqa: E731
    assert evaluate(count) == len(expected)
    assert by == expected.step
    if len(expected):
        assert evaluate(first) == expected.start


def test_deciding_records_each_answer_and_pins_a_size_used_as_a_number():
    n = size("n")
    with deciding({"n": 40}) as guards:
        assert n >= 32 and n != 8 and (n == 39) is False
        assert list(range(n))[-1] == 39  # (range needs its value: pinned to 40)
    assert not guards.hold({"n": 41})
    with deciding({"n": 40}) as guards:
        assert max(n, 32) == n and n * 2 > n + 16
    assert guards.hold({"n": 33}) and not guards.hold({"n": 31})  # (max picked n: n > 32)
    with pytest.raises(nbyoc.errors.UndecidableSizeError):  # (outside, it still refuses)
        bool(n > 32)
