"""Simulation output: the long CSV, a summary laid out like the FGD paper's table, a plot."""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

CSV_COLUMNS: Final = (
    "workload",
    "policy",
    "seed",
    "x",
    "alloc_pct",
    "unalloc_pct",
    "frag_amount_pct",
    "frag_ratio_pct",
    "n_events",
    "failed_cpu",
    "failed_share",
    "failed_1gpu",
    "failed_multi",
)
SUMMARY_POINTS: Final = (100, 130)


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _fmt(row[k]) for k in CSV_COLUMNS})


def _fmt(value: Any) -> Any:
    return f"{value:.4f}" if isinstance(value, float) else value


def unallocated(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, int], list[float]]:
    """``(workload, policy, x)`` → U at x of every seed, for the summary points."""
    out: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for row in rows:
        if row["x"] in SUMMARY_POINTS:
            out[(row["workload"], row["policy"], row["x"])].append(float(row["unalloc_pct"]))
    return out


def summary(
    rows: Sequence[Mapping[str, Any]], policies: Sequence[str], workloads: Sequence[str]
) -> str:
    """A Markdown table per summary point: workloads × policies, mean ± sd of U over seeds."""
    values = unallocated(rows)
    parts = []
    for point in SUMMARY_POINTS:
        parts.append(f"Unallocated GPU % at arrived = {point} % (mean ± sd over seeds)\n")
        parts.append("| workload | " + " | ".join(policies) + " |")
        parts.append("|---|" + "---|" * len(policies))
        for workload in workloads:
            cells = []
            for policy in policies:
                seeds = values.get((workload, policy, point), [])
                cells.append(_mean_sd(seeds))
            parts.append(f"| {workload} | " + " | ".join(cells) + " |")
        parts.append("")
    parts.append("Failed pods up to arrived = 130 % (mean over seeds): CPU-only / GPU pods\n")
    parts.append("| workload | " + " | ".join(policies) + " |")
    parts.append("|---|" + "---|" * len(policies))
    failed = _failed_at_end(rows)
    for workload in workloads:
        cells = []
        for policy in policies:
            runs = failed.get((workload, policy), [])
            if not runs:
                cells.append("–")
                continue
            cpu = statistics.mean(r[0] for r in runs)
            gpu = statistics.mean(r[1] for r in runs)
            cells.append(f"{cpu:.0f} / {gpu:.0f}")
        parts.append(f"| {workload} | " + " | ".join(cells) + " |")
    parts.append("")
    return "\n".join(parts)


def _failed_at_end(
    rows: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(workload, policy) → per seed (failed CPU-only pods, failed GPU pods) at the last x."""
    last: dict[tuple[str, str, Any], Mapping[str, Any]] = {}
    for row in rows:
        key = (row["workload"], row["policy"], row["seed"])
        if key not in last or int(row["x"]) > int(last[key]["x"]):
            last[key] = row
    out: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for (workload, policy, _), row in last.items():
        gpu = sum(int(row[f"failed_{c}"]) for c in ("share", "1gpu", "multi"))
        out[(workload, policy)].append((int(row["failed_cpu"]), gpu))
    return out


def _mean_sd(values: Sequence[float]) -> str:
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {sd:.2f}"


def plot(path: Path, rows: Sequence[Mapping[str, Any]], workloads: Sequence[str]) -> None:
    """PNG: mean unallocated GPU % against arrived workload, one panel per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        curves[(row["workload"], row["policy"])][int(row["x"])].append(float(row["unalloc_pct"]))
    columns = min(len(workloads), 4)
    lines = -(-len(workloads) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4.5 * columns, 3.6 * lines), squeeze=False)
    for ax, workload in zip(axes.flat, workloads, strict=False):
        for (w, policy), by_x in sorted(curves.items()):
            if w != workload:
                continue
            xs = sorted(x for x in by_x if x >= 70)
            ax.plot(xs, [statistics.mean(by_x[x]) for x in xs], label=policy)
        ax.set_title(workload)
        ax.set_xlabel("arrived workload (% of cluster GPUs)")
        ax.set_ylabel("unallocated GPU (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(workloads) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
