"""What ``Executable.verify`` finds, as plain data: a row per external function and
output (``OutputCheck``), the first diverging op of each failing region where bisection
found it (``Divergence``), and the report holding both (``VerificationReport``), which
prints as a table.

>>> row = OutputCheck("mine_0", "mine", 0, "float32", (4,), 2.0, 1.0, 4.8e-07, 4, 4, 0)
>>> report = VerificationReport([row], [])
>>> report.ok, [r.symbol for r in report.failures]
(False, ['mine_0'])
>>> print(report)
region   output  backend  dtype    max abs err  max rel err  tolerance  beyond  ok
@mine_0  0       mine     float32  2            1            4.8e-07    4 of 4  FAIL
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import VerificationError


@dataclass(frozen=True)
class OutputCheck:
    """One output of one external function against the host's result on the same inputs.

    ``max_abs_error`` and ``max_rel_error`` (relative to the host's value) are the
    largest over the elements checked; ``tolerance`` is the error allowed at the element
    of the largest error (each element has its own: ``runtime.tolerance``); ``beyond``
    elements of ``checked`` lie outside theirs; ``skipped`` elements were uncertain (a
    comparison or a rounding to an integer whose inputs lie within their bound of the
    jump) and not checked. ``error`` is the exception the function raised instead of
    returning (then nothing was compared)."""

    symbol: str
    backend: str
    output: int
    dtype: str
    shape: tuple
    max_abs_error: float
    max_rel_error: float
    tolerance: float
    beyond: int
    checked: int
    skipped: int
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.beyond == 0


@dataclass(frozen=True)
class Divergence:
    """The first op of region ``symbol`` (in evaluation order) whose value its backend
    computes beyond tolerance: ``node`` is its name in ``print(fn.module[symbol])``
    (``%3``, or ``the result``), ``line`` its line there, ``op`` and ``attrs`` the call's,
    ``detail`` how it diverged. When bisection could not name one, ``node`` is empty and
    ``detail`` says why it stopped."""

    symbol: str
    backend: str
    node: str
    op: str
    attrs: dict
    line: str
    detail: str

    @property
    def found(self) -> bool:
        return bool(self.node)

    def __str__(self) -> str:
        if not self.found:
            return f"@{self.symbol} on {self.backend}: bisection stopped: {self.detail}"
        attrs = ", ".join(f"{k}={v!r}" for k, v in self.attrs.items())
        call = f"{self.op}({attrs})" if attrs else self.op
        return (
            f"@{self.symbol} on {self.backend}: the first op that diverges is {self.node}, "
            f"{call}: `{self.line}`: {self.detail}"
        )


@dataclass
class VerificationReport:
    """Every external function's outputs checked (``rows``), and for each failing region
    the op bisection pinned (``divergences``). ``ok`` when every row is; ``failures``
    are the rows that are not; ``check()`` raises ``VerificationError`` unless ok."""

    rows: list[OutputCheck] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)

    @property
    def failures(self) -> list[OutputCheck]:
        return [row for row in self.rows if not row.ok]

    def check(self) -> VerificationReport:
        """This report if every region passed, else a ``VerificationError`` holding it."""
        if self.ok:
            return self
        regions = sorted({f"@{row.symbol} ({row.backend})" for row in self.failures})
        raise VerificationError(
            f"{', '.join(regions)} computed results beyond their tolerance of the host's; "
            f"fix the backend's code for the op named below, or leave that op to another "
            f"backend (its register_op_support predicate):\n{self}",
            self,
        )

    def __str__(self) -> str:
        head = ["region", "output", "backend", "dtype", "max abs err", "max rel err",
                "tolerance", "beyond", "ok"]  # fmt: skip
        table = [head]
        for row in self.rows:
            if row.error:
                table.append([f"@{row.symbol}", str(row.output), row.backend, row.dtype,
                              "-", "-", "-", "-", f"FAIL: raised {row.error}"])  # fmt: skip
                continue
            table.append([
                f"@{row.symbol}", str(row.output), row.backend, row.dtype,
                _number(row.max_abs_error), _number(row.max_rel_error), _number(row.tolerance),
                f"{row.beyond} of {row.checked}", "ok" if row.ok else "FAIL",
            ])  # fmt: skip
        if len(table) == 1:
            return "no external functions: everything ran on the host"
        widths = [max(len(r[k]) for r in table) for k in range(len(head) - 1)]
        lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]) for r in table]
        lines += [str(d) for d in self.divergences]
        return "\n".join(lines)


def _number(x: float) -> str:
    return f"{x:.3g}"
