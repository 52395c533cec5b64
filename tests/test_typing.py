"""The public API's annotations pass mypy --strict (``tests/typing/check_public_api.py``,
which CI runs too): run here when mypy is installed, so that a failure shows locally."""

import importlib.util
import inspect
from pathlib import Path

import pytest

import nbyoc

CHECK = Path(__file__).parent / "typing" / "check_public_api.py"
spec = importlib.util.spec_from_file_location("check_public_api", CHECK)
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def test_the_public_api_is_what_the_check_checks():
    objects = check.public_objects()
    for name in ("nbyoc.var", "nbyoc.compile", "nbyoc.Executable", "nbyoc.add",
                 "nbyoc.frontend.onnx.backend.Backend", "nbyoc.cache.info",
                 "nbyoc.runtime.destination_passing", "nbyoc.errors.NbyocError"):  # fmt: skip
        assert name in objects, name
    functions = check.public_functions(objects)
    assert "nbyoc.Executable.profile" in functions and "nbyoc.Executable._plan" not in functions
    # every op builder is checked, the generated ones as their one maker
    assert inspect.unwrap(nbyoc.exp).__code__ in {f.__code__ for f in functions.values()}


def test_signature_lines_run_from_the_def_to_the_body():
    lines = check.signature_lines({"nbyoc.top_k": nbyoc.top_k})
    ((file, found),) = lines.items()
    source, first = inspect.getsourcelines(nbyoc.top_k)
    assert file == Path(inspect.getsourcefile(nbyoc.top_k)).resolve()
    assert min(found) == first and source[max(found) - first].rstrip().endswith(":")


def test_the_public_api_passes_mypy_strict():
    pytest.importorskip("mypy")
    problems = check.problems()
    assert not problems, "\n".join(problems)
