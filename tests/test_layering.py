"""The package's layering, read from the source (every import, also those inside functions):
codegen imports the runtime, never the reverse (a backend's module class, which lowers,
lives in ``codegen/<backend>/module.py``; ``runtime/`` is what runs and loads), no
backend reaches into another's internals, and the IR knows nothing of the NumPy layer
(``frontend/numpy/`` attaches it to graph values; the IR runs without it)."""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path

import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError
from nbyoc.frontend.numpy.methods import REPLACED
from nbyoc.ir.nodes import Expr

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


IR_MODULES = sorted(m for m in MODULES if m == "nbyoc.ir" or m.startswith("nbyoc.ir."))


@pytest.mark.parametrize("module", IR_MODULES)
def test_the_ir_imports_no_frontend(module):
    """The IR is what frontends build: it imports none of them (the NumPy layer attaches
    itself to ``Expr`` from ``frontend/numpy/``, so there is no import knot between them)."""
    frontend = {m for m in MODULES[module] if m.startswith("nbyoc.frontend")}
    assert not frontend, frontend


def test_the_numpy_layer_is_not_in_the_ir():
    """No IR module speaks NumPy's protocols; the layer's modules live in the frontend."""
    protocols = {"__array_ufunc__", "__array_function__", "__array__"}
    for module in IR_MODULES:
        path = ROOT.parent / (module.replace(".", "/") + ".py")
        path = path if path.exists() else path.with_suffix("") / "__init__.py"
        defined = {
            node.name
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        }
        assert not defined & protocols, (module, defined & protocols)
    layer = {"numpy_protocol", "numpy_functions", "numpy_support", "masked"}
    assert not {p.stem for p in (ROOT / "ir").rglob("*.py")} & layer
    assert {"methods", "ufuncs", "functions", "indexing", "masks", "support"} <= {
        p.stem for p in (ROOT / "frontend" / "numpy").glob("*.py")
    }


@pytest.mark.parametrize("path", sorted((ROOT / "ir").rglob("*.py")), ids=lambda p: p.name)
def test_an_import_inside_a_function_of_the_ir_says_why(path):
    """An IR module imports at its top; where a cycle (or the layering) makes it import
    inside a function, the line says why, so the knot of late imports cannot grow back."""
    lines = path.read_text().splitlines()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    line = lines[inner.lineno - 1]
                    assert "#" in line, f"{path.name}:{inner.lineno}: {line.strip()}"


@contextlib.contextmanager
def _without_the_numpy_layer():
    """``Expr`` as the IR defines it: the NumPy layer taken off, put back after."""
    attached = {name: vars(Expr)[name] for name in REPLACED[Expr]}
    try:
        for name, own in REPLACED[Expr].items():
            if own is None:
                delattr(Expr, name)
            else:
                setattr(Expr, name, own)
        yield
    finally:
        for name, value in attached.items():
            setattr(Expr, name, value)


def test_the_layer_can_be_taken_off():
    # The test below can fail: without the layer, graph values answer no NumPy.
    x = nbyoc.var("x", (2, 3))
    with _without_the_numpy_layer():
        with pytest.raises(AttributeError):
            _ = x.T
        with pytest.raises(NbyocTypeError, match="NumPy's indexing"):
            _ = x[0]
        with pytest.raises(NbyocTypeError, match="not compared with =="):
            _ = x == x
        assert (x + 1.0).op.name == "add" and (x < x).op.name == "less"
    assert x.T.shape == (3, 2) and x[0].shape == (3,)


def test_the_ir_runs_without_the_numpy_layer():
    """Every op's decomposition, legalize, partition, the text form and the host run with
    graph values that answer none of NumPy: the IR and the passes need nothing of the
    layer (graphs come from the test kit, built before it is taken off)."""
    from nbyoc.ir.op import get_op, list_ops
    from nbyoc.runtime.host import HostFunction
    from nbyoc.testing.cases import op_case
    from nbyoc.testing.choices import RandomChoices
    from nbyoc.testing.compare import difference
    from nbyoc.testing.inputs import random_inputs
    from nbyoc.transform.legalize import legalize

    cases = []
    for name in (n for n in list_ops() if get_op(n).decompose is not None):
        for dtype in ("float32", "int32"):
            try:
                cases.append(op_case(name, dtype, RandomChoices(seed=1), context=False))
            except NbyocTypeError:  # (the op takes no operands of this dtype)
                continue
    assert len({case.op for case in cases}) >= 15
    results = []
    with _without_the_numpy_layer():
        for case in cases:
            get_op(case.op).decompose(*case.call.args, **case.call.attrs)
            legal = legalize(case.func, ["llvm"])
            nbyoc.partition(legal, "llvm")
            assert nbyoc.structural_equal(nbyoc.parse(str(legal)), legal)
            inputs = random_inputs(case.func, case.seed)
            got, expected = HostFunction(legal)(*inputs), HostFunction(case.func)(*inputs)
            results.append((case, inputs, got, expected))
    for case, inputs, got, expected in results:  # (decomposed against the op's reference)
        assert difference(case.func, inputs, got, expected) is None, case.op
