"""``python -m nbyoc inspect MODEL.onnx``: what a model declares (dynamic dims by name),
its opsets, IR version and producer, its ops counted by type with what nbyoc's importer
converts and every op type it refuses at once, with ``--backend`` the op calls each
backend would take; ``--json`` the same facts; it never runs the model."""

import json
import subprocess
import sys

import pytest

import nbyoc
from nbyoc.__main__ import main

onnx = pytest.importorskip("onnx")

from . import cli_models  # noqa: E402 - (needs onnx)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("m")
    return {
        name: cli_models.save(getattr(cli_models, name)(), folder / f"{name}.onnx")
        for name in ("scaled_table_lookup", "matmul_relu", "with_refused_ops")
    }


def inspect_json(capsys, *argv):
    assert main(["inspect", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_table_shows_declared_inputs_outputs_and_ops(files, capsys):
    path = files["scaled_table_lookup"]
    assert main(["inspect", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{path}: IR version 8, opsets ai.onnx 17, made by cli-tests 1.0"
    assert lines[2:5] == ["input  shape   dtype", "x      (N, 4)  float32", "rows   (3,)    int64"]
    assert lines[6:9] == [
        "output  shape   dtype",
        "out:0   (3, 4)  float32",
        "best    (N,)    int64",
    ]
    assert lines[10:13] == ["5 nodes of 5 op types", "op type  domain   nodes  imported",
                            "Add      ai.onnx      1  yes"]  # fmt: skip
    assert lines[-1] == "op types nbyoc does not import: none"


def test_json_gives_the_same_facts(files, capsys):
    data = inspect_json(capsys, files["scaled_table_lookup"])
    assert data["ir_version"] == 8 and data["producer"] == "cli-tests 1.0"
    assert data["opsets"] == {"ai.onnx": 17}
    assert data["inputs"] == [{"name": "x", "shape": ["N", 4], "dtype": "float32"},
                              {"name": "rows", "shape": [3], "dtype": "int64"}]  # fmt: skip
    assert data["outputs"][1] == {"name": "best", "shape": ["N"], "dtype": "int64"}
    assert {(r["op_type"], r["count"], r["converted"]) for r in data["ops"]} == {
        ("Add", 1, True), ("ArgMax", 1, True), ("Gather", 1, True), ("Mul", 1, True),
        ("Slice", 1, True),
    }  # fmt: skip
    assert data["refused"] == [] and "op_calls" not in data


def test_every_refused_op_type_is_listed_at_once_subgraphs_and_domains_too(files, capsys):
    path = files["with_refused_ops"]
    data = inspect_json(capsys, path, "--backend", "llvm")
    assert data["opsets"] == {"ai.onnx": 17, "com.example": 1}
    assert data["refused"] == ["NoSuchOnnxOp (ai.onnx)", "Custom (com.example)"]
    rows = {(r["domain"], r["op_type"]): (r["count"], r["converted"]) for r in data["ops"]}
    assert rows[("ai.onnx", "NoSuchOnnxOp")] == (2, False)  # (both branches of the If)
    assert rows[("ai.onnx", "If")] == (1, True) and rows[("com.example", "Custom")] == (1, False)
    # the partition needs the import, which the refused ops stop: it says so, and why
    assert "does not import" in data["op_calls"]["error"]
    assert main(["inspect", path]) == 0
    out = capsys.readouterr().out
    assert "Custom        com.example      1  REFUSED" in out
    assert out.splitlines()[-1] == (
        "op types nbyoc does not import: NoSuchOnnxOp (ai.onnx), Custom (com.example)"
    )


def test_op_calls_per_backend_in_priority_order(files, capsys):
    path = files["matmul_relu"]
    data = inspect_json(capsys, path, "--backend", "csource", "--backend", "llvm")
    assert data["op_calls"] == {
        "backends": ["csource", "llvm"],
        "counts": {"csource": 2, "llvm": 1},
    }
    data = inspect_json(capsys, path, "--backend", "csource")
    assert data["op_calls"]["counts"] == {"csource": 2, "host": 1}  # (csource has no matmul)
    assert main(["inspect", path, "--backend", "csource"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[-1]
        == "op calls per backend (csource): csource 2, host 1"
    )
    # dynamic dims stay symbolic, or --shapes fixes them
    lookup = files["scaled_table_lookup"]
    for shapes in ([], ["--shapes", "x=3x4"]):
        assert inspect_json(capsys, lookup, "--backend", "llvm", *shapes)["op_calls"]["counts"] == {
            "llvm": 5
        }


def test_it_never_runs_the_model(files, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("inspect ran the model")

    monkeypatch.setattr(nbyoc, "compile", refuse)
    monkeypatch.setattr(nbyoc.Executable, "__call__", refuse)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    data = inspect_json(capsys, files["matmul_relu"], "--backend", "llvm")
    assert data["op_calls"]["counts"] == {"llvm": 3}


def test_an_opset_nbyoc_does_not_import_is_named(tmp_path, capsys):
    model = cli_models.matmul_relu()
    model.opset_import[0].version = 99
    data = inspect_json(capsys, cli_models.save(model, tmp_path / "new.onnx"))
    assert data["opset_refused"] == "nbyoc imports ai.onnx opsets 7 to 28"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--backend", "nope"], "unknown backend 'nope'"),
        (["--backend", "llvm", "--shapes", "x=2by3"], "--shapes takes NAME=DIMxDIMx..."),
        (["--shapes", "y=2x3"], "--shapes y: the model has no input 'y' (its inputs: x)"),
        (["--shapes", "x=2x4"], "--shapes x=2x4 does not fit input 'x' of shape (2, 3)"),
    ],
)
def test_an_error_is_one_line_with_exit_status_2(files, argv, message, capsys):
    assert main(["inspect", files["matmul_relu"], *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and message in captured.err


def test_piped_into_head_it_ends_quietly(files):
    done = subprocess.run(
        f"{sys.executable} -m nbyoc inspect {files['scaled_table_lookup']} --json | head -1",
        shell=True, capture_output=True, text=True,
    )  # fmt: skip
    assert done.stdout == "{\n" and done.stderr == ""
