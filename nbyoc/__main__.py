"""Command line: ``python -m nbyoc demo``, ``ops``, ``inspect MODEL.onnx``, ``run
MODEL.onnx``, ``explain MODEL.onnx``, ``profile MODEL.onnx``, ``info``, ``cache
info|clear|prune`` (see ``--help``; each subcommand beyond the first two lives in
``nbyoc.cli``)."""

from __future__ import annotations

import argparse
import sys

from ._version import __version__
from .cli import explain, info, inspect_model, profile, run_model
from .cli.errors import run_command


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (the documentation's command-line page is made from it)."""
    parser = argparse.ArgumentParser(prog="nbyoc", description="Bring Your Own Codegen for Python")
    parser.add_argument("--version", action="version", version=f"nbyoc {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="compile the reference graph on every backend, check it, time it"
    )
    demo.add_argument(
        "--sizes", type=int, nargs="+", default=[10, 1024, 4096], metavar="N",
        help="run on N x N arrays (default: 10 1024 4096)",
    )  # fmt: skip
    demo.add_argument("--backend", action="append", help="only this backend (repeatable)")
    commands.add_parser("ops", help="print the op catalog: every op and the backends that run it")
    inspect_model.add_parser(commands)
    run_model.add_parser(commands)
    explain.add_parser(commands)
    profile.add_parser(commands)
    info.add_parsers(commands)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if hasattr(args, "run"):
        return run_command(lambda: args.run(args))
    if args.command == "ops":
        return run_command(_print_ops)
    from .demo import run_demo

    return run_command(lambda: run_demo(args.sizes, args.backend))


def _print_ops() -> int:
    import nbyoc  # noqa: F401 - registers the backends

    from .catalog import op_table

    print(op_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
