"""The package's layering, read from the source (every import, also those inside functions):
codegen imports the runtime, never the reverse (a backend's module class, which lowers,
lives in ``codegen/<backend>/module.py``; ``runtime/`` is what runs and loads), and no
backend reaches into another's internals."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import nbyoc

ROOT = Path(nbyoc.__file__).parent
BACKENDS = ("llvm", "csource", "examplejson")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every nbyoc module ``path`` imports, as absolute dotted names (``from X import y``
    counts as X and X.y, since y may be a submodule)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}
    return {m for m in found if m == "nbyoc" or m.startswith("nbyoc.")}


MODULES = {_module_name(p): _imports(p) for p in ROOT.rglob("*.py")}


def _existing(names: set[str]) -> set[str]:
    return {n for n in names if n in MODULES}


def test_the_import_reader_sees_known_edges():
    # The test can fail: it must see the edges we know are there.
    assert "nbyoc.codegen.llvm.lower" in MODULES["nbyoc.codegen.llvm.module"]
    assert "nbyoc.runtime.module" in MODULES["nbyoc.codegen.llvm"]
    assert "nbyoc.runtime.llvm.target" in MODULES["nbyoc.runtime.llvm.tiles"]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("nbyoc.runtime")))
def test_the_runtime_imports_no_codegen(module):
    """What runs kernels and loads archives (the llvm kernel library in ``runtime/llvm/``
    included) never imports a codegen: so there is no cycle between the two packages, and
    generated code imports only the runtime."""
    codegen = {m for m in MODULES[module] if m.startswith("nbyoc.codegen")}
    assert not codegen, codegen


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_backend_imports_another_backends_internals(backend):
    """Another backend is used through its package's public names only."""
    own = f"nbyoc.codegen.{backend}"
    for module, imports in MODULES.items():
        if module == own or module.startswith(own + "."):
            continue
        internals = _existing({m for m in imports if m.startswith(own + ".")})
        if module.startswith("nbyoc.codegen."):
            assert not internals, f"{module} imports {sorted(internals)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("nbyoc.transform")))
def test_passes_never_import_a_codegen(module):
    """The passes know backends only through ``transform.support``, where backends
    register: not even the codegen registry."""
    codegen = _existing({m for m in MODULES[module] if m.startswith("nbyoc.codegen")})
    assert not codegen, codegen
