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


def test_first_example_prints_what_the_readme_shows():
    namespace: dict = {}
    block = next(b for b in fenced("python") if "print(f)" in b)  # the graph built by hand
    exec(block.replace("print(f)", "shown = str(f)"), namespace)
    assert namespace["shown"] in README


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


def test_the_op_table_is_the_registries():
    from nbyoc.catalog import op_table

    table = re.search(r"<!-- ops table: python -m nbyoc ops -->\n(.*?)\n<!-- end ops table -->",
                      README, flags=re.DOTALL)  # fmt: skip
    assert table is not None, "the README lost its op table"
    assert table.group(1) == op_table(), "run python -m nbyoc ops and paste its table"
    listed = re.findall(r"^\| \w+ \| `(\w+)` \|", table.group(1), flags=re.MULTILINE)
    assert sorted(listed) == sorted(nbyoc.ir.list_ops())
