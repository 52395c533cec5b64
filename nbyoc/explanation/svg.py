"""An ``Explanation`` drawn: the graph's parameters and op calls, each op coloured by the
backend that runs it, as SVG.

With Graphviz's ``dot`` on the PATH, the DOT text (``to_dot``) is laid out by it; without
it, a built-in layered layout places each op one row below the deepest op it reads (rows
of a few hundred ops stay readable; edges are straight lines). Both show the same nodes,
colours and legend. No Python package is needed for either.
"""

from __future__ import annotations

import shutil
import subprocess
from html import escape

from ..errors import NbyocError
from ..transform.support import HOST

#: Fill colours by backend rank (the host is grey); a ninth backend reuses the first.
PALETTE = ("#8dd3c7", "#fdb462", "#80b1d3", "#fb8072", "#bebada", "#b3de69", "#fccde5", "#ffed6f")
HOST_COLOUR = "#d9d9d9"
PARAM_COLOUR = "#ffffff"
BOX_WIDTH, BOX_HEIGHT, COLUMN, ROW = 128, 34, 148, 58


def colours(report) -> dict[str, str]:
    """Backend -> fill colour, the host included."""
    found = {b: PALETTE[i % len(PALETTE)] for i, b in enumerate(report.backends)}
    return {**found, HOST: HOST_COLOUR}


def render(report, engine: str = "auto") -> str:
    """The SVG text of ``report``'s graph (see the module docstring for ``engine``)."""
    if engine not in ("auto", "graphviz", "builtin"):
        raise NbyocError(f"engine must be 'auto', 'graphviz' or 'builtin', got {engine!r}")
    dot = shutil.which("dot")
    if engine == "graphviz" and dot is None:
        raise NbyocError(
            "engine='graphviz' needs Graphviz's dot on the PATH (apt install graphviz, "
            "brew install graphviz); engine='builtin' draws without it"
        )
    if engine != "builtin" and dot is not None:
        done = subprocess.run(
            [dot, "-Tsvg"], input=to_dot(report), capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise NbyocError(f"Graphviz's dot failed: {done.stderr.strip()[:500]}")
        return done.stdout
    return _builtin(report)


def _nodes(report) -> list[tuple[str, str, str]]:
    """(name, label, backend or "") per drawn node: parameters first, then op calls."""
    drawn = [(name, name, "") for name in report.inputs]
    return drawn + [(r.name, f"{r.op} {r.name}", r.target) for r in report.ops]


def to_dot(report) -> str:
    """The graph as Graphviz DOT text.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (2,))
    >>> print(to_dot(nbyoc.explain(nbyoc.function([x], nbyoc.exp(x)), "llvm")))
    digraph nbyoc {
      node [shape=box, style="rounded,filled", fontname="Helvetica"];
      "%x" [label="%x", fillcolor="#ffffff"];
      "(result)" [label="exp (result)\\nllvm_0", fillcolor="#8dd3c7"];
      "%x" -> "(result)";
    }
    """
    fill = colours(report)
    where = {r.name: r.symbol or r.target for r in report.ops}
    lines = [
        "digraph nbyoc {",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
    ]
    for name, label, backend in _nodes(report):
        text = f"{label}\\n{where[name]}" if backend else label
        colour = fill[backend] if backend else PARAM_COLOUR
        lines.append(f'  "{_dot(name)}" [label="{_dot(text)}", fillcolor="{colour}"];')
    lines += [f'  "{_dot(a)}" -> "{_dot(b)}";' for a, b in report.edges]
    return "\n".join([*lines, "}"])


def _dot(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n")


def _builtin(report) -> str:
    nodes = _nodes(report)
    reads: dict[str, list[str]] = {name: [] for name, _, _ in nodes}
    for a, b in report.edges:
        reads[b].append(a)
    depth: dict[str, int] = {}
    for name, _, _ in nodes:  # (evaluation order: every operand comes first)
        depth[name] = 1 + max((depth[a] for a in reads[name]), default=-1)
    rows: dict[int, list[str]] = {}
    for name, _, _ in nodes:
        rows.setdefault(depth[name], []).append(name)
    at = {
        name: (20 + k * COLUMN, 60 + d * ROW)
        for d, names in rows.items()
        for k, name in enumerate(names)
    }
    width = 40 + COLUMN * max(len(names) for names in rows.values())
    height = 80 + ROW * len(rows)
    fill = colours(report)
    where = {r.name: r.symbol or r.target for r in report.ops}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="Helvetica, Arial, sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for k, (backend, colour) in enumerate(fill.items()):
        x = 20 + k * 110
        out.append(f'<rect x="{x}" y="12" width="14" height="14" fill="{colour}" stroke="#555"/>')
        out.append(f'<text x="{x + 20}" y="24">{escape(backend)}</text>')
    for a, b in report.edges:
        (x1, y1), (x2, y2) = at[a], at[b]
        out.append(
            f'<line x1="{x1 + BOX_WIDTH / 2}" y1="{y1 + BOX_HEIGHT}" x2="{x2 + BOX_WIDTH / 2}" '
            f'y2="{y2}" stroke="#888"/>'
        )
    for name, label, backend in nodes:
        x, y = at[name]
        colour = fill[backend] if backend else PARAM_COLOUR
        out.append(f"<g><title>{escape(name)}</title>")
        out.append(
            f'<rect x="{x}" y="{y}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="5" '
            f'fill="{colour}" stroke="#555"/>'
        )
        out.append(f'<text x="{x + 6}" y="{y + 14}">{escape(label[:22])}</text>')
        if backend:
            out.append(f'<text x="{x + 6}" y="{y + 28}" fill="#333">{escape(where[name])}</text>')
        out.append("</g>")
    return "\n".join([*out, "</svg>"])
