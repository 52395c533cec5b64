"""Summarise a pytest-benchmark JSON file as ratios against a baseline, per group.

    python bench/report.py bench.json

The baseline of a group is its "numpy" case, or its "bare" case. The ratio is
baseline median / case median (above 1: faster than the baseline); the
difference is case median - baseline median.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

BASELINES = ("numpy", "bare")
#: A group with a "copy" case (np.copyto: 2 arrays moved) also gets the memory-bandwidth
#: bound of a kernel moving this many arrays.
BOUND_ARRAYS = {"llvm reference 4096x4096": 5}


def ratios(doc: dict) -> list[tuple[str, str, float, float, float]]:
    """(group, case, median seconds, baseline median / case median, difference in
    seconds) for every case that is not its group's baseline."""
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in doc["benchmarks"]:
        case = bench["name"].split("[")[0].removeprefix("test_")
        params = bench.get("params") or {}  # parametrised cases carry a "case" id
        label = params.get("case", case)
        groups[bench["group"]][label] = bench["stats"]["median"]
    rows = []
    for group, cases in sorted(groups.items()):
        base = next((b for b in BASELINES if b in cases), None)
        for label, median in sorted(cases.items()):
            if base is None:  # nothing to compare with: the time alone
                rows.append((group, label, median, float("nan"), float("nan")))
            elif label != base:
                rows.append((group, label, median, cases[base] / median, median - cases[base]))
    return rows


def bounds(doc: dict) -> list[tuple[str, str, float, float]]:
    """(group, case, bound seconds, case median) for groups listed in BOUND_ARRAYS."""
    medians: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in doc["benchmarks"]:
        name = bench["name"].split("[")[0].removeprefix("test_")
        medians[bench["group"]][name] = bench["stats"]["median"]
    rows = []
    for group, arrays in BOUND_ARRAYS.items():
        cases = medians.get(group, {})
        if "copy" in cases:
            bound = cases["copy"] * arrays / 2
            rows += [(group, c, bound, m) for c, m in cases.items() if c not in ("copy", "numpy")]
    return rows


def slopes(doc: dict) -> list[tuple[str, float, float]]:
    """(group, seconds per node, fixed seconds) fitted over benchmarks with a "nodes" param."""
    points: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for bench in doc["benchmarks"]:
        nodes = (bench.get("params") or {}).get("nodes")
        if nodes is not None:
            points[bench["group"]].append((nodes, bench["stats"]["median"]))
    rows = []
    for group, pts in points.items():
        n = len(pts)
        mx = sum(x for x, _ in pts) / n
        my = sum(y for _, y in pts) / n
        slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
        rows.append((group, slope, my - slope * mx))
    return rows


def main(path: str) -> None:
    with open(path) as f:
        doc = json.load(f)
    machine = doc.get("machine_info", {})
    print(f"machine: {machine.get('cpu', {}).get('brand_raw', '?')}, {machine.get('system', '')}")
    print(f"{'group':<24} {'case':<26} {'median':>11} {'base/case':>10} {'case-base':>11}")
    for group, label, median, ratio, diff in ratios(doc):
        print(
            f"{group:<24} {label:<26} {median * 1e6:>9.1f}us {ratio:>9.2f}x {diff * 1e6:>+9.2f}us"
        )
    for bench in doc["benchmarks"]:
        for key, value in (bench.get("extra_info") or {}).items():
            print(f"{bench['group']}: {bench['name']}: {key} = {value:.3f}")
    for group, per_node, fixed in slopes(doc):
        print(f"{group}: {per_node * 1e6:.2f} us per node, {fixed * 1e6:.2f} us per call")
    for group, label, bound, median in bounds(doc):
        print(
            f"{group}: bound {bound * 1e3:.2f} ms, {label} {median * 1e3:.2f} ms, "
            f"bound/{label} = {bound / median:.2f} (at least 0.8: within 1.25x of the bound)"
        )


if __name__ == "__main__":
    main(sys.argv[1])
