"""``python -m nbyoc profile model.onnx``: a table or JSON of an ONNX model's profile on
random inputs; every error one line on stderr with exit status 2; piped into ``head``
it ends quietly."""

import json
import os
import subprocess
import sys

import pytest

from nbyoc.__main__ import main

onnx = pytest.importorskip("onnx")

from .frontend import models  # noqa: E402 - (needs onnx)


@pytest.fixture(scope="module")
def mlp_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "mlp.onnx"
    onnx.save(models.mlp(), str(path))
    return str(path)


def run(*argv, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "nbyoc", *argv], capture_output=True, text=True, **kwargs
    )


def test_the_table_names_each_region_with_its_backend(mlp_file, capsys):
    assert main(["profile", mlp_file, "--shapes", "x=4x16", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"{mlp_file} on llvm"
    assert lines[1] == "profile: median of 2 calls after a warm-up"
    assert any(line.startswith("@llvm_0") and "  llvm  " in line for line in lines)
    assert lines[-1].startswith("total") and "100.0%" in lines[-1]


def test_json_with_two_backends_in_priority_order(mlp_file, capsys):
    argv = ["profile", mlp_file, "--shapes", "x=2x16", "--repeat", "1", "--json",
            "--backend", "csource", "--backend", "llvm"]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["backends"] == ["csource", "llvm"] and data["repeat"] == 1
    backends = {row["backend"] for row in data["rows"]}
    assert {"csource", "llvm"} <= backends  # (csource has no matmul: llvm takes it)
    assert sum(row["share"] for row in data["rows"]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--shapes", "x=4x16", "--repeat", "0"], "repeat must be a positive int"),
        ([], "inputs with dynamic dims: x (N, 16); give their sizes, e.g. --shapes x=1x16"),
        (["--shapes", "x=4by16"], "--shapes takes NAME=DIMxDIMx..."),
        (["--shapes", "y=4x16"], "not graph inputs"),
        (["--shapes", "x=4x16", "--backend", "nope"], "unknown backend 'nope'"),
    ],
)
def test_an_error_is_one_line_with_exit_status_2(mlp_file, argv, message, capsys):
    assert main(["profile", mlp_file, *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("nbyoc: error: ")
    assert message in captured.err


def test_a_missing_file_and_a_file_that_is_no_model(tmp_path, capsys):
    assert main(["profile", str(tmp_path / "none.onnx")]) == 2
    assert "no such model file" in capsys.readouterr().err
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not a model")
    assert main(["profile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nbyoc: error: ")


def test_without_onnx_a_one_line_error_names_the_extra(mlp_file):
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "from nbyoc.__main__ import main\n"
        f"sys.exit(main(['profile', {mlp_file!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "pip install 'nbyoc[onnx]'" in done.stderr


@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_piped_into_head_it_ends_quietly(mlp_file, reader):
    """``true`` has gone before the profile is written: the write meets a closed pipe."""
    cmd = f"{sys.executable} -m nbyoc profile {mlp_file} --shapes x=4x16 --repeat 1 | {reader}"
    env = {**os.environ, "NBYOC_PROGRESS": "0"}  # (no compile message on stderr)
    done = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env)
    assert done.stdout == ("" if reader == "true" else f"{mlp_file} on llvm\n")
    assert done.stderr == ""
