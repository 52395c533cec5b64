"""ONNX's own node test cases, selected and run as ``nbyoc.testing.onnx_cases`` does
(the conformance tests and the README's counts), with the checked-in list of the
selected cases nbyoc refuses.
"""

from __future__ import annotations

from pathlib import Path

from nbyoc.testing import onnx_cases
from nbyoc.testing.onnx_cases import all_cases, other_types, selected

__all__ = ["all_cases", "other_types", "refused", "run_case", "selected"]

#: The checked-in list of selected cases that do not pass, each with the reason and
#: the error a user gets.
REFUSED_FILE = Path(__file__).with_name("onnx_refused.txt")


def refused() -> dict[str, str]:
    """case name -> the text its error must contain."""
    entries = {}
    for line in REFUSED_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition("|")
            entries[name.strip()] = reason.strip()
    return entries


def run_case(case, backend: str) -> None:
    """Run ``case`` through nbyoc's ONNX Backend and check it against ONNX's expected
    outputs at the case's tolerances (exactly for non-float outputs)."""
    found = onnx_cases.run_case(case, backend)
    assert found is None, f"{case.name} on {backend}: {found.message}, worst {found.worst}"
