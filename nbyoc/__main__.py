"""Command line: ``python -m nbyoc demo``, ``python -m nbyoc ops`` (see ``--help``)."""

from __future__ import annotations

import argparse
import sys

from ._version import __version__


def main(argv=None) -> int:
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
    args = parser.parse_args(argv)
    if args.command == "ops":
        import nbyoc  # noqa: F401 - registers the backends

        from .catalog import op_table

        print(op_table())
        return 0
    from .demo import run_demo

    return run_demo(args.sizes, args.backend)


if __name__ == "__main__":
    sys.exit(main())
