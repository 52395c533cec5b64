"""The documentation's promises: every Python block in ``docs/`` runs as written, and a
block followed by "prints" prints exactly what the page shows. (What the pages state
about the code is checked in test_docs_facts.py.)"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def python_blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in sorted(DOCS.glob("**/*.md")):
        blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL)
        found += [(page.relative_to(DOCS).as_posix(), i, b) for i, b in enumerate(blocks)]
    return found


@pytest.mark.parametrize(
    "page, number, block", python_blocks(), ids=[f"{p}-{n}" for p, n, _ in python_blocks()]
)
def test_each_python_block_runs_as_written_in_a_fresh_process(page, number, block, tmp_path):
    """Each block runs alone in a new interpreter, in an empty directory, with a private
    cache: it imports what it uses and sets up what it needs."""
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        env={**os.environ, "NBYOC_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{page} block {number} failed:\n{block}\n{done.stderr}"


def shown_outputs() -> list[tuple[str, str, str]]:
    """(page, block, output) for each Python block followed by "prints" and the text it
    prints, in a plain fenced block."""
    pattern = r"```python\n((?:(?!```).)*)```\n\n(?:it )?prints\n\n```\n(.*?)```"
    found = []
    for page in sorted(DOCS.glob("**/*.md")):
        for block, output in re.findall(pattern, page.read_text(), flags=re.DOTALL):
            found.append((page.relative_to(DOCS).as_posix(), block, output))
    return found


@pytest.mark.parametrize("page, block, output", shown_outputs())
def test_a_block_prints_what_the_page_shows(page, block, output, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "NBYOC_CACHE_DIR": str(tmp_path / "cache")}, timeout=600,
    )  # fmt: skip
    assert done.stdout == output, (
        f"{page}: the page shows\n{output}\nbut the block prints\n{done.stdout}"
    )


def test_the_docs_have_blocks_to_run():
    assert any(page == "tutorials/writing-a-backend.md" for page, _, _ in python_blocks())
    assert shown_outputs()
