"""ONNX's own node test cases as nbyoc's conformance suite (see ``onnx_cases``).

Every selected case runs on the host; by default every twelfth on llvm and one in 60
on csource and examplejson, all of them with ``--run-slow`` (each case compiles its
own kernels: measured 279 s for all on llvm, 78 s on csource, 275 s on examplejson). A case listed in ``onnx_refused.txt`` must fail with the
error given there; every other case must match ONNX's expected outputs.
"""

import re

import pytest

from nbyoc.errors import ModelImportError

from .onnx_cases import other_types, refused, run_case, selected

SELECTED = selected()
REFUSED = refused()


def check(case, backend: str) -> None:
    if case.name in REFUSED:
        with pytest.raises(ModelImportError, match=re.escape(REFUSED[case.name])):
            run_case(case, backend)
    else:
        run_case(case, backend)


def sample(every: int, offset: int = 0, slow_rest: bool = False) -> list:
    """The selected cases, every ``every``-th one (from ``offset``) as it is and the rest
    marked slow, or left out."""
    params = []
    for k, case in enumerate(SELECTED):
        chosen = k % every == offset
        if chosen or slow_rest:
            marks = () if chosen else pytest.mark.slow
            params.append(pytest.param(case, id=case.name, marks=marks))
    return params


@pytest.mark.parametrize("case", sample(1))
def test_host(case):
    check(case, "host")


@pytest.mark.parametrize("case", sample(12, slow_rest=True))
def test_llvm(case):
    check(case, "llvm")


@pytest.mark.parametrize("case", sample(60, 5, slow_rest=True))
def test_csource(case):
    check(case, "csource")


@pytest.mark.parametrize("case", sample(60, 35, slow_rest=True))
def test_examplejson(case):
    check(case, "examplejson")


def test_the_refused_list_names_selected_cases_and_stays_under_five_percent():
    names = {c.name for c in SELECTED}
    assert set(REFUSED) <= names, sorted(set(REFUSED) - names)
    assert len(REFUSED) <= 0.05 * len(SELECTED), (len(REFUSED), len(SELECTED))


def test_cases_of_element_types_nbyoc_lacks_fail_with_a_clear_error():
    cases = other_types()
    assert cases  # the selection rule has something to set apart
    for case in cases:
        with pytest.raises(ModelImportError, match=r"element type|is not a tensor|does not import"):
            run_case(case, "host")
