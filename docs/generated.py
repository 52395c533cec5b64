"""The parts of the documentation that the code states: tables read from the registries
and numbers read from the constants that decide them, so that a page never says what
the code contradicts.

A page (any ``docs/**/*.md``, and ``README.md``) marks such a part as a region::

    streamed blocks of <!-- gen:stream-block -->512<!-- /gen --> elements
    <!-- gen:ops-table -->
    | family | op | ... |
    <!-- /gen -->

and ``FACTS[name]()`` is its text. ``python docs/generated.py`` rewrites every region;
``--check`` lists the stale ones and exits 1 (``tests/test_docs_facts.py`` runs the same
check, and the site's build hook warns, which ``mkdocs build --strict`` makes an error).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A region: ``<!-- gen:NAME -->`` text ``<!-- /gen -->``; text on lines of its own when
#: the region spans lines.
REGION = re.compile(r"<!-- gen:([a-z0-9-]+) -->(.*?)<!-- /gen -->", re.DOTALL)


def _cli() -> str:
    """Every subcommand of ``python -m nbyoc``: its help, arguments and their help."""
    from nbyoc.__main__ import build_parser

    def commands(parser) -> list:
        """(name, help, parser) of each subcommand of ``parser``."""
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help for choice in action._choices_actions}
                found += [(n, helps.get(n, ""), p) for n, p in action.choices.items()]
        return found

    def arguments(parser) -> list[str]:
        rows = []
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            shown = ", ".join(action.option_strings) or action.metavar or action.dest
            if action.option_strings and action.nargs != 0:
                shown += " " + (action.metavar or action.dest.upper())
            rows.append(f"| `{shown}` | {action.help or ''} |")
        return ["", "| argument | what it does |", "|---|---|", *rows] if rows else []

    def section(words: list[str], help_text: str, parser, level: int) -> list[str]:
        lines = ["", f"{'#' * level} `nbyoc {' '.join(words)}`", ""]
        lines += [help_text[:1].upper() + help_text[1:] + ".", *arguments(parser)]
        for name, text, sub in commands(parser):
            lines += section([*words, name], text, sub, level + 1)
        return lines

    lines = []
    for name, text, sub in commands(build_parser()):
        lines += section([name], text, sub, 3)
    return "\n".join(lines).strip()


def _extras() -> str:
    """pyproject.toml's extras and what each installs."""
    try:
        import tomllib
    except ModuleNotFoundError:  # (Python 3.10; the docs extra brings tomli)
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = ["| extra | installs |", "|---|---|"]
    for name, requirements in project["optional-dependencies"].items():
        shown = ", ".join(f"`{r.split(';')[0].strip()}`" for r in requirements)
        lines.append(f"| `{name}` | {shown} |")
    return "\n".join(lines)


def _limits() -> str:
    from nbyoc.limits import LIMITS

    lines = ["| limit | default | environment | bounds |", "|---|---|---|---|"]
    for limit in LIMITS.values():
        shown = limit.shown.format(limit.default)
        lines.append(f"| `{limit.name}` | {shown} | `{limit.env}` | {limit.bounds} |")
    return "\n".join(lines)


def _llvm_conditions() -> str:
    """The ops llvm takes only under a condition, with what ``nbyoc.explain`` says when
    the condition refuses a call."""
    from nbyoc.codegen.llvm import CONDITION_REASONS

    lines = ["| op | when llvm refuses a call |", "|---|---|"]
    lines += [f"| `{op}` | {reason} |" for op, reason in CONDITION_REASONS.items()]
    return "\n".join(lines)


def _onnx_opsets() -> str:
    from nbyoc.frontend.onnx.importer import MAX_OPSET, MIN_OPSET

    return f"{MIN_OPSET} to {MAX_OPSET}"


@functools.cache
def _onnx_counts() -> tuple[int, int, int, int]:
    """ONNX's node test cases for the op types nbyoc converts: all of them, those of types
    nbyoc lacks, the others, and those of the others nbyoc does not pass (the suite
    checks that every other case passes on every backend, and every case in
    ``tests/frontend/onnx_refused.txt`` fails with its listed error)."""
    from tests.frontend.onnx_cases import all_cases, other_types, refused, selected

    return len(all_cases()), len(other_types()), len(selected()), len(refused())


def _onnx_pass_rate() -> str:
    _, _, chosen, failing = _onnx_counts()
    return f"{100 * (chosen - failing) / chosen:.1f}%"


def _onnx_conformance() -> str:
    """How many of ONNX's node test cases each backend passes (``_onnx_counts``)."""
    import onnx

    cases, others, chosen, failing = _onnx_counts()
    passed = chosen - failing
    lines = [
        f"Of the {cases} cases of onnx {onnx.__version__}, {others} use types nbyoc does not "
        f"have (strings, FLOAT8E8M0, optional and sequence types) and are refused with that "
        f"error; of the other {chosen} (bfloat16, float8, float4, int4/uint4 and int2/uint2 "
        f"included):",
        "",
        "| backend | passed | not passed |",
        "|---|---|---|",
    ]
    share = f"{passed} ({100 * passed / chosen:.1f}%)"
    first = (
        f"{failing} (listed in `tests/frontend/onnx_refused.txt`, each with its reason and error)"
    )
    lines.append(f"| host | {share} | {first} |")
    lines += [
        f"| {backend} | {share} | the same {failing} |"
        for backend in ("llvm", "csource", "examplejson")
    ]
    return "\n".join(lines)


def _default(func, name: str) -> str:
    return str(inspect.signature(func).parameters[name].default)


def _catalog(name: str) -> Callable[[], str]:
    def text() -> str:
        import nbyoc  # noqa: F401 - registers the backends
        from nbyoc import catalog

        return getattr(catalog, name)()

    return text


def _constant(module: str, name: str, shown: Callable = str) -> Callable[[], str]:
    """The constant ``module.name``, as ``shown`` writes it."""

    def text() -> str:
        import importlib

        return shown(getattr(importlib.import_module(module), name))

    return text


def _power_of_two(value: int) -> str:
    assert value & (value - 1) == 0, f"{value} is not a power of two"
    return f"2**{value.bit_length() - 1}"


def _mib(value: int) -> str:
    return f"{value / (1 << 20):g} MiB"


def _real_models(refused: bool | None) -> Callable[[], str]:
    """How many models the real-model set (tests/real_models.py) pins: all of them, or
    those nbyoc refuses (``refused``) or imports (not ``refused``)."""

    def text() -> str:
        sys.path.insert(0, str(ROOT))
        from tests.real_models import MODELS

        if refused is None:
            return str(len(MODELS))
        return str(sum(bool(m.refused) == refused for m in MODELS.values()))

    return text


def _partition_default(name: str) -> Callable[[], str]:
    def text() -> str:
        import nbyoc

        return _default(nbyoc.partition, name)

    return text


#: name -> the text of its regions.
FACTS: dict[str, Callable[[], str]] = {
    "ops-table": _catalog("op_table"),
    "dtype-table": _catalog("dtype_table"),
    "numpy-ufuncs": _catalog("numpy_ufunc_table"),
    "numpy-functions": _catalog("numpy_function_list"),
    "numpy-operators": _catalog("numpy_operator_table"),
    "numpy-methods": _catalog("numpy_method_table"),
    "numpy-refused": _catalog("numpy_refused_table"),
    "llvm-conditions": _llvm_conditions,
    "onnx-opsets": _onnx_opsets,
    "onnx-conformance": _onnx_conformance,
    "onnx-pass-rate": _onnx_pass_rate,
    "cli": _cli,
    "real-models": _real_models(None),
    "real-models-imported": _real_models(False),
    "real-models-refused": _real_models(True),
    "limits": _limits,
    "extras": _extras,
    "max-size": _partition_default("max_size"),
    "stream-block": _constant("nbyoc.codegen.llvm.stages", "STREAM_BLOCK"),
    "blocked-min-ops": _constant("nbyoc.codegen.llvm.stages", "BLOCKED_MIN_OPS"),
    "block": _constant("nbyoc.codegen.llvm.stages", "BLOCK"),
    "pointer-min-ops": _constant("nbyoc.codegen.llvm.stages", "POINTER_MIN_OPS"),
    "max-nest-ops": _constant("nbyoc.codegen.llvm.schedule", "MAX_NEST_OPS"),
    "function-min-ops": _constant("nbyoc.codegen.llvm.schedule", "FUNCTION_MIN_OPS"),
    "sum-block": _constant("nbyoc.codegen.llvm.rows", "SUM_BLOCK"),
    "prefetch-min-row": _constant("nbyoc.codegen.llvm.rows", "PREFETCH_MIN_ROW_BYTES"),
    "short-row": _constant("nbyoc.codegen.llvm.row_blocks", "SHORT_ROW"),
    "column-block": _constant("nbyoc.codegen.llvm.reduce", "COLUMN_BLOCK"),
    "deep-k": _constant("nbyoc.codegen.llvm.gemm", "DEEP_K"),
    "k-block": _constant("nbyoc.codegen.llvm.gemm", "K_BLOCK"),
    "program-min-work": _constant("nbyoc.codegen.llvm.lower", "PROGRAM_MIN_WORK", _power_of_two),
    "model-program-min-work": _constant(
        "nbyoc.codegen.llvm.lower", "MODEL_PROGRAM_MIN_WORK", _power_of_two
    ),
    "pool-min-bytes": _constant("nbyoc.runtime.outputs", "POOL_MIN_BYTES", _mib),
    "matmul-loop-work": _constant("nbyoc.codegen.llvm.gemm", "LOOP_MAX_WORK"),
    "parallel-threshold": _constant("nbyoc.codegen.llvm", "PARALLEL_THRESHOLD"),
    "stable-calls": _constant("nbyoc.runtime.sizes", "STABLE_CALLS"),
    "bindings-kept": _constant("nbyoc.runtime.sizes", "MAX_KEPT"),
    "kernels-kept": _constant("nbyoc.cache", "KERNELS_KEPT"),
    "progress-delay": _constant("nbyoc.progress", "DELAY"),
    "progress-notice": _constant("nbyoc.progress", "NOTICE_AFTER"),
}


@functools.cache
def _text(name: str) -> str:
    """``FACTS[name]()``, made once per process (the site's build asks for each on every
    page that holds it), from the checkout's nbyoc, whatever else is installed (put
    first on the path here: mkdocstrings adds and removes the same entry)."""
    if sys.path[0] != str(ROOT):
        sys.path.insert(0, str(ROOT))
    return FACTS[name]()


def pages() -> list[Path]:
    """Every page that may hold regions."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def render(text: str) -> str:
    """``text`` with every region's text made again from the code."""

    def fill(match: re.Match) -> str:
        name, old = match.group(1), match.group(2)
        if name not in FACTS:
            raise KeyError(f"unknown generated region {name!r} (known: {', '.join(FACTS)})")
        new = _text(name)
        new = f"\n{new}\n" if "\n" in old or "\n" in new else new
        return f"<!-- gen:{name} -->{new}<!-- /gen -->"

    return REGION.sub(fill, text)


def stale(text: str) -> list[str]:
    """The names of the regions of ``text`` whose text the code no longer gives."""
    pairs = zip(REGION.finditer(text), REGION.finditer(render(text)))
    return [old.group(1) for old, new in pairs if old.group(0) != new.group(0)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only list stale regions")
    args = parser.parse_args(argv)
    found = False
    for page in pages():
        text = page.read_text()
        names = stale(text)
        if names:
            found = True
            print(f"{page.relative_to(ROOT)}: {', '.join(names)}")
            if not args.check:
                page.write_text(render(text))
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
