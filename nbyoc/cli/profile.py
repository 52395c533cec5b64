"""``nbyoc profile MODEL.onnx``: where the time of an ONNX model goes, region by region
(with its backend) and host op by host op (``Executable.profile``), on random inputs of
the model's dtypes, as a table or JSON.

>>> import argparse
>>> commands = argparse.ArgumentParser(prog="nbyoc").add_subparsers()
>>> add_parser(commands)
>>> args = commands.choices["profile"].parse_args(["m.onnx", "--shapes", "x=1x3", "--json"])
>>> args.shapes, args.repeat, args.json
(['x=1x3'], 10, True)
"""

from __future__ import annotations

import argparse
import json

from .models import add_model_arguments, parse_shapes, read_model, require_fixed_shapes


def add_parser(commands) -> None:
    profile = commands.add_parser(
        "profile",
        help="time each region (with its backend) and host op of an ONNX model on random inputs",
    )
    add_model_arguments(profile)
    profile.add_argument("--repeat", type=int, default=10, help="timed calls (default 10)")
    profile.add_argument("--json", action="store_true", help="print the profile as JSON")
    profile.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import nbyoc
    from nbyoc.testing.inputs import random_inputs

    backends = args.backend or ["llvm"]
    func = read_model(args.model, parse_shapes(args.shapes))
    require_fixed_shapes(func)
    fn = nbyoc.compile(func, backends)
    profile = fn.profile(*random_inputs(func), repeat=args.repeat)
    if args.json:
        print(json.dumps({"model": args.model, "backends": backends, **profile.as_dict()}))
    else:
        print(f"{args.model} on {', '.join(backends)}\n{profile}")
    return 0
