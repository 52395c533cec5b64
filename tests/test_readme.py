"""The README's promises: its examples run, and CI runs its test command verbatim."""

import re
from pathlib import Path

import numpy as np
import pytest

import nbyoc

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def fenced(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples write files (archives, libraries)
    blocks = fenced("python")
    assert blocks, "the README should show Python examples"
    namespace: dict = {}
    exec("import numpy as np", namespace)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)


def test_first_example_prints_what_the_readme_shows():
    namespace: dict = {}
    exec(fenced("python")[0].replace("print(f)", "shown = str(f)"), namespace)
    assert namespace["shown"] in README


def setup_commands() -> list[str]:
    return [block.strip() for block in fenced("sh")]


def test_readme_gives_the_two_setup_commands():
    commands = setup_commands()
    assert any("nbyoc demo" in c for c in commands)
    assert any("pytest" in c for c in commands)


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = next(c for c in setup_commands() if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert any(line.startswith(test_command) for line in ci)


def test_error_example_matches_the_real_message():
    x = nbyoc.var("x", (2, 3), "float32")
    fn = nbyoc.compile(nbyoc.function([x], x * 2.0))
    with pytest.raises(nbyoc.errors.DTypeMismatchError) as info:
        fn(np.zeros((2, 3)))
    shown = " ".join(README.split("nbyoc.errors.DTypeMismatchError: ")[1].split("```")[0].split())
    assert shown == str(info.value)
