"""Summarise a pytest-benchmark JSON file as ratios against NumPy, per group.

    python bench/report.py bench.json

A ratio above 1 means nbyoc is faster than NumPy in that group (medians).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def ratios(doc: dict) -> list[tuple[str, str, float, float]]:
    """(group, case, median seconds, NumPy median / case median) for every non-NumPy case."""
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in doc["benchmarks"]:
        case = bench["name"].split("[")[0].removeprefix("test_")
        params = bench.get("params") or {}
        label = "/".join([case, *(str(v) for k, v in params.items() if k != "reference_inputs")])
        groups[bench["group"]][label] = bench["stats"]["median"]
    rows = []
    for group, cases in sorted(groups.items()):
        baseline = cases.get("numpy")
        for label, median in sorted(cases.items()):
            if label != "numpy" and baseline:
                rows.append((group, label, median, baseline / median))
    return rows


def main(path: str) -> None:
    with open(path) as f:
        doc = json.load(f)
    machine = doc.get("machine_info", {})
    print(f"machine: {machine.get('cpu', {}).get('brand_raw', '?')}, {machine.get('system', '')}")
    print(f"{'group':<24} {'case':<20} {'median':>10} {'numpy/case':>11}")
    for group, label, median, ratio in ratios(doc):
        print(f"{group:<24} {label:<20} {median * 1e6:>8.1f}us {ratio:>10.2f}x")


if __name__ == "__main__":
    main(sys.argv[1])
