"""``nbyoc explain MODEL.onnx``: where each op of a model would run, and why not elsewhere
(``nbyoc.explain``), as a table, JSON or SVG."""

from __future__ import annotations

import argparse

from .models import add_model_arguments, parse_shapes, read_model


def add_parser(commands) -> None:
    explain = commands.add_parser(
        "explain",
        help="where each op of an ONNX model runs on which backend, and why not elsewhere",
    )
    add_model_arguments(explain)
    explain.add_argument("--min-size", type=int, default=1, help="calls a region needs (default 1)")
    explain.add_argument("--max-size", type=int, default=None, help="calls a region may hold")
    explain.add_argument("--svg", metavar="FILE", help="also draw the graph into FILE")
    explain.add_argument("--json", action="store_true", help="print the report as JSON")
    explain.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import nbyoc
    from nbyoc.transform.pipeline import MAX_REGION_CALLS

    func = read_model(args.model, parse_shapes(args.shapes))
    report = nbyoc.explain(
        func, args.backend or "llvm", min_size=args.min_size,
        max_size=args.max_size if args.max_size is not None else MAX_REGION_CALLS,
    )  # fmt: skip
    if args.svg:
        with open(args.svg, "w") as file:
            file.write(report.to_svg())
    print(report.to_json() if args.json else report)
    return 0
