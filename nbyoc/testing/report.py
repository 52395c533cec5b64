"""What ``check_backend`` found, as plain data that prints as a table: a row per op and
dtype (cases run from generated graphs and from ONNX's node tests, passed, failed, the
worst error, or why it was skipped) and each failure with a reproducer.

>>> report = BackendReport(
...     "mine", (OpRow("add", "float32", 3, 1, 4, 0, None, ""),
...              OpRow("add", "int8", 0, 0, 0, 0, None, "refused: float32 only")),
...     (), "random")
>>> report.ok, report.cases
(True, 4)
>>> print(report)
check_backend('mine'): 1 op, 2 op/dtype pairs (graphs drawn by random)
4 cases run: 4 passed, 0 failed; 1 pair skipped
op   dtype    graphs  onnx  passed  failed  worst  note
add  float32       3     1       4       0
add  int8          0     0       0       0         refused: float32 only
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from ..runtime.report_text import text_table


@dataclass(frozen=True)
class Failure:
    """A case a backend got wrong: ``kind`` is ``"mismatch"`` (its result differs from
    the reference beyond the tolerance; ``worst``: the largest difference) or
    ``"error"`` (it raised); ``source`` is ``"graphs"`` or ``"onnx"``; ``reproducer``
    says how to run the case again (a generated graph's text and input seed, or the
    ONNX node test's name)."""

    op: str
    dtype: str
    source: str
    kind: str
    worst: float | None
    message: str
    reproducer: str


@dataclass(frozen=True)
class OpRow:
    """One op on one dtype: cases run (``graphs`` generated, ``onnx`` node tests),
    ``passed``, ``failed``, the ``worst`` difference of a mismatch, and a ``note``
    (why nothing ran, when nothing did)."""

    op: str
    dtype: str
    graphs: int
    onnx: int
    passed: int
    failed: int
    worst: float | None
    note: str

    @property
    def cases(self) -> int:
        return self.graphs + self.onnx


@dataclass(frozen=True)
class BackendReport:
    """The result of ``check_backend``: ``rows`` (per op and dtype), ``failures``, and the
    ``generator`` that drew the graphs (``"hypothesis"``, or ``"random"`` without it).
    ``ok`` is True when no case failed."""

    backend: str
    rows: tuple[OpRow, ...]
    failures: tuple[Failure, ...]
    generator: str

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def cases(self) -> int:
        return sum(row.cases for row in self.rows)

    def row(self, op: str, dtype: str) -> OpRow | None:
        return next((r for r in self.rows if (r.op, r.dtype) == (op, dtype)), None)

    def __str__(self) -> str:
        ops = len({row.op for row in self.rows})
        skipped = sum(1 for row in self.rows if not row.cases)
        passed = sum(row.passed for row in self.rows)
        head = (
            f"check_backend({self.backend!r}): {ops} op{'s' * (ops != 1)}, {len(self.rows)} "
            f"op/dtype pairs (graphs drawn by {self.generator})\n{self.cases} cases run: "
            f"{passed} passed, {len(self.failures)} failed"
        )
        if skipped:
            head += f"; {skipped} pair{'s' * (skipped != 1)} skipped"
        table = [
            [r.op, r.dtype, r.graphs, r.onnx, r.passed, r.failed,
             "" if r.worst is None else f"{r.worst:.3g}", r.note]
            for r in self.rows
        ]  # fmt: skip
        header = ["op", "dtype", "graphs", "onnx", "passed", "failed", "worst", "note"]
        lines = [head, text_table(header, table, {"graphs", "onnx", "passed", "failed"})]
        for k, f in enumerate(self.failures, 1):
            worst = "" if f.worst is None else f", worst {f.worst:.3g}"
            lines.append(f"\nfailure {k}: {f.op} on {f.dtype} ({f.source}): {f.kind}{worst}")
            lines.append(textwrap.indent(f"{f.message}\n{f.reproducer}", "  "))
        return "\n".join(lines)
