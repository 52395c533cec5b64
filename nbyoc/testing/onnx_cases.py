"""ONNX's own node test cases (``onnx.backend.test.case.node``, which the onnx package
ships as the code that makes each case's model, inputs and expected outputs), run
through nbyoc's ONNX import for a backend: the conformance suite of nbyoc's tests, and
the ONNX part of ``check_backend``.

Selection: the case modules of the op types nbyoc converts (importing only those
keeps it fast), and of their cases those whose inputs and outputs are of element
types nbyoc has. ``cases_for`` picks, for each op a backend claims, the cases whose
imported graph has a call of it that the backend takes, fewest calls first (the cases
that test that op most directly), among those the host passes.

>>> case = next(c for c in selected() if c.name == "test_relu")
>>> run_case(case, "csource") is None
True
>>> picked = cases_for("csource", ["exp"], ["float32"], 2)
>>> [c.name for c in picked[("exp", "float32")]]
['test_exp', 'test_exp_example']
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import warnings

import numpy as np

from ..errors import PerShapeWarning
from ..frontend.onnx import require_onnx
from ..ir.dtypes import dtype_info
from ..ir.nodes import Call
from ..ir.op import Op
from ..ir.traversal import post_order
from .calls import data_dtype
from .compare import Difference, elements_beyond, outputs_difference

require_onnx()

import onnx  # noqa: E402 - (after the check that says how to install it)
import onnx.backend.test.case.node as node_cases  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from ..frontend.onnx import Backend  # noqa: E402
from ..frontend.onnx.converters import CONVERTERS  # noqa: E402
from ..frontend.onnx.dtypes import ONNX_TO_NBYOC  # noqa: E402
from ..frontend.onnx.importer import IMPORTER_OPS  # noqa: E402

#: Case modules named otherwise than their op.
MODULE_ALIASES = {"rangeop": "range"}


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
    """The cases of element types nbyoc has."""
    return [c for c in all_cases() if in_nbyoc_types(c)]


def other_types() -> list:
    """The cases of other element types (bfloat16, float8, int4, strings, ...)."""
    return [c for c in all_cases() if not in_nbyoc_types(c)]


def array(value) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


def run_case(case, backend: str, rep=None) -> Difference | None:
    """Run ``case`` through nbyoc's ONNX Backend (``rep``: one already prepared) and
    compare with ONNX's expected outputs at the case's tolerances (exactly for
    non-float outputs): None when they agree. A failing import or run raises."""
    inputs, expected = case.data_sets[0]
    rep = rep or Backend.prepare(case.model, backend=backend)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        # (a case with dynamic dims warns that csource builds per shape: it runs one)
        warnings.simplefilter("ignore", PerShapeWarning)
        got = rep.run([array(x) for x in inputs])
    rtol, atol = case.rtol, case.atol

    def output(k, g, w):
        if not dtype_info(w.dtype).is_float:
            return elements_beyond(k, g, w, 0.0)
        with np.errstate(all="ignore"):
            allowed = atol + rtol * np.abs(w.astype(np.float64))
        return elements_beyond(k, g, w, allowed, f"rtol={rtol}, atol={atol}")

    return outputs_difference(got, tuple(np.asarray(array(w)) for w in expected), output)


@functools.cache
def _host_calls() -> tuple:
    """(case, the op calls of its import) for each selected case the host passes."""
    passed = []
    for case in selected():
        rep = Backend.prepare(case.model, backend="host")
        try:
            if run_case(case, "host", rep) is not None:
                continue
        except Exception:  # (refused on purpose, or not yet supported: not a backend's test)
            continue
        made = [*rep.executables.values(), *(rep.symbolic or {}).values()]
        calls = [
            n for n in post_order([made[0].module["main"].body])
            if isinstance(n, Call) and isinstance(n.op, Op)
        ]  # fmt: skip
        passed.append((case, tuple(calls)))
    return tuple(passed)


def cases_for(backend: str, ops, dtypes, per_pair: int) -> dict[tuple[str, str], list]:
    """For each op of ``ops`` and dtype of ``dtypes``: up to ``per_pair`` cases whose
    import has a call of the op on operands of the dtype that ``backend`` takes (the
    host passing them), fewest calls first."""
    from ..transform.support import supports

    found: dict[tuple[str, str], list] = {}
    ops, dtypes = set(ops), set(dtypes)
    for case, calls in sorted(_host_calls(), key=lambda item: (len(item[1]), item[0].name)):
        pairs = {
            (c.op.name, data_dtype(c)) for c in calls
            if c.op.name in ops and c.args and data_dtype(c) in dtypes and supports(backend, c)
        }  # fmt: skip
        for pair in sorted(pairs):
            chosen = found.setdefault(pair, [])
            if len(chosen) < per_pair:
                chosen.append(case)
    return found
