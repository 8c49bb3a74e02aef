"""Turn a pytest-benchmark JSON file into a Markdown table of ratios against HF, and a PNG chart.

Usage: python bench/report.py bench/results.json [--markdown bench/TABLE.md] [--chart bench/speedup.png]

Ratios are `HF median / competitor median` within each workload group, both measured in the same
run: "40x" means the competitor needed 1/40 of HuggingFace's time. Each row names the backend
that served it and whether tokbackend's build was final ("mixed": the rounds span the swap), from
the row's extra_info (bench/served.py); files from before the rows carried them say "not recorded".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections import defaultdict
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _reference(group: str, medians: dict[str, float]) -> str | None:
    for name in ("HF encode", "HF serial", "HF"):
        if name in medians:
            return name
    return None


def load_groups(path: Path) -> tuple[dict, dict[str, dict[str, float]]]:
    data = json.loads(path.read_text())
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for bench in data["benchmarks"]:
        competitor = bench.get("extra_info", {}).get("competitor", bench["name"])
        groups[bench["group"]][competitor] = bench["stats"]["median"]
    return data, dict(groups)


def served_rows(data: dict) -> dict[tuple[str, str], tuple[str, str]]:
    """(group, competitor) -> (the backend that served it, whether the build was final)."""
    found = {}
    for bench in data["benchmarks"]:
        extra = bench.get("extra_info", {})
        final = {True: "yes", False: "no"}.get(extra.get("final"), str(extra.get("final", "not recorded")))
        found[bench["group"], extra.get("competitor", bench["name"])] = (extra.get("backend", "not recorded"), final)
    return found


def markdown(data: dict, groups: dict[str, dict[str, float]]) -> str:
    machine = data.get("machine_info", {})
    when = data.get("datetime", "")[:10]
    # the machine that measured (pytest-benchmark records it), not the one writing the table
    cpu = machine.get("cpu", {})
    python = (
        f"{machine.get('python_implementation', 'CPython')} {machine.get('python_version', platform.python_version())}"
    )
    header = (
        f"Measured {when} on {cpu.get('brand_raw') or _cpu_model()}, {cpu.get('count') or os.cpu_count()} cores "
        f"({python}); "
        "medians, unseen text every round.\n"
    )
    lines = [
        header,
        "| workload | competitor | served by | final build | median ms | vs HF |",
        "|---|---|---|---|---:|---:|",
    ]
    what_served = served_rows(data)
    for group in sorted(groups):
        medians = groups[group]
        reference = _reference(group, medians)
        for competitor, median in sorted(medians.items(), key=lambda item: item[1]):
            ratio = f"{medians[reference] / median:.1f}x" if reference else "n/a"
            backend, final = what_served[group, competitor]
            lines.append(f"| {group} | {competitor} | {backend} | {final} | {median * 1000:.2f} | {ratio} |")
    return "\n".join(lines) + "\n"


def chart(groups: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(group for group in groups if _reference(group, groups[group]))
    competitors = sorted({c for g in names for c in groups[g] if not c.startswith("HF")})
    figure, axes = plt.subplots(figsize=(11, 0.7 * len(names) + 2))
    height = 0.8 / max(1, len(competitors))
    for index, competitor in enumerate(competitors):
        ratios = [
            groups[g][_reference(g, groups[g])] / groups[g][competitor] if competitor in groups[g] else 0 for g in names
        ]
        axes.barh([row + index * height for row in range(len(names))], ratios, height=height, label=competitor)
    axes.set_yticks([row + 0.4 - height / 2 for row in range(len(names))], names)
    axes.set_xlabel("speed-up over HuggingFace (x, higher is better)")
    axes.legend(fontsize="small")
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--markdown", type=Path, default=Path("bench/TABLE.md"))
    parser.add_argument("--chart", type=Path, default=Path("bench/speedup.png"))
    arguments = parser.parse_args()
    data, groups = load_groups(arguments.results)
    table = markdown(data, groups)
    arguments.markdown.write_text(table)
    chart(groups, arguments.chart)
    print(table)


if __name__ == "__main__":
    main()
