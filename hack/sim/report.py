"""Simulation output: the long CSV, a summary laid out like the FGD paper's table, a plot."""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
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
    "cpu_alloc_pct",
)
SUMMARY_POINTS: Final = (100, 130)
LIMIT_POINT: Final = 100


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


@dataclass(frozen=True, slots=True)
class Column:
    """A policy entry as the summary shows it: its label, policy and rules in force."""

    label: str
    policy: str
    rules: tuple[str, ...]

    @property
    def rules_text(self) -> str:
        return ", ".join(self.rules) or "none"


BASELINE: Final = "fgd"
"""Ratios are to this policy's entries (or, without one, to the first entry's policy)."""


def summary(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[Column],
    workloads: Sequence[str],
    limits: Mapping[str, Sequence[float]] | None = None,
    policy_args: Sequence[str] = (),
) -> str:
    """Markdown: U per summary point (workloads × entries, mean ± sd over seeds; at 100 %
    the limit next to them), ratios to the baseline between entries with the same
    admission rules, each with what those rules cost, and failed pods at the end."""
    values = unallocated(rows)
    trade = trades(rows)
    labels = [c.label for c in columns]
    parts = [
        "Admission rules in force: " + "; ".join(f"{c.label}: {c.rules_text}" for c in columns)
    ]
    if policy_args:
        parts.append("Given to every entry of their policy: " + ", ".join(policy_args))
    parts.append("")
    for point in SUMMARY_POINTS:
        with_limit = limits is not None and point == LIMIT_POINT
        parts.append(f"Unallocated GPU % at arrived = {point} % (mean ± sd over seeds)")
        if with_limit:
            parts.append("limit: the least any add-only policy can leave (an LP bound)")
        parts.append("")
        head = ["workload", *(["limit"] if with_limit else []), *labels]
        parts.append("| " + " | ".join(head) + " |")
        parts.append("|---|" + "---|" * (len(head) - 1))
        for workload in workloads:
            cells = [mean_sd(limits.get(workload, []))] if with_limit and limits else []
            cells += [mean_sd(values.get((workload, label, point), [])) for label in labels]
            parts.append(f"| {workload} | " + " | ".join(cells) + " |")
        parts.append("")
    parts += _ratios(values, trade, columns, workloads)
    parts.append("Failed pods up to arrived = 130 % (mean over seeds): CPU-only / GPU pods\n")
    parts.append("| workload | " + " | ".join(labels) + " |")
    parts.append("|---|" + "---|" * len(labels))
    failed = _failed_at_end(rows)
    for workload in workloads:
        cells = []
        for label in labels:
            runs = failed.get((workload, label), [])
            if not runs:
                cells.append("–")
                continue
            cpu = statistics.mean(r[0] for r in runs)
            gpu = statistics.mean(r[1] for r in runs)
            cells.append(f"{cpu:.0f} / {gpu:.0f}")
        parts.append(f"| {workload} | " + " | ".join(cells) + " |")
    parts.append("")
    return "\n".join(parts)


def _ratios(
    values: Mapping[tuple[str, str, int], list[float]],
    trade: Mapping[tuple[str, str, int], tuple[float, float]],
    columns: Sequence[Column],
    workloads: Sequence[str],
) -> list[str]:
    """The ratio table: each entry against the baseline entry with the same rules."""
    base_policy = BASELINE if any(c.policy == BASELINE for c in columns) else columns[0].policy
    bases = [c for c in columns if c.policy == base_policy]
    others = [c for c in columns if c.policy != base_policy]
    if not others:
        return []
    points = " / ".join(f"{p} %" for p in SUMMARY_POINTS)
    parts = [
        f"Unallocated GPU % as a ratio to {base_policy}'s at arrived = {points}, only between "
        "entries with the same admission rules; beside it what each side gives for it: "
        f"CPU-only pods refused and CPU allocated % at {points} (mean over seeds)",
        "",
        "| workload | entry | vs | admission rules (both) | ratio | CPU-only pods refused "
        "(entry; vs) | CPU allocated % (entry; vs) |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload in workloads:
        for column in others:
            base = next((b for b in bases if b.rules == column.rules), None)
            if base is None:
                known = "; ".join(f"{b.label}: {b.rules_text}" for b in bases)
                ratio = f"not comparable ({column.rules_text} vs {known})"
                vs, rules = "–", "–"
            else:
                ratio = " / ".join(
                    _ratio(values, workload, column.label, base.label, p) for p in SUMMARY_POINTS
                )
                vs, rules = base.label, column.rules_text
            sides = [column.label] + ([base.label] if base else [])
            refused = "; ".join(_trade(trade, workload, s, 0, "{:.0f}") for s in sides)
            cpu = "; ".join(_trade(trade, workload, s, 1, "{:.1f}") for s in sides)
            parts.append(
                f"| {workload} | {column.label} | {vs} | {rules} | {ratio} | {refused} | {cpu} |"
            )
    parts.append("")
    return parts


def _ratio(
    values: Mapping[tuple[str, str, int], list[float]],
    workload: str,
    label: str,
    base: str,
    point: int,
) -> str:
    mine, theirs = values.get((workload, label, point)), values.get((workload, base, point))
    if not mine or not theirs or not statistics.mean(theirs):
        return "–"
    return f"{statistics.mean(mine) / statistics.mean(theirs):.2f}"


def _trade(
    trade: Mapping[tuple[str, str, int], tuple[float, float]],
    workload: str,
    label: str,
    part: int,
    fmt: str,
) -> str:
    cells = [trade.get((workload, label, p)) for p in SUMMARY_POINTS]
    return " / ".join("–" if c is None else fmt.format(c[part]) for c in cells)


def trades(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, int], tuple[float, float]]:
    """``(workload, policy, x)`` → (CPU-only pods refused so far, CPU allocated %), mean
    over seeds, at the summary points."""
    seen: dict[tuple[str, str, int], list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        if row["x"] in SUMMARY_POINTS:
            key = (row["workload"], row["policy"], row["x"])
            seen[key].append((float(row["failed_cpu"]), float(row["cpu_alloc_pct"])))
    return {
        key: (statistics.mean(v[0] for v in vs), statistics.mean(v[1] for v in vs))
        for key, vs in seen.items()
    }


def speed(per_entry: Mapping[str, Sequence[float]]) -> str:
    lines = [f"- {label}: {sum(v) / len(v):,.0f}" for label, v in per_entry.items() if v]
    return "\nScheduling speed (pods/s on one core, mean over runs)\n\n" + "\n".join(lines) + "\n"


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


def mean_sd(values: Sequence[float]) -> str:
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
