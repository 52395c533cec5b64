"""The README's promises: its examples run, and CI runs its test command verbatim."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nbyoc

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def fenced(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


@pytest.mark.parametrize("number", range(len(fenced("python"))))
def test_each_python_block_runs_as_written_in_a_fresh_process(number, tmp_path):
    """Copied alone into a new interpreter, each block runs: it imports what it uses and
    sets up what it needs. The cache is a private one, so nothing touches the user's."""
    block = fenced("python")[number]
    cache = tmp_path / "cache"
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,  # the examples write files (archives, libraries)
        env={**os.environ, "NBYOC_CACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"README block {number} failed:\n{block}\n{done.stderr}"


def test_no_readme_block_clears_the_cache():
    assert not any("cache.clear(" in block for block in fenced("python"))


def test_the_readme_stays_short():
    """The README introduces; the documentation (docs/) explains (issue 42)."""
    assert len(README.splitlines()) <= 250


def test_every_relative_link_of_the_readme_leads_to_a_file():
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README)
    assert links and all((ROOT / link).exists() for link in links), [
        link for link in links if not (ROOT / link).exists()
    ]


def test_the_readme_names_the_command_that_serves_the_documentation():
    assert "pip install -e '.[docs]' && mkdocs serve" in README


def test_the_jit_example_comes_first_and_prints_what_its_comments_say(capsys):
    block = fenced("python")[0]
    assert "@nbyoc.jit" in block
    exec(block, {})
    printed = capsys.readouterr().out
    assert "['(x: float32[512, 1000])']" in printed and "(512, 1000) float32" in printed


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
