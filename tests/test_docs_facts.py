"""Facts have one home (issue 42): what the README and the documentation state about the
code (tables read from the registries, numbers its constants decide, the package layout,
the performance summary) is what the code gives, so that a change to the code that
contradicts a page fails here, not in a reader's hands."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generated = load(DOCS / "generated.py", "docs_generated")


@pytest.mark.parametrize("page", generated.pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_generated_region_is_what_the_code_gives(page):
    stale = generated.stale(page.read_text())
    assert not stale, f"{page.name}: {', '.join(stale)} out of date: run python docs/generated.py"


def test_every_fact_is_stated_somewhere():
    """A generator no page uses is a fact that lost its home (or a region that was deleted)."""
    used = {m.group(1) for page in generated.pages() for m in generated.REGION.finditer(page.read_text())}  # fmt: skip
    assert used == set(generated.FACTS)


def test_the_op_table_lists_every_op():
    import nbyoc

    page = (DOCS / "reference" / "ops.md").read_text()
    listed = re.findall(r"^\| \w+ \| `(\w+)` \|", page, flags=re.MULTILINE)
    assert sorted(listed) == sorted(nbyoc.ir.list_ops())


def test_the_numpy_page_lists_every_array_function():
    from nbyoc.frontend.numpy.functions import ARRAY_FUNCTIONS

    page = (DOCS / "reference" / "numpy.md").read_text()
    for func in ARRAY_FUNCTIONS:
        assert f".{func.__name__}`" in page, func


def layout_paths(block: str) -> list[str]:
    """The paths the architecture page's layout names, relative to the repository: each
    entry's names (the words before its description, two spaces on), and the ``.py``
    files and ``name/`` directories a directory entry's description lists (its
    continuation lines included), in that directory."""
    paths, stack, owner = [], [], None  # stack: (indent, directory); owner: (indent, dir)
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if owner is not None and indent > owner[0] + 2:  # (the description goes on)
            description = line.strip()
        else:
            names, _, description = re.split(r"(\s{2,})", line.strip() + "  ", maxsplit=1)
            while stack and stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1] if stack else ""
            entries = [parent + name for name in names.split()]
            paths += entries
            folder = next((e for e in entries if e.endswith("/")), None)
            owner = (indent, folder) if folder else (indent, None)
            if folder:
                stack.append((indent, folder))
        if owner[1]:
            listed = re.findall(r"(?<![\w./-])([a-z0-9_]+(?:\.py|/))(?!\w)", description)
            paths += [owner[1] + name for name in listed]
    return paths


def test_the_architecture_layout_names_files_that_exist():
    page = (DOCS / "architecture.md").read_text()
    block = page.split("<!-- layout:")[1].split("```")[1]
    paths = layout_paths(block.strip("\n"))
    assert len(paths) > 100
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"the architecture page names what does not exist: {missing}"


def test_a_layout_path_is_read_relative_to_its_directory():
    block = "nbyoc/\n  ir/\n    op.py          Op\n    ops/           a.py b.py\n  cli.py\n"
    assert layout_paths(block) == ["nbyoc/", "nbyoc/ir/", "nbyoc/ir/op.py", "nbyoc/ir/ops/",
                                   "nbyoc/ir/ops/a.py", "nbyoc/ir/ops/b.py", "nbyoc/cli.py"]  # fmt: skip


def test_every_page_is_in_the_site():
    """mkdocs.yml's nav holds every page (the strict build warns otherwise; this says
    it without building)."""
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:")[1]
    listed = set(re.findall(r":\s*(\S+\.md)\s*$", nav, flags=re.MULTILINE))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.glob("**/*.md")}
    assert listed == pages


def test_the_readme_costs_are_the_documentation_s():
    """Each measured number the README's "What it costs" section states appears in the
    documentation, where the measurement is."""
    readme = (ROOT / "README.md").read_text()
    costs = readme.split("## What it costs")[1].split("<!-- bench-summary")[0]
    docs = " ".join(" ".join(p.read_text().split()) for p in DOCS.glob("**/*.md"))
    numbers = re.findall(r"\b\d+(?:\.\d+)?(?: to \d+(?:\.\d+)?)? (?:s|ms|us|MiB)\b", costs)
    assert numbers
    missing = [n for n in numbers if not re.search(rf"\b{re.escape(n.split(' to ')[-1])}\b", docs)]
    assert not missing, missing


def test_the_griffe_extension_fences_doctest_examples():
    pytest.importorskip("griffe")
    fence = load(DOCS / "griffe_doctests.py", "docs_griffe_doctests").fence
    text = fence("Sum:\n\n" + ">" * 3 + " 1 + 1\n2\n\nDone.")
    assert text.splitlines()[2:6] == ["```pycon", ">>> 1 + 1", "2", "```"]
