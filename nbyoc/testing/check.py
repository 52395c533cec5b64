"""``check_backend(name)``: every op a backend claims, on every dtype it takes, against
the host.

For each op the backend declares and each dtype the op's type rule accepts, it draws
small graphs around one call of the op (``nbyoc.testing.cases``; with hypothesis when
it is installed, else from a seeded generator), keeps those whose call the backend's
predicate accepts, compiles each for the backend and compares the result with the
host's (``nbyoc.testing.compare``: exact for integers, within the computation's error
bound for floats). Where onnx is installed it also runs ONNX's node test cases that
use the op (``nbyoc.testing.onnx_cases``) through nbyoc's ONNX import, for this
backend. The result is a ``BackendReport``: a row per op and dtype, each failure with
a reproducer.

>>> report = check_backend("csource", ops=["add"], dtypes=["float32", "bool"], examples=1,
...                        onnx=False)
>>> [(r.op, r.dtype, r.graphs, r.passed, r.failed) for r in report.rows]
[('add', 'float32', 1, 1, 0), ('add', 'bool', 1, 1, 0)]
>>> report.ok
True
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..codegen.registry import check_backend as registered
from ..compiler import compile as compile_function
from ..errors import NbyocError, NbyocTypeError
from ..ir.dtypes import DTYPES
from ..ir.nodes import Call
from ..ir.op import Op
from ..ir.traversal import post_order
from ..transform.support import declared_ops, refusal
from .calls import GENERATORS
from .cases import OpCase, op_case
from .choices import FirstChoices, RandomChoices
from .compare import Difference, difference
from .inputs import random_inputs
from .report import BackendReport, Failure, OpRow


@dataclass
class _Tally:
    """What the cases of one op on one dtype came to, as they run."""

    graphs: int = 0
    onnx: int = 0
    passed: int = 0
    failed: int = 0
    worst: float | None = None
    refused: int = 0  # (calls the predicate refused, or that the partitioner left elsewhere)
    reason: str = ""  # (the predicate's last reason)
    void: int = 0  # (inputs the host refused: integers to negative powers, ...)
    note: str = ""

    def failure(self, worst: float | None) -> None:
        self.failed += 1
        if worst is not None and (self.worst is None or not worst <= self.worst):
            self.worst = worst

    def row(self, op: str, dtype: str) -> OpRow:
        note = self.note
        if not self.graphs + self.onnx and not note:
            if self.refused:
                note = f"refused all {self.refused} generated calls: {self.reason}"
            elif self.void:
                note = "the host refused every generated input"
        return OpRow(op, dtype, self.graphs, self.onnx, self.passed, self.failed, self.worst,
                     note)  # fmt: skip


def check_backend(
    name: str,
    *,
    examples: int = 3,
    dtypes: Sequence[str] | None = None,
    ops: Sequence[str] | None = None,
    onnx: bool = True,
    seed: int = 0,
) -> BackendReport:
    """Check backend ``name`` against the host (see the module docstring): ``examples``
    generated graphs per op and dtype, and up to as many of ONNX's node cases (with
    ``onnx=True``, where onnx is installed); ``dtypes`` and ``ops`` narrow the check
    (default: every dtype, every op the backend declares). Returns a ``BackendReport``;
    ``print`` it for the table, and ``report.ok`` says whether every case passed."""
    registered(name)
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise NbyocError(f"check_backend: examples must be a positive int, got {examples!r}")
    claimed = declared_ops(name)
    chosen = list(claimed if ops is None else ops)
    unclaimed = [op for op in chosen if op not in claimed]
    if unclaimed:
        raise NbyocError(
            f"backend {name!r} does not declare op(s) {', '.join(map(repr, unclaimed))}; it "
            f"declares {', '.join(claimed) or 'none'} (nbyoc.register_op_support)"
        )
    dtypes = list(DTYPES if dtypes is None else dtypes)
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        raise NbyocError(f"check_backend: unknown dtype(s) {unknown}; nbyoc's: {list(DTYPES)}")
    tallies: dict[tuple[str, str], _Tally] = {}
    failures: list[Failure] = []
    generator = _generator()
    for op in chosen:
        if op not in GENERATORS:
            tallies[(op, "-")] = _Tally(note=f"no case generator for {op!r} (ONNX's cases only)")
            continue
        for dtype in dtypes:
            if not _takes(op, dtype):
                continue  # (the op's type rule refuses the dtype: not a pair to check)
            tally = tallies[(op, dtype)] = _Tally()

            def run(case: OpCase, tally=tally) -> bool:
                return _run_graph_case(name, case, tally, failures)

            generator(op, dtype, examples, seed, run)
    if onnx:
        _run_node_cases(name, chosen, dtypes, examples, tallies, failures)
    order = {op: k for k, op in enumerate(chosen)}
    rank = {d: k for k, d in enumerate(["-", *dtypes])}
    keys = sorted(tallies, key=lambda key: (order[key[0]], rank.get(key[1], len(rank))))
    rows = tuple(tallies[key].row(*key) for key in keys)
    return BackendReport(name, rows, tuple(failures), generator.__name__.strip("_"))


def _takes(op: str, dtype: str) -> bool:
    """Whether the op's type rule takes ``dtype`` operands (its smallest case types)."""
    try:
        op_case(op, dtype, FirstChoices(), context=False)
    except NbyocTypeError:
        return False
    return True


def _generator() -> Callable:
    """How cases are drawn: by hypothesis when it is installed, else from a seeded
    ``random.Random`` (the same seed, the same cases)."""
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        return _random
    return _hypothesis


#: Draws that do not count (the predicate refused the call, the type rule the sizes)
#: after which an op on a dtype is given up when none has counted yet.
GIVE_UP = 20


class _Enough(BaseException):
    """Stops hypothesis drawing (a BaseException: it does not take it for a failing
    example to report or shrink)."""


def _random(op: str, dtype: str, examples: int, seed: int, run: Callable) -> None:
    base = zlib.crc32(f"{op}/{dtype}/{seed}".encode())
    ran = 0
    for attempt in range(examples + GIVE_UP):  # (draws that did not count drawn again)
        if ran == examples:
            return
        try:
            case = op_case(op, dtype, RandomChoices(base + attempt))
        except NbyocTypeError:
            continue
        ran += run(case)


def _hypothesis(op: str, dtype: str, examples: int, seed: int, run: Callable) -> None:
    from hypothesis import HealthCheck, Phase, assume, given, settings
    from hypothesis import seed as seeded
    from hypothesis.errors import Unsatisfiable

    from .strategies import op_cases

    @seeded(zlib.crc32(f"{op}/{dtype}/{seed}".encode()))
    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(op_cases(op, dtype))
    def cases(case):
        counted = run(case)
        tries[counted] += 1
        if tries == [GIVE_UP, 0]:
            raise _Enough
        assume(counted)  # (a call the backend refuses is no example: draw another)

    tries = [0, 0]  # (not counted, counted)
    with contextlib.suppress(Unsatisfiable, _Enough):  # (all refused: the row says so)
        cases()


def _run_graph_case(name: str, case: OpCase, tally: _Tally, failures: list) -> bool:
    """Run one generated case on the backend and on the host and tally it; False when it
    did not count (the backend refused the call, or the host the inputs)."""
    reproducer = (
        f"reproducer: f = nbyoc.parse(TEXT); args = nbyoc.testing.random_inputs(f, "
        f"seed={case.seed}); nbyoc.compile(f, {name!r})(*args), with TEXT:\n{case.func}"
    )

    def counted(kind: str | None = None, worst=None, message: str = "") -> bool:
        tally.graphs += 1
        if kind is None:
            tally.passed += 1
        else:
            failures.append(Failure(case.op, case.dtype, "graphs", kind, worst, message,
                                    reproducer))  # fmt: skip
            tally.failure(worst)
        return True

    try:
        reason = refusal(name, case.call)
    except NbyocError as e:  # (the predicate raised: a bug of the backend's, as any)
        return counted("error", None, str(e))
    if reason is not None:
        tally.refused, tally.reason = tally.refused + 1, reason
        return False
    args = random_inputs(case.func, case.seed)
    try:
        with np.errstate(all="ignore"):
            expected = compile_function(case.func, "host")(*args)
    except Exception:
        tally.void += 1
        return False
    try:
        fn = compile_function(case.func, name)
        if not _runs_on(fn.module, name, case.op):
            tally.refused, tally.reason = tally.refused + 1, "the partitioner left it elsewhere"
            return False
        with np.errstate(all="ignore"):
            got = fn(*args)
    except Exception as e:
        return counted("error", None, f"{type(e).__name__}: {e}")
    found = difference(case.func, args, got, expected)
    if found is None:
        return counted()
    return counted("mismatch", found.worst, found.message)


def _runs_on(module, name: str, op: str) -> bool:
    """Whether a function of ``module`` that ``name`` builds has a call of ``op``."""
    return any(
        isinstance(n, Call) and isinstance(n.op, Op) and n.op.name == op
        for f in module.functions.values()
        if f.attrs.get("Compiler") == name
        for n in post_order([f.body])
    )


def _run_node_cases(name, ops, dtypes, examples, tallies, failures) -> None:
    """ONNX's node cases of ``ops``, where onnx is installed, tallied by op and dtype."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return
    from .onnx_cases import cases_for, run_case

    for (op, dtype), cases in cases_for(name, ops, dtypes, examples).items():
        tally = tallies.setdefault((op, dtype), _Tally())
        for case in cases:
            tally.onnx += 1
            try:
                found = run_case(case, name)
            except Exception as e:
                found, kind = Difference(None, 0, f"{type(e).__name__}: {e}"), "error"
            else:
                kind = "mismatch"
            if found is None:
                tally.passed += 1
                continue
            reproducer = f"reproducer: ONNX's node test {case.name} (onnx.backend.test.case.node)"
            failures.append(Failure(op, dtype, "onnx", kind, found.worst, found.message,
                                    reproducer))  # fmt: skip
            tally.failure(found.worst)
