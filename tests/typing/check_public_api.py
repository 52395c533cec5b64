"""The public API's annotations, checked with mypy --strict.

The public API is every function and class in ``nbyoc.__all__`` (the op builders
included) and every object the API reference documents (``docs/reference/api.md``'s
``::: target`` lines and their ``members``); of a class, its public methods,
``__init__``, ``__call__`` and its properties. Two checks, one mypy run
(``[tool.mypy]`` in pyproject.toml):

- the signatures: each public function's parameters and return are annotated, with
  annotations mypy --strict accepts (``disallow_untyped_defs``,
  ``disallow_incomplete_defs``, ``disallow_any_generics``: no bare ``dict``). mypy
  checks the modules that define them; of its errors in those modules, those on the
  lines of a public signature count. (The bodies and the private helpers of those
  modules are not held to --strict yet: that is a larger change, module by module.)
- the usage: ``public_api.py`` calls the API the way the documentation does, and
  ``assert_type``\\ s what it returns; it is checked with --strict whole, so an Any that
  leaks out of a public function where the docs promise a type fails it.

``python tests/typing/check_public_api.py`` prints each problem (``file:line: message``)
and exits 1 if there is one; ``tests/test_typing.py`` runs it when mypy is installed.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
USAGE = Path(__file__).with_name("public_api.py")
API_PAGE = ROOT / "docs" / "reference" / "api.md"
#: A documented target, and the members its ``options`` list (None: all of them).
_TARGET = re.compile(r"^::: (\S+)(?:\n {4}options:\n {6}members: \[([^\]]*)\])?", re.M)
#: Dunder methods held to the check like public ones.
_PUBLIC_DUNDERS = ("__init__", "__call__")


def public_objects() -> dict[str, Any]:
    """Dotted name -> function or class, for every public one (see the module docstring)."""
    import nbyoc

    if not Path(nbyoc.__file__).resolve().is_relative_to(ROOT.resolve()):
        raise RuntimeError(f"nbyoc is imported from {nbyoc.__file__}, not from {ROOT}")
    found: dict[str, Any] = {}
    for name in nbyoc.__all__:
        obj = getattr(nbyoc, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            found[f"nbyoc.{name}"] = obj
    for match in _TARGET.finditer(API_PAGE.read_text()):
        target, members = match[1], match[2]
        obj = _resolve(target)
        if not inspect.ismodule(obj):
            found[target] = obj
            continue
        names = [m.strip() for m in members.split(",")] if members else _module_names(obj)
        for name in names:
            member = getattr(obj, name)
            if inspect.isfunction(member) or inspect.isclass(member):
                found[f"{target}.{name}"] = member
    return found


def _module_names(module: Any) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == module.__name__]  # fmt: skip
    return list(names)


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


def public_functions(objects: dict[str, Any]) -> dict[str, Any]:
    """Dotted name -> plain function, for the functions and the public methods (and
    property getters) of the classes among ``objects``, each once."""
    functions: dict[str, Any] = {}
    for name, obj in objects.items():
        if inspect.isfunction(obj):
            functions[name] = inspect.unwrap(obj)
            continue
        for attr, value in vars(obj).items():
            if attr.startswith("_") and attr not in _PUBLIC_DUNDERS:
                continue
            if isinstance(value, property):
                value = value.fget
            elif isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value):
                functions[f"{name}.{attr}"] = inspect.unwrap(value)
    # Each once (an op builder made by ``op_builder`` is one function many times), and
    # only nbyoc's own: a dataclass's generated ``__init__`` has no file, its fields'
    # annotations are its signature.
    by_code = {id(f.__code__): (n, f) for n, f in functions.items()}
    package = (ROOT / "nbyoc").resolve()
    return {n: f for n, f in by_code.values()
            if Path(f.__code__.co_filename).resolve().is_relative_to(package)}  # fmt: skip


def signature_lines(functions: dict[str, Any]) -> dict[Path, dict[int, str]]:
    """File -> {line: function name} for every line of each function's signature (from
    its ``def`` to the line before its body)."""
    lines: dict[Path, dict[int, str]] = {}
    for name, fn in functions.items():
        source, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(source)))
        node = tree.body[0]
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)), name
        start = first + node.lineno - 1
        end = first + node.body[0].lineno - 2
        file = Path(fn.__code__.co_filename).resolve()
        for line in range(start, end + 1):
            lines.setdefault(file, {})[line] = name
    return lines


def problems() -> list[str]:
    """Every problem found, as ``path:line: message [code] (in NAME)``."""
    from mypy import api

    functions = public_functions(public_objects())
    lines = signature_lines(functions)
    files = sorted(str(f.relative_to(ROOT)) for f in lines)
    out, err, _ = api.run(["--config-file", str(ROOT / "pyproject.toml"), str(USAGE), *files])
    if err.strip():
        return [f"mypy failed: {err.strip()}"]
    found = []
    for line in out.splitlines():
        match = re.match(r"(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*)", line)
        if match is None:
            continue
        file = (ROOT / match["file"]).resolve()
        if file == USAGE.resolve():
            found.append(line)
        elif int(match["line"]) in lines.get(file, {}):
            found.append(f"{line} (in {lines[file][int(match['line'])]})")
    return found


def main() -> int:
    found = problems()
    for problem in found:
        print(problem)
    print(f"public API annotations: {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # (this checkout's nbyoc, whatever is installed)
    sys.exit(main())
