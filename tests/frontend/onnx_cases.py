"""ONNX's own node test cases (``onnx.backend.test.case.node``), selected and run the
way the conformance tests and the README's counts do.

Selection: the case modules of the op types nbyoc converts (importing only those
keeps the run fast), and of their cases those whose inputs and outputs are of
element types nbyoc has. The other cases of those modules (bfloat16, float8, int4,
strings, ...) are counted apart: each must fail with the element-type error.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx.backend.test.case.node as node_cases
from onnx import numpy_helper

from nbyoc.frontend.onnx import Backend
from nbyoc.frontend.onnx.converters import CONVERTERS
from nbyoc.frontend.onnx.dtypes import ONNX_TO_NBYOC
from nbyoc.frontend.onnx.importer import IMPORTER_OPS
from nbyoc.ir.dtypes import dtype_info

#: Case modules named otherwise than their op.
MODULE_ALIASES = {"rangeop": "range"}
#: The checked-in list of selected cases that do not pass, each with the reason and
#: the error a user gets.
REFUSED_FILE = Path(__file__).with_name("onnx_refused.txt")


def _op_of_module(name: str) -> str:
    name = MODULE_ALIASES.get(name, name)
    return name.replace("_", "").lower()


@functools.cache
def all_cases() -> tuple:
    """Every case of the modules of the op types nbyoc converts."""
    wanted = {op.lower() for op in [*CONVERTERS, *IMPORTER_OPS]}
    np.random.seed(0)  # the cases draw their data from NumPy's global generator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference computations divide by zero
        with np.errstate(all="ignore"):
            for module in pkgutil.iter_modules(node_cases.__path__):
                if _op_of_module(module.name) in wanted:
                    importlib.import_module(f"{node_cases.__name__}.{module.name}")
    return tuple(sorted(node_cases._NodeTestCases, key=lambda c: c.name))


def element_types(case) -> set[int]:
    graph = case.model.graph
    return {v.type.tensor_type.elem_type for v in [*graph.input, *graph.output]
            if v.type.HasField("tensor_type")}  # fmt: skip


def in_nbyoc_types(case) -> bool:
    graph = case.model.graph
    tensors = all(v.type.HasField("tensor_type") for v in [*graph.input, *graph.output])
    return tensors and element_types(case) <= set(ONNX_TO_NBYOC)


def selected() -> list:
    return [c for c in all_cases() if in_nbyoc_types(c)]


def other_types() -> list:
    return [c for c in all_cases() if not in_nbyoc_types(c)]


def refused() -> dict[str, str]:
    """case name -> the text its error must contain."""
    entries = {}
    for line in REFUSED_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition("|")
            entries[name.strip()] = reason.strip()
    return entries


def _array(value) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


def run_case(case, backend: str) -> None:
    """Run ``case`` through nbyoc's ONNX Backend and compare with ONNX's expected
    outputs at the case's tolerances (exactly for non-float outputs)."""
    inputs, expected = case.data_sets[0]
    with np.errstate(all="ignore"):
        got = Backend.prepare(case.model, backend=backend).run([_array(x) for x in inputs])
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        w = np.asarray(_array(w))
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        info = dtype_info(w.dtype)
        if not info.native:  # (ml_dtypes' types: compared by their values, in NumPy's)
            g, w = (a.astype(np.float64 if info.is_float else np.int64) for a in (g, w))
        if info.is_float:
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)
        else:
            np.testing.assert_array_equal(g, w)
