"""Composite patterns: each feature of the pattern language, the pattern tables and their
errors, which matches ``merge_composite`` takes (priority, overlaps, cycles, checks),
composites inside their backend's regions, numbers equal to the host's, and the text
form, JSON and archives carrying them."""

import math

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import nbyoc
from nbyoc.errors import DuplicateRegistrationError, PatternError, UnknownOpError
from nbyoc.ir import Call, Constant, GlobalVar, post_order
from nbyoc.runtime import Module, destination_passing
from nbyoc.transform import annotate_target, merge_compiler_regions, merge_composite
from nbyoc.transform.composite import find_composites
from nbyoc.transform.pattern_table import composite_backend, pattern_table
from nbyoc.transform.patterns import is_constant, is_op, is_var, wildcard
from nbyoc.transform.regions import is_op_call

from ..helpers import reload, run_fresh
from .backends import register

RNG = np.random.default_rng(39)


def _calls(expr):
    """The op (or module function) of each call, in evaluation order."""
    return [n.op.name_hint if isinstance(n.op, GlobalVar) else n.op.name
            for n in post_order([expr]) if isinstance(n, Call)]  # fmt: skip


def _composites(func):
    return [n for n in post_order([func.body]) if is_op_call(n) and n.op.name == "composite"]


def _table(name, rows, ops=()):
    """A backend ``name`` running ``ops`` and the composites of ``rows`` with NumPy."""
    register(name, ops)
    nbyoc.register_patterns(name, [(f"{name}.{kernel}", *rest) for kernel, *rest in rows],
                            replace=True)  # fmt: skip
    return name


def _vec(name="a", shape=(4,)):
    return nbyoc.var(name, shape)


ADD_RELU = is_op("relu")(is_op("add")(wildcard(), wildcard()))


# -- the language -------------------------------------------------------------------------


def test_wildcard_var_and_constant_leaves():
    a, k = _vec(), nbyoc.const(np.ones(4, np.float32))
    found = is_op("add")(wildcard(), wildcard()).match(a + k)
    assert len(found.inputs) == 2 and found.inputs[0] is a and found.inputs[1] is k
    assert is_op("add")(is_var(), is_constant()).match(a + k) is not None
    assert is_op("add")(is_constant(), is_var()).match(a + k) is None
    assert is_op("add")(is_var("a"), wildcard()).match(a + k) is not None
    assert is_op("add")(is_var("b"), wildcard()).match(a + k) is None
    assert is_op("multiply")(wildcard(), is_constant(0.5)).match(a * 0.5) is not None
    assert is_op("multiply")(wildcard(), is_constant(2.0)).match(a * 0.5) is None
    assert is_op("exp").match(nbyoc.exp(a)).inputs[0] is a  # no operands given: any


def test_one_pattern_object_is_one_value():
    a, b = _vec("a"), _vec("b")
    x = wildcard()
    square = is_op("multiply")(x, x)
    assert square.match(a * a) is not None and square.match(a * b) is None


def test_optional_op_present_and_absent():
    a, b = _vec("a"), _vec("b")
    pattern = is_op("add")(wildcard(), wildcard()).optional("relu")
    assert [c.op.name for c in pattern.match(nbyoc.relu(a + b)).calls] == ["add", "relu"]
    assert [c.op.name for c in pattern.match(a + b).calls] == ["add"]
    assert pattern.match(nbyoc.exp(a + b)) is None
    scaled = is_op("exp")(wildcard()).optional(lambda p: is_op("multiply")(p, is_constant()))
    assert scaled.match(nbyoc.exp(a) * 2.0).get("multiply") is not None
    assert scaled.match(nbyoc.exp(a)).get("multiply") is None


def test_alternatives_in_order_and_called_together():
    a, b = _vec("a"), _vec("b")
    either = (is_op("add") | is_op("subtract"))(wildcard(), wildcard())
    assert either.match(a - b) is not None and either.match(a * b) is None
    bias = is_op("add")(is_op("exp")(wildcard()), wildcard())
    flipped = is_op("add")(wildcard(), is_op("exp")(wildcard()))
    assert (bias | flipped).match(b + nbyoc.exp(a)).calls[0].op.name == "exp"


def test_attribute_and_dtype_constraints():
    x, w = nbyoc.var("x", (1, 2, 5, 5)), nbyoc.var("w", (4, 2, 3, 3))
    conv = is_op("conv")(wildcard(), wildcard())
    assert conv.has_attr(group=1, strides=(1, 1)).match(nbyoc.conv(x, w)) is not None
    assert conv.has_attr({"strides": (2, 2)}).match(nbyoc.conv(x, w)) is None
    assert conv.has_attr(strides=(2, 2)).match(nbyoc.conv(x, w, strides=(2, 2))) is not None
    i = nbyoc.var("i", (4,), "int32")
    assert is_op("add")(wildcard(), wildcard()).has_dtype("float32").match(i + i) is None
    assert is_op("add")(wildcard().has_dtype(np.int32), wildcard()).match(i + i) is not None


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: is_op("relu")(1.0), "wrap a value in wildcard()"),
        (lambda: is_op("add")(wildcard()), "add takes 2 operand(s)"),
        (lambda: is_op("add")(wildcard(), wildcard())(wildcard()), "already has its operands"),
        (lambda: wildcard()(wildcard()), "is not an op"),
        (lambda: is_op("conv").has_attr(stride=1), "no attribute 'stride'"),
        (lambda: is_op("conv").has_attr(group="one"), "group"),
        (lambda: wildcard().has_attr(group=1), "attributes belong to an op"),
        (lambda: is_op("relu").optional(3), "takes an op name or a function"),
        (lambda: is_op("relu").optional(lambda p: 3), "must be a pattern"),
        (lambda: wildcard().match(_vec()), "has an op at its root"),
    ],
)
def test_malformed_patterns_say_how_to_write_them(make, message):
    with pytest.raises(PatternError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_an_unknown_op_suggests_a_close_name():
    with pytest.raises(UnknownOpError, match="did you mean 'relu'"):
        is_op("rellu")


# -- the tables ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, message",
    [
        ("add_relu", "a list of"),
        ([("pt_bad.x",)], "a row is"),
        ([("add_relu", ADD_RELU)], "as 'pt_bad.add_relu'"),
        ([("pt_bad.add relu", ADD_RELU)], "Composite"),
        ([("pt_bad.x", "relu")], "must be built with"),
        ([("pt_bad.x", wildcard())], "has an op at its root"),
        ([("pt_bad.x", ADD_RELU, "yes")], "must be callable"),
        ([("pt_bad.x", ADD_RELU), ("pt_bad.x", ADD_RELU)], "twice"),
    ],
)
def test_malformed_tables_are_refused_and_change_nothing(table, message):
    with pytest.raises(PatternError, match=message):
        nbyoc.register_patterns("pt_bad", table, replace=True)
    assert pattern_table("pt_bad") == []


def test_a_second_table_needs_replace():
    nbyoc.register_patterns("pt_twice", [("pt_twice.a", ADD_RELU)], replace=True)
    with pytest.raises(DuplicateRegistrationError, match="replace=True"):
        nbyoc.register_patterns("pt_twice", [("pt_twice.b", ADD_RELU)])
    nbyoc.register_patterns("pt_twice", [("pt_twice.b", ADD_RELU)], replace=True)
    assert [r.name for r in pattern_table("pt_twice")] == ["pt_twice.b"]
    assert composite_backend("pt_twice.a") is None and composite_backend("pt_twice.b") == "pt_twice"


# -- which matches are taken ---------------------------------------------------------------


def test_a_table_earlier_row_wins_an_overlap():
    a, b = _vec("a"), _vec("b")
    f = nbyoc.function([a, b], nbyoc.relu(a + b))
    add = is_op("add")(wildcard(), wildcard())
    first = _table("pt_prio1", [("add_relu", ADD_RELU), ("add", add)])
    assert [c.attrs["Composite"] for c in _composites(merge_composite(f, first))] == [
        "pt_prio1.add_relu"
    ]
    second = _table("pt_prio2", [("add", add), ("add_relu", ADD_RELU)])
    merged = merge_composite(f, second)
    assert [c.attrs["Composite"] for c in _composites(merged)] == ["pt_prio2.add"]
    assert _calls(merged.body) == ["composite", "relu"]
    refused = find_composites(f, second).refused
    assert [(r.name, reason) for r, _, reason in refused] == [
        ("pt_prio2.add_relu", "its add call is already in pt_prio2.add")
    ]


def test_an_earlier_backend_keeps_the_calls_it_takes():
    a, b = _vec("a"), _vec("b")
    f = nbyoc.function([a, b], nbyoc.relu(a + b))
    late = _table("pt_late", [("add_relu", ADD_RELU)])
    early = register("pt_early", ["add"])
    assert _composites(merge_composite(f, [early, late])) == []
    (_, _, reason), = find_composites(f, [early, late]).refused  # fmt: skip
    assert reason == "pt_early, listed before pt_late, takes its add call"
    assert len(_composites(merge_composite(f, [late, early]))) == 1


def test_a_match_whose_rewrite_would_make_a_cycle_is_refused():
    """``m = a * b; m + exp(m)``: the composite add(multiply(a, b), exp(m)) would read
    exp(m), which needs m from inside it."""
    a, b = _vec("a"), _vec("b")
    m = a * b
    f = nbyoc.function([a, b], m + nbyoc.exp(m))
    name = _table("pt_cycle", [("mul_add", is_op("add")(is_op("multiply")(wildcard(), wildcard()),
                                                       wildcard()))])  # fmt: skip
    assert merge_composite(f, name) is f
    (_, root, reason), = find_composites(f, name).refused  # fmt: skip
    assert root is f.body and "also used outside it" in reason
    # (used by the output, too)
    g = nbyoc.function([a, b], [m, m + b])
    assert merge_composite(g, name) is g


def test_a_check_may_refuse_and_say_why():
    a, b = _vec("a"), _vec("b", (1,))
    f = nbyoc.function([a, b], [nbyoc.relu(a + a), nbyoc.relu(a + b)])
    same_shape = lambda m: m["add"].args[0].type == m["add"].args[1].type or "broadcasts"  # noqa: E731
    name = _table("pt_check", [("add_relu", ADD_RELU, same_shape)])
    (taken,) = _composites(merge_composite(f, name))
    assert len(taken.args) == 1 and taken.args[0] is a  # (a value read twice: one input)
    assert [reason for _, _, reason in find_composites(f, name).refused] == ["broadcasts"]
    nbyoc.register_patterns(name, [(f"{name}.add_relu", ADD_RELU, lambda m: 1 / 0)], replace=True)
    with pytest.raises(nbyoc.NbyocError, match=f"the check of pattern {name}.add_relu failed"):
        merge_composite(f, name)


def test_composites_are_made_only_for_the_backends_compiled_for():
    a, b = _vec("a"), _vec("b")
    f = nbyoc.function([a, b], nbyoc.relu(a + b))
    _table("pt_absent", [("add_relu", ADD_RELU)])
    for backend in ["llvm", ["llvm", "csource"]]:
        module = nbyoc.compile(f, backend).module
        assert all(_composites(func) == [] for func in module.functions.values())
    other = register("pt_other", ["relu", "add"])
    body = _composites(merge_composite(f, "pt_absent"))[0].attrs["body"]
    hand_made = nbyoc.composite(a, b, Composite="pt_absent.add_relu", body=body)
    regions = annotate_target(nbyoc.function([a, b], hand_made), other)
    assert list(regions.target.values()) == ["host"]  # (another backend's composite)


# -- in the regions, and the numbers ----------------------------------------------------------


def test_a_composite_ends_up_inside_its_backends_region():
    a, b = _vec("a"), _vec("b")
    f = nbyoc.function([a, b], nbyoc.exp(nbyoc.relu(a + b)) * b)
    name = _table("pt_region", [("add_relu", ADD_RELU)], ops=["exp", "multiply"])
    module = nbyoc.verify(nbyoc.partition(f, name))
    assert _calls(module["main"].body) == [f"{name}_0"] and len(module.functions) == 2
    external = module[f"{name}_0"]
    assert [c.attrs.get("Composite", c.op.name) for c in post_order([external.body])
            if isinstance(c, Call)] == [f"{name}.add_relu", "exp", "multiply"]  # fmt: skip
    regions = merge_compiler_regions(annotate_target(merge_composite(f, name), name)).verify()
    assert len(regions.members()) == 1
    fn = reload(nbyoc.compile(f, name))
    x, y = RNG.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(fn(x, y), nbyoc.compile(f, "host")(x, y))


def test_a_composite_left_to_the_host_runs_its_body():
    """min_size sends a region of one composite back to the host, which runs its body as
    it is (compiling the body would match the pattern again)."""
    a, b = _vec("a"), _vec("b")
    f = nbyoc.function([a, b], nbyoc.relu(a + b))
    name = _table("pt_small", [("add_relu", ADD_RELU)])
    fn = nbyoc.compile(f, [name, "llvm"], min_size=2)
    assert [c.attrs["Composite"] for c in _composites(fn.module["main"])] == [f"{name}.add_relu"]
    x, y = RNG.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(fn(x, y), np.maximum(x + y, 0))


def _conv_bias_relu(call, x, w, b):
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))
    y = np.einsum("nchwij,mcij->nmhw", windows, w, optimize=True) + b[:, None, None]
    relu = "relu" in _calls(call.attrs["body"].body)
    return np.maximum(y, 0) if relu else y


_ERF = np.frompyfunc(math.erf, 1, 1)


def _dense_bias_gelu(call, x, w, b):
    y = np.matmul(x, w) + b
    return (y * 0.5 * (1.0 + _ERF(y / math.sqrt(2)).astype(y.dtype))).astype(y.dtype)


KERNELS = {"conv_bias_relu": _conv_bias_relu, "dense_bias_gelu": _dense_bias_gelu}


class KernelModule(Module):
    """Runs each composite of an external function with its NumPy/BLAS kernel."""

    type_key = "pt_kernels"

    def __init__(self, func):
        self.func = func
        self.plan = [(node, KERNELS[node.attrs["Composite"].split(".", 1)[1]])
                     for node in post_order([func.body]) if isinstance(node, Call)]  # fmt: skip

    def run(self, *inputs):
        values = dict(zip(self.func.params, inputs))
        for call, kernel in self.plan:
            args = [a.data if isinstance(a, Constant) else values[a] for a in call.args]
            values[call] = kernel(call, *args)
        return values[self.func.body]

    def get_function(self, symbol):
        return destination_passing(self.func, lambda ins, outs: np.copyto(outs[0], self.run(*ins)))

    def save_to_bytes(self):
        return nbyoc.to_json(self.func).encode()

    @classmethod
    def load_from_bytes(cls, data):
        return cls(nbyoc.from_json(data))


nbyoc.register_loader("pt_kernels", replace=True)(KernelModule)
nbyoc.register_codegen("pt_kernels", replace=True)(KernelModule)
_DENSE = is_op("matmul")(wildcard(), is_constant())
nbyoc.register_patterns("pt_kernels", [
    ("pt_kernels.conv_bias_relu", is_op("conv")(wildcard(), is_constant(), is_constant())
     .has_attr(strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1).optional("relu")),
    ("pt_kernels.dense_bias_gelu", is_op("gelu")(is_op("add")(_DENSE, is_constant()))),
], replace=True)  # fmt: skip


def _model():
    x = nbyoc.var("x", (2, 3, 8, 8))
    w1, b1 = RNG.standard_normal((4, 3, 3, 3)), RNG.standard_normal(4)
    w2, b2 = RNG.standard_normal((4, 4, 3, 3)), RNG.standard_normal(4)
    w3, b3 = RNG.standard_normal((16, 10)), RNG.standard_normal(10)
    c = [nbyoc.const(v.astype(np.float32)) for v in (w1, b1, w2, b2, w3, b3)]
    y = nbyoc.relu(nbyoc.conv(x, c[0], c[1]))
    y = nbyoc.conv(y, c[2], c[3])  # (no relu: the optional op absent)
    y = nbyoc.max_pool(y, kernel_shape=(2, 2), strides=(2, 2))
    y = nbyoc.gelu(nbyoc.reshape(y, (2, 16)) @ c[4] + c[5])
    return nbyoc.function([x], y)


def test_numpy_kernels_for_composites_match_the_host(tmp_path):
    f = _model()
    fn = nbyoc.compile(f, ["pt_kernels", "llvm"])
    assert sorted(c.attrs["Composite"] for name in fn.runtime_modules if name.startswith("pt_")
                  for c in _composites(fn.module[name])) == [
        "pt_kernels.conv_bias_relu", "pt_kernels.conv_bias_relu", "pt_kernels.dense_bias_gelu"]  # fmt: skip
    assert "gelu" in str(fn.module)  # (taken whole: legalize did not decompose it)
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = nbyoc.compile(f, "host")(x)
    np.testing.assert_allclose(fn(x), want, rtol=1e-5, atol=1e-5)
    fn.save(tmp_path / "model.nbyoc")
    loaded = nbyoc.load(tmp_path / "model.nbyoc")
    assert nbyoc.structural_equal(loaded.module, fn.module)
    np.testing.assert_array_equal(loaded(x), fn(x))


# -- the text form, JSON and archives --------------------------------------------------------------


def test_the_text_form_and_json_carry_composites():
    module = nbyoc.verify(nbyoc.partition(_model(), ["pt_kernels", "llvm"]))
    assert nbyoc.structural_equal(nbyoc.parse(str(module)), module)
    assert nbyoc.structural_equal(nbyoc.from_json(nbyoc.to_json(module)), module)
    merged = merge_composite(_model(), "pt_kernels")
    assert nbyoc.structural_equal(nbyoc.parse(str(merged)), merged)
    assert "// @pt_kernels_0 runs on pt_kernels: pt_kernels.conv_bias_relu" in str(module)


def test_an_archive_with_a_composite_on_the_host_loads_in_a_fresh_process(tmp_path):
    """The host runs a composite from its body alone: loading needs no pattern table."""
    a, b = _vec("a"), _vec("b")
    f = nbyoc.function([a, b], nbyoc.relu(a + b) * 2.0)
    name = _table("pt_archive", [("add_relu", ADD_RELU)])
    fn = nbyoc.compile(f, name, min_size=2)
    assert not fn.runtime_modules and _composites(fn.module["main"])
    fn.save(tmp_path / "f.nbyoc")
    code = (
        "import json, numpy as np, nbyoc\n"
        "fn = nbyoc.load('f.nbyoc')\n"
        "print(json.dumps(fn(np.arange(4, dtype=np.float32) - 2, np.ones(4, np.float32))"
        ".tolist()))"
    )
    assert run_fresh(code, tmp_path) == [0.0, 0.0, 2.0, 4.0]


def test_composites_with_symbolic_sizes_run_at_each_binding():
    a, b = nbyoc.var("a", ("n", 4)), nbyoc.var("b", ("n", 4))
    f = nbyoc.function([a, b], nbyoc.exp(nbyoc.relu(a + b)))
    name = _table("pt_sym", [("add_relu", ADD_RELU)])
    with pytest.warns(nbyoc.errors.PerShapeWarning):
        fn = nbyoc.compile(f, [name, "llvm"])
    for n in (1, 3):
        x, y = RNG.standard_normal((2, n, 4)).astype(np.float32)
        np.testing.assert_allclose(fn(x, y), np.exp(np.maximum(x + y, 0)), rtol=1e-6)


def test_explain_partitions_with_the_composites_as_compile_does():
    f = _model()
    report = nbyoc.explain(f, backend=["pt_kernels", "llvm"])
    by_op = {row.op: row.target for row in report.ops}
    assert by_op["pt_kernels.dense_bias_gelu"] == "pt_kernels" and "gelu" not in by_op
    symbols = {row.symbol for row in report.regions}
    assert symbols == set(nbyoc.partition(f, ["pt_kernels", "llvm"]).functions) - {"main"}
