"""The plain data ``nbyoc.explain`` returns, and its table and JSON forms.

An ``Explanation`` holds one ``OpRow`` per op call (where it runs and why each backend
asked before refused) and one ``RegionRow`` per external function (its ops and the
bytes crossing its boundary, and why it was kept apart from a neighbour of its
backend). Nothing here computes a partition: ``explain.explain`` fills it in.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field

from ..transform.support import HOST


@dataclass(frozen=True)
class OpRow:
    """One op call: ``name`` as in the function's text form (``%12``), its ``op`` and
    result ``type``, the backend it runs on (``target``) and its external function
    (``symbol``, None on the host); ``asked``: (backend, reason refused) for each backend
    asked before the one that took it; ``note``: why a call a backend took still runs on
    the host (a region below ``min_size``)."""

    name: str
    op: str
    type: str
    target: str
    symbol: str | None
    asked: tuple[tuple[str, str], ...] = ()
    note: str = ""


@dataclass(frozen=True)
class RegionRow:
    """One external function: its ``symbol`` and ``backend``, its calls (``ops``: op
    name -> count, ``size``: calls), the values it reads (``inputs``) and returns
    (``outputs``) and their bytes (a symbolic size's bytes as an expression); ``apart``:
    (neighbour's symbol, why the two were not merged) for each neighbour of its backend
    it reads from."""

    symbol: str
    backend: str
    size: int
    ops: dict[str, int]
    inputs: int
    outputs: int
    bytes_in: int | str
    bytes_out: int | str
    apart: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Explanation:
    """What ran where, and why: see ``nbyoc.explain``. ``str()`` is a table, ``to_json()``
    the same data, ``to_svg()`` a drawing of the graph coloured by backend."""

    backends: tuple[str, ...]
    ops: tuple[OpRow, ...]
    regions: tuple[RegionRow, ...]
    #: The function's parameters by name, and (operand, reader) pairs of names between
    #: parameters and op calls (through tuples and constants), for the drawing.
    inputs: tuple[str, ...] = ()
    edges: tuple[tuple[str, str], ...] = field(repr=False, default=())

    def counts(self) -> dict[str, int]:
        """Op calls per backend (the host included), in the order of ``backends``."""
        counted = Counter(row.target for row in self.ops)
        return {b: counted[b] for b in [*self.backends, HOST] if counted[b]}

    def refused(self, backend: str) -> list[OpRow]:
        """The op calls ``backend`` was asked for and refused, or that ran elsewhere
        although it took them (a region below ``min_size``)."""
        return [
            row
            for row in self.ops
            if any(b == backend for b, _ in row.asked) or (row.note and row.target == HOST)
        ]

    def summary(self) -> str:
        """One line: calls per backend and the number of regions."""
        counts = ", ".join(f"{b} {n}" for b, n in self.counts().items())
        regions = len(self.regions)
        return f"{len(self.ops)} op calls ({counts}) in {regions} region{'s' * (regions != 1)}"

    def to_json(self) -> str:
        """The report as JSON: {"backends", "ops", "regions"}."""
        data = {
            "summary": self.summary(),
            "backends": list(self.backends),
            "ops": [asdict(row) for row in self.ops],
            "regions": [asdict(row) for row in self.regions],
        }
        return json.dumps(data, indent=1)

    def to_svg(self, engine: str = "auto") -> str:
        """The graph as SVG, each op coloured by its backend: laid out by graphviz when
        it is installed (``engine="graphviz"`` requires it), else by the built-in
        layered layout (``engine="builtin"``)."""
        from .svg import render

        return render(self, engine)

    def to_dot(self) -> str:
        """The graph as Graphviz DOT text (what ``to_svg`` lays out with ``dot``)."""
        from .svg import to_dot

        return to_dot(self)

    def __str__(self) -> str:
        return "\n".join([self.summary(), "", *_op_table(self.ops), "", *_region_table(self)])


def _op_table(ops) -> list[str]:
    # The type goes last: a symbolic one is long, and would push the reasons off screen.
    rows = [("value", "op", "runs on", "why not elsewhere", "type")]
    for row in ops:
        why = "; ".join(f"{b}: {reason}" for b, reason in row.asked)
        if row.note:
            why = f"{why}; {row.note}" if why else row.note
        rows.append((row.name, row.op, row.symbol or row.target, why, row.type))
    return _aligned(rows)


def _region_table(report: Explanation) -> list[str]:
    if not report.regions:
        return ["no regions: every op call runs on the host"]
    rows = [
        ("region", "backend", "calls", "reads", "returns", "bytes read", "bytes returned", "ops")
    ]
    apart = []
    for region in report.regions:
        ops = ", ".join(f"{op} {n}" if n > 1 else op for op, n in region.ops.items())
        rows.append((
            region.symbol, region.backend, str(region.size), str(region.inputs),
            str(region.outputs), str(region.bytes_in), str(region.bytes_out), ops,
        ))  # fmt: skip
        apart += [f"{region.symbol} not merged with {other}: {why}" for other, why in region.apart]
    return _aligned(rows) + (["", *apart] if apart else [])


def _aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as lines of left-aligned columns (the last column is not padded)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in rows]
