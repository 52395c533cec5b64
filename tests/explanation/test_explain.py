"""``nbyoc.explain``: every op's backend and every refusal's reason, the regions with the
bytes crossing them and why neighbours stayed apart, as a table, JSON and SVG; and
``python -m nbyoc explain`` on an ONNX model."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import nbyoc
from nbyoc.errors import NbyocError
from nbyoc.transform.support import HOST

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def backend(request):
    """A backend taking add and multiply of float32, and relu with a reason when not."""
    name = "ex_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[-50:]
    nbyoc.register_op_support(name, "add")
    nbyoc.register_op_support(name, "multiply", lambda c: c.type.dtype == "float32")
    nbyoc.register_op_support(name, "relu", lambda c: c.type.ndim == 1 or "only vectors")
    return name


def diamond():
    """``(t * t) + exp(t)`` with ``t = a + b``: the second add cannot join the first
    region, since ``exp`` (on the host) lies on a path between them."""
    a, b = nbyoc.var("a", (8, 8)), nbyoc.var("b", (8, 8))
    t = a + b
    return nbyoc.function([a, b], (t * t) + nbyoc.exp(t))


def row(report, name):
    return next(r for r in report.ops if r.name == name)


def test_each_op_says_where_it_runs_and_why_not_elsewhere(backend):
    x = nbyoc.var("x", (4, 4))
    i = nbyoc.var("i", (4,), "int32")
    f = nbyoc.function([x, i], [nbyoc.relu(x) * 2.0, i * i, nbyoc.relu(nbyoc.exp(x))])
    report = nbyoc.explain(f, backend)
    by_op = {}
    for r in report.ops:
        by_op.setdefault(r.op, []).append(r)
    assert by_op["exp"][0].target == HOST
    assert by_op["exp"][0].asked == ((backend, "no rule for op exp"),)
    assert {r.asked for r in by_op["relu"]} == {((backend, "only vectors"),)}
    int_product = next(r for r in by_op["multiply"] if "int32" in r.type)
    assert int_product.asked == ((backend, "its predicate refused"),)
    taken = next(r for r in by_op["multiply"] if "float32" in r.type)
    assert taken.target == backend and taken.asked == () and taken.symbol.startswith(backend)


def test_priority_order_shows_each_backend_asked_before_the_taker(backend):
    x = nbyoc.var("x", (4, 4))
    report = nbyoc.explain(nbyoc.function([x], nbyoc.exp(x) + x), [backend, "llvm"])
    exp = next(r for r in report.ops if r.op == "exp")
    assert exp.target == "llvm" and exp.asked == ((backend, "no rule for op exp"),)


def test_a_dtype_refusal_of_a_shipped_backend_names_the_dtype():
    b = nbyoc.var("b", (4,), "bfloat16")
    report = nbyoc.explain(nbyoc.function([b], b + b), ["csource", "llvm"])
    (add,) = report.ops
    assert add.target == "llvm"
    assert add.asked == (("csource", "dtype bfloat16 not supported (C has no type for it)"),)


def test_regions_match_what_partition_makes_with_the_bytes_crossing_them(backend):
    f = diamond()
    report = nbyoc.explain(f, backend)
    module = nbyoc.partition(f, backend)
    assert [r.symbol for r in report.regions] == [n for n in module.functions if n != "main"]
    first, second = report.regions
    assert first.ops == {"add": 1, "multiply": 1} and first.size == 2
    assert (first.inputs, first.bytes_in) == (2, 2 * 8 * 8 * 4)
    # t * t and t leave the first region (t is read by the host's exp).
    assert (first.outputs, first.bytes_out) == (2, 2 * 8 * 8 * 4)
    assert (second.inputs, second.outputs) == (2, 1)


def test_regions_kept_apart_say_which_node_makes_the_cycle(backend):
    report = nbyoc.explain(diamond(), backend)
    exp = next(r for r in report.ops if r.op == "exp")
    first, second = report.regions
    assert second.apart == ((first.symbol, f"merging would make a cycle through {exp.name}"),)
    assert f"{second.symbol} not merged with {first.symbol}" in str(report)


def test_a_region_below_min_size_is_noted_on_each_of_its_ops(backend):
    report = nbyoc.explain(diamond(), backend, min_size=2)
    last = report.ops[-1]
    assert last.target == HOST and last.symbol is None
    assert last.note == f"{backend} took it, but its region had fewer than min_size=2 calls"
    assert len(report.regions) == 1
    assert last in report.refused(backend)


def test_max_size_and_merge_false_are_named_as_the_reason(backend):
    a = nbyoc.var("a", (8,))
    chain = a
    for _ in range(5):
        chain = chain + 1.0
    f = nbyoc.function([a], chain)
    capped = nbyoc.explain(f, backend, max_size=3)
    assert [r.size for r in capped.regions] == [3, 2]
    assert capped.regions[1].apart == (
        (capped.regions[0].symbol, "together they would exceed max_size (5 calls > 3)"),
    )
    unmerged = nbyoc.explain(f, backend, merge=False)
    assert all(r.apart[0][1] == "merge=False" for r in unmerged.regions[1:])


def test_an_executable_or_a_partitioned_module_explains_as_its_function(backend):
    f = diamond()
    direct = nbyoc.explain(f, backend)
    from_module = nbyoc.explain(nbyoc.partition(f, backend), backend)
    assert from_module.regions == direct.regions
    assert [(r.op, r.target, r.asked) for r in from_module.ops] == [
        (r.op, r.target, r.asked) for r in direct.ops
    ]
    on_host = nbyoc.explain(nbyoc.compile(f, backend="host"))
    assert on_host.backends == () and {r.target for r in on_host.ops} == {HOST}
    compiled = nbyoc.compile(f, backend=["csource"])
    assert nbyoc.explain(compiled).regions == nbyoc.explain(f, "csource").regions


def test_the_table_names_every_op_and_every_region(backend):
    report = nbyoc.explain(diamond(), backend)
    text = str(report)
    assert text.splitlines()[0] == f"4 op calls ({backend} 3, host 1) in 2 regions"
    for r in report.ops:
        assert r.name in text
    for r in report.regions:
        assert r.symbol in text


def test_json_holds_the_same_rows(backend):
    report = nbyoc.explain(diamond(), backend)
    data = json.loads(report.to_json())
    assert len(data["ops"]) == len(report.ops) and data["backends"] == [backend]
    assert data["regions"][1]["apart"][0][1].startswith("merging would make a cycle")


def test_the_builtin_drawing_shows_every_node_coloured_by_backend(backend):
    from nbyoc.explanation.svg import colours

    report = nbyoc.explain(diamond(), backend)
    root = ET.fromstring(report.to_svg(engine="builtin"))
    groups = root.findall(f"{SVG}g")
    assert [g.find(f"{SVG}title").text for g in groups] == [
        *report.inputs,
        *(r.name for r in report.ops),
    ]
    fill = colours(report)
    for group, r in zip(groups[len(report.inputs) :], report.ops):
        assert group.find(f"{SVG}rect").get("fill") == fill[r.target]
    assert len(root.findall(f"{SVG}line")) == len(report.edges)
    # exp reads the first add; the last add reads the product and exp.
    names = {r.op: r.name for r in report.ops if r.op in ("exp", "multiply")}
    assert (names["multiply"], report.ops[-1].name) in report.edges
    assert (names["exp"], report.ops[-1].name) in report.edges


def test_dot_text_and_graphviz_when_asked_for(backend):
    import shutil

    report = nbyoc.explain(diamond(), backend)
    dot = report.to_dot()
    assert dot.startswith("digraph nbyoc {") and dot.count("->") == len(report.edges)
    if shutil.which("dot") is None:
        with pytest.raises(NbyocError, match="Graphviz's dot"):
            report.to_svg(engine="graphviz")
        assert report.to_svg().startswith("<svg")  # auto: the built-in layout
    else:
        assert "<svg" in report.to_svg(engine="graphviz")


def test_explain_refuses_what_it_cannot_read():
    with pytest.raises(NbyocError, match=r"nbyoc\.from_onnx"):
        nbyoc.explain("model.onnx")


def run_cli(*args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "nbyoc", "explain", *args],
        capture_output=True, text=True, timeout=300, **kw,
    )  # fmt: skip


@pytest.fixture
def onnx_model(tmp_path):
    pytest.importorskip("onnx")
    from tests.frontend.models import cnn

    path = tmp_path / "cnn.onnx"
    path.write_bytes(cnn().SerializeToString())
    return path


def test_the_command_line_prints_the_table_json_and_svg(onnx_model, tmp_path):
    svg = tmp_path / "cnn.svg"
    done = run_cli(str(onnx_model), "--shapes", "x=2x3x16x16", "--svg", str(svg))
    assert done.returncode == 0, done.stderr
    assert "op calls (llvm" in done.stdout and "region" in done.stdout
    ET.fromstring(svg.read_text())
    as_json = run_cli(str(onnx_model), "--shapes", "x=2x3x16x16", "--json", "--backend", "csource")
    data = json.loads(as_json.stdout)
    assert data["backends"] == ["csource"]
    assert any(r["asked"] == [["csource", "no rule for op conv"]] for r in data["ops"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["nosuch.onnx"], "no such model file: nosuch.onnx"),
        (["{model}", "--shapes", "x=two"], "--shapes takes NAME=DIMxDIMx"),
        (["{model}", "--backend", "nosuch"], "unknown backend 'nosuch'"),
    ],
)
def test_command_line_errors_are_one_line_with_status_2(onnx_model, args, message):
    done = run_cli(*(a.format(model=onnx_model) for a in args))
    assert done.returncode == 2
    assert done.stderr.startswith("nbyoc: error: ") and message in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_output_piped_into_head_ends_quietly(onnx_model):
    done = subprocess.run(
        f"{sys.executable} -m nbyoc explain {onnx_model} --shapes x=2x3x16x16 | head -2",
        shell=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "" and len(done.stdout.splitlines()) == 2
