"""``nbyoc info``: what this machine gives nbyoc (``nbyoc.show_config``); ``nbyoc cache
info|clear|prune --older-than DAYS``: the compiled-code cache."""

from __future__ import annotations

import argparse
import json

from ..errors import NbyocError


def add_parsers(commands) -> None:
    info = commands.add_parser(
        "info", help="versions, the CPU and its vector features, threads, cache, C compiler"
    )
    info.add_argument("--json", action="store_true", help="print it as JSON")
    info.set_defaults(run=run_info)
    store = commands.add_parser("cache", help="the cache of compiled code: info, clear, prune")
    actions = store.add_subparsers(dest="action", required=True)
    shown = actions.add_parser("info", help="where it is, entries and size")
    shown.add_argument("--json", action="store_true", help="print it as JSON")
    actions.add_parser("clear", help="delete every entry")
    prune = actions.add_parser("prune", help="delete entries not used for a while")
    prune.add_argument(
        "--older-than", required=True, metavar="DAYS", type=_days,
        help="entries not written or read for this many days (fractions allowed)",
    )  # fmt: skip
    store.set_defaults(run=run_cache)


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not days >= 0:
        raise argparse.ArgumentTypeError(f"a number of days >= 0, got {text!r}")
    return days


def run_info(args: argparse.Namespace) -> int:
    from ..config import show_config

    show_config(as_json=args.json)
    return 0


def run_cache(args: argparse.Namespace) -> int:
    from .. import cache

    if args.action == "info":
        data = cache.info()
        if args.json:
            print(json.dumps(data, indent=1))
        else:
            state = "on" if data["enabled"] else "off (NBYOC_CACHE=0)"
            print(f"{data['directory']}: {data['entries']} entries, "
                  f"{data['bytes'] / 2**20:.1f} MiB, {state}")  # fmt: skip
    elif args.action == "clear":
        print(f"cleared {cache.clear() / 2**20:.1f} MiB from {cache.cache_dir()}")
    elif args.action == "prune":
        done = cache.prune(args.older_than * 86400)
        print(f"removed {done['entries']} entries ({done['bytes'] / 2**20:.1f} MiB) unused for "
              f"{args.older_than:g} days from {cache.cache_dir()}")  # fmt: skip
    else:  # (argparse allows only the three)
        raise NbyocError(f"unknown cache action {args.action!r}")
    return 0
