"""``python -m nbyoc run MODEL.onnx``: random (seeded, per dtype) or .npy inputs, each
output's name, shape and dtype, times, ``--check`` against ONNX Runtime (exit status 1
when it fails), ``--save-outputs``; every error one line on stderr with exit status 2;
piped into ``head`` it ends quietly."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from nbyoc.__main__ import main

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from . import cli_models, real_models  # noqa: E402 - (needs onnx)


@pytest.fixture(scope="module")
def lookup_file(tmp_path_factory):
    return cli_models.save(cli_models.scaled_table_lookup(), tmp_path_factory.mktemp("m") / "lookup.onnx")  # fmt: skip


def run_json(capsys, *argv):
    code = main(["run", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_table_names_inputs_outputs_and_times(lookup_file, capsys):
    argv = ["run", lookup_file, "--shapes", "x=5x4", "--backend", "examplejson", "--repeat", "3"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{lookup_file} on examplejson: imported in ")
    assert "compiled in" in lines[0] and lines[0].endswith("(median of 3)")
    assert lines[2:5] == ["input  shape   dtype    values",
                          "x      (5, 4)  float32  random (seed 0)",
                          "rows   (3,)    int64    random (seed 0)"]  # fmt: skip
    assert lines[6:9] == [
        "output  shape   dtype",
        "out:0   (3, 4)  float32",
        "best    (5,)    int64",
    ]


def test_random_inputs_follow_each_dtype_and_the_seed(lookup_file, tmp_path, capsys):
    saved = []
    for seed in (0, 0, 1):
        folder = tmp_path / f"seed{seed}-{len(saved)}"
        code, data = run_json(capsys, lookup_file, "--shapes", "x=5x4", "--backend", "host",
                              "--seed", str(seed), "--save-outputs", str(folder))  # fmt: skip
        assert code == 0
        assert [(i["name"], i["dtype"]) for i in data["inputs"]] == [
            ("x", "float32"),
            ("rows", "int64"),
        ]
        saved.append(np.load(folder / "out_0.npy"))
    assert np.array_equal(saved[0], saved[1]) and not np.array_equal(saved[0], saved[2])


def test_check_passes_and_reports_each_output(lookup_file, capsys):
    code, data = run_json(capsys, lookup_file, "--shapes", "x=6x4", "--check", "--repeat", "1")
    assert code == 0 and data["backends"] == ["llvm"]
    check = data["check"]
    assert (
        check["ok"] and check["against"].startswith("ONNX Runtime ") and check["tolerance"] == 1e-3
    )
    rows = {row["name"]: row for row in check["outputs"]}
    assert rows["best"]["tolerance"] == 0.0 and rows["best"]["max_abs_diff"] == 0.0  # (exact)
    assert 0 < rows["out:0"]["tolerance"] <= 1e-3 * 100  # (a thousandth of |values| < 100)
    assert all(row["ok"] and row["beyond"] == 0 for row in check["outputs"])
    assert data["call_seconds"] > 0 and data["compile_seconds"] > 0 and data["repeat"] == 1


def test_a_failed_check_exits_with_status_1_and_names_the_output(lookup_file, capsys, monkeypatch):
    from nbyoc.cli import against_onnxruntime

    computed = against_onnxruntime.onnxruntime_outputs

    def off_by_a_hundredth(path, feeds):  # (Runtime's first output, 1% of its range off)
        first, *rest = computed(path, feeds)
        return [first + np.float32(0.01 * np.abs(first).max()), *rest]

    monkeypatch.setattr(against_onnxruntime, "onnxruntime_outputs", off_by_a_hundredth)
    argv = ["run", lookup_file, "--shapes", "x=4x4", "--backend", "host", "--check"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "check: FAILED"
    assert any(
        line.startswith("out:0") and line.endswith("12      FAIL") for line in out.splitlines()
    )
    assert any(line.startswith("best") and line.endswith("ok") for line in out.splitlines())
    # a tolerance of 2% lets it pass
    assert main([*argv, "--tolerance", "0.02"]) == 0


def test_inputs_from_npy_files_fix_dynamic_dims(lookup_file, tmp_path, capsys):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    rows = np.array([0, 11, -1], np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "rows.npy", rows)
    out = tmp_path / "out"
    code, data = run_json(capsys, lookup_file, "--input", f"x={tmp_path / 'x.npy'}", "--input",
                          f"rows={tmp_path / 'rows.npy'}", "--backend", "host", "--check",
                          "--save-outputs", str(out))  # fmt: skip
    assert code == 0 and data["check"]["ok"]
    assert data["inputs"][0]["shape"] == [3, 4] and data["inputs"][0]["values"].endswith("x.npy")
    table = np.arange(48, dtype=np.float32).reshape(12, 4)
    assert np.array_equal(np.load(out / "out_0.npy"), table[rows] * 2 + x)
    assert np.array_equal(np.load(out / "best.npy"), [3, 3, 3])
    assert data["outputs"][1]["saved"] == str(out / "best.npy")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--shapes", "x=4by4"], "--shapes takes NAME=DIMxDIMx..."),
        (["--backend", "nope"], "unknown backend 'nope'"),
        (["--shapes", "x=2x4x1"], "--shapes x=2x4x1 does not fit input 'x' of shape (N, 4)"),
        ([], "inputs with dynamic dims: x (N, 4); give their sizes, e.g. --shapes x=1x4"),
        (["--repeat", "0"], "repeat must be a positive int"),
        (["--tolerance", "-1"], "--tolerance takes a fraction >= 0"),
        (["--input", "x"], "--input takes NAME=FILE.npy"),
        (["--input", "y={dir}/x.npy"], "the model has no input 'y' (its inputs: x, rows)"),
        (["--input", "x={dir}/float64.npy"], "holds float64; input 'x' takes float32"),
        (["--input", "x={dir}/wide.npy"], "holds shape (2, 5); input 'x' has shape (N, 4)"),
        (["--input", "x={dir}/missing.npy"], "cannot read"),
        (["--input", "x={model}"], "is not a .npy file"),
        (["--input", "x={dir}/x.npy", "--shapes", "x=3x4"], "--shapes x is (3, 4), but"),
    ],
)
def test_an_error_is_one_line_with_exit_status_2(lookup_file, tmp_path, argv, message, capsys):
    np.save(tmp_path / "float64.npy", np.zeros((2, 4)))
    np.save(tmp_path / "wide.npy", np.zeros((2, 5), np.float32))
    np.save(tmp_path / "x.npy", np.zeros((2, 4), np.float32))
    argv = [a.format(dir=tmp_path, model=lookup_file) for a in argv]
    assert main(["run", lookup_file, *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("nbyoc: error: ")
    assert message in captured.err


@pytest.mark.parametrize("command", ["run", "inspect"])
def test_a_missing_corrupted_or_foreign_file_is_one_line(command, lookup_file, tmp_path, capsys):
    truncated = tmp_path / "truncated.onnx"
    with open(lookup_file, "rb") as f:
        truncated.write_bytes(f.read()[:200])
    (tmp_path / "text.onnx").write_text("hello")
    (tmp_path / "model.txt").write_text("hello")
    for path, message in [
        (tmp_path / "none.onnx", "no such model file"),
        (truncated, "not an ONNX model"),
        (tmp_path / "text.onnx", "not an ONNX model"),
        (tmp_path / "model.txt", "the command line reads ONNX models (.onnx files)"),
    ]:
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("nbyoc: error: ") and message in err, err


@pytest.mark.parametrize(
    "hidden, argv, install",
    [
        ("onnx", ["run", "{model}"], "pip install 'nbyoc[onnx]'"),
        ("onnx", ["inspect", "{model}"], "pip install 'nbyoc[onnx]'"),
        ("onnxruntime", ["run", "{model}", "--check"], "pip install onnxruntime"),
    ],
)
def test_without_onnx_or_onnxruntime_one_line_says_what_to_install(
    lookup_file, hidden, argv, install
):
    argv = [a.format(model=lookup_file) for a in argv]
    code = (
        f"import sys; sys.modules[{hidden!r}] = None\n"
        "from nbyoc.__main__ import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and install in done.stderr


@pytest.mark.parametrize("reader", ["head -1", "true"])
def test_piped_into_head_it_ends_quietly(lookup_file, reader):
    """``true`` has gone before the result is written: the write meets a closed pipe."""
    cmd = f"{sys.executable} -m nbyoc run {lookup_file} --shapes x=4x4 --backend host --repeat 1 | {reader}"
    env = {**os.environ, "NBYOC_PROGRESS": "0"}
    done = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env)
    assert done.stdout == ("" if reader == "true" else done.stdout.splitlines()[0] + "\n")
    assert done.stdout.startswith("" if reader == "true" else f"{lookup_file} on host: imported")
    assert done.stderr == ""


def test_a_real_model_checks_against_onnx_runtime_if_cached(capsys):
    """One model of the real-model set (tests/real_models.py), only when it is cached."""
    model = real_models.MODELS["oww-alexa"]
    if not model.path.exists():
        pytest.skip(f"{model.name} is not cached in {real_models.cache_dir()}")
    shapes = [f"{name}={'x'.join(map(str, i.shape))}" for name, i in model.inputs.items()]
    code, data = run_json(capsys, str(model.path), "--shapes", *shapes, "--check", "--repeat", "2")
    assert code == 0, data
    assert data["check"]["ok"] and data["outputs"][0]["shape"] == [1, 1]
