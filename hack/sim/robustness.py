"""The robustness table: fgd against stowage on every shared workload and on GPU-model
constrained variants of the default one, worst ratio first.

    python -m hack.sim.robustness --out DIR --seeds 42-51 --jobs 2 \\
        [--workloads default,cpu250] [--families uniform,concentrated] \\
        [--fractions 0.05,0.15,0.25,0.35] [--admission RULE] [--policy-arg P.K=V]

Every shared workload (``openb_pod_list_*.csv`` in ``--trace``) runs as it is; for each
constraint family of :mod:`hack.sim.constrain` and each fraction, the default workload gets
that share of its GPU pods constrained, drawn for seed s with generator seed s and replayed
with seed s (the files go to ``DIR/workloads/``). Both policies run under the same
admission rules (``--admission`` applies to both; a ``--policy-arg`` that switches a rule
on one side only is refused). ``DIR/robustness.md`` has, per workload, U at x = 100 and
x = 130 (mean ± sd over seeds), the ratios, the seeds where stowage is at most fgd, the
limit no add-only policy can beat and the CPU-only pods refused — sorted by the ratio at
x = 100, worst first — headed by the exact command; ``DIR/results.csv`` every binned row.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from common.errors import ConfigError
from coordinator.scoring import admission
from hack.sim import constrain, report, trace
from hack.sim.main import Entry, Run, execute, parse_entries, parse_seeds, workload_name
from hack.sim.trace import TraceError

BASE_WORKLOAD: Final = "default"
DEFAULT_FRACTIONS: Final = "0.05,0.15,0.25,0.35"
POLICIES: Final = "fgd,stowage"


def parse_fractions(text: str) -> list[float]:
    try:
        fractions = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--fractions {text!r}: expected numbers like 0.05,0.15") from None
    if not fractions or not all(0 < f <= 1 for f in fractions):
        raise ConfigError(f"--fractions {text!r}: expected fractions in (0, 1]")
    return fractions


def _names(text: str | None, known: Sequence[str], what: str) -> list[str]:
    if text is None:
        return list(known)
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ConfigError(f"--{what} {text!r}: known: {', '.join(known)}")
    return names


def constrained_label(family: str, fraction: float) -> str:
    return f"{BASE_WORKLOAD}, {family} {100 * fraction:g} %"


def generate(
    trace_dir: Path,
    out: Path,
    families: Sequence[str],
    fractions: Sequence[float],
    seeds: Sequence[int],
) -> dict[tuple[str, int], Path]:
    """Write each constrained workload per seed; (label, seed) → its file."""
    src = trace_dir / f"openb_pod_list_{BASE_WORKLOAD}.csv"
    pods, nodes = trace.load_pods(src), trace.load_nodes(trace_dir / trace.OPENB_GPU_NODES)
    (out / "workloads").mkdir(parents=True, exist_ok=True)
    files = {}
    for family in families:
        for fraction in fractions:
            for seed in seeds:
                dst = (
                    out
                    / "workloads"
                    / f"{BASE_WORKLOAD}-{family}-{100 * fraction:g}pct-seed{seed}.csv"
                )
                specs = constrain.choose_specs(pods, nodes, fraction, seed, family=family)
                constrain.write_constrained(src, dst, specs)
                files[(constrained_label(family, fraction), seed)] = dst
    return files


def table(
    rows: Sequence[Mapping[str, Any]],
    workloads: Sequence[str],
    limits: Mapping[str, Sequence[float]],
    fgd: str,
    stowage: str,
) -> list[str]:
    """The Markdown table lines, worst ratio at x = 100 first."""
    values = report.unallocated(rows)
    trade = report.trades(rows)
    lines = []
    for workload in workloads:
        f100, s100 = values.get((workload, fgd, 100), []), values.get((workload, stowage, 100), [])
        f130, s130 = values.get((workload, fgd, 130), []), values.get((workload, stowage, 130), [])
        ratio = _ratio(s100, f100)
        wins = sum(s <= f for s, f in zip(s100, f100, strict=True))
        refused = "; ".join(
            f"{trade[(workload, p, 130)][0]:.0f}" if (workload, p, 130) in trade else "–"
            for p in (fgd, stowage)
        )
        cells = [
            workload,
            report.mean_sd(f100),
            report.mean_sd(s100),
            "–" if ratio is None else f"**{ratio:.2f}**",
            report.mean_sd(f130),
            report.mean_sd(s130),
            "–" if _ratio(s130, f130) is None else f"{_ratio(s130, f130):.2f}",
            report.mean_sd(limits.get(workload, [])),
            f"{wins}/{len(s100)}",
            refused,
        ]
        lines.append((-(ratio if ratio is not None else -1.0), "| " + " | ".join(cells) + " |"))
    head = (
        "| workload | fgd U@100 | stowage U@100 | stowage / fgd | fgd U@130 | stowage U@130 "
        "| ratio @130 | limit @100 | seeds stowage ≤ fgd | CPU-only pods refused by 130 % "
        "(fgd; stowage) |"
    )
    return [head, "|---" * 10 + "|", *(line for _, line in sorted(lines, key=lambda x: x[0]))]


def _ratio(mine: Sequence[float], theirs: Sequence[float]) -> float | None:
    if not mine or not theirs or not statistics.mean(theirs):
        return None
    return statistics.mean(mine) / statistics.mean(theirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hack.sim.robustness",
        description=" ".join(__doc__.split("\n\n", 1)[0].split()),
    )
    add = parser.add_argument
    add("--out", type=Path, required=True, help="output directory")
    add("--seeds", default="42-51", help="seeds: 42-51, or 42,43,50")
    add("--jobs", type=int, default=2, help="parallel processes")
    add(
        "--trace",
        type=Path,
        default=trace.OPENB,
        help="directory of the openb lists (default: the shipped one: the default workload)",
    )
    add("--workloads", help="comma list of shared workloads (default: every one in --trace)")
    add("--families", help="comma list of constraint families (default: every one)")
    add("--fractions", default=DEFAULT_FRACTIONS, help="shares of GPU pods to constrain")
    add("--admission", action="append", metavar="RULE", help="admission rule for both sides")
    add("--policy-arg", action="append", metavar="POLICY.KEY=VALUE", help="as in stowage sim")
    add("--progress", action="store_const", const=True, help="show the bar off a terminal")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "hack.sim.robustness", *(argv or sys.argv[1:])])
    try:
        seeds = parse_seeds(args.seeds)
        fractions = parse_fractions(args.fractions)
        shared = sorted(workload_name(p) for p in args.trace.glob("openb_pod_list_*.csv"))
        workloads = _names(args.workloads, shared, "workloads")
        families = _names(args.families, list(constrain.FAMILIES), "families")
        fgd, stowage = parse_entries(POLICIES, args.policy_arg or (), args.admission or ())
        rules = [admission.in_force(e.build()) for e in (fgd, stowage)]
        if rules[0] != rules[1]:
            raise ConfigError(
                f"fgd and stowage must run under the same admission rules (fgd: "
                f"{', '.join(rules[0]) or 'none'}; stowage: {', '.join(rules[1]) or 'none'}); "
                "use --admission"
            )
        nodes = args.trace / trace.OPENB_GPU_NODES
        if not sum(n.gpus for n in trace.load_nodes(nodes)):
            raise TraceError(f"{nodes}: no node has a GPU")
        files = generate(args.trace, args.out, families, fractions, seeds)
    except (ConfigError, TraceError, OSError) as e:
        print(f"robustness: error: {e}", file=sys.stderr)
        return 2
    runs = _runs(args.trace, nodes, workloads, files, (fgd, stowage), seeds)
    outcome = execute(runs, args.jobs, args.progress)
    labels = list(dict.fromkeys(r.workload for r in runs))
    report.write_csv(args.out / "results.csv", outcome.rows)
    text = "\n".join(
        [
            "Robustness: fgd against stowage, unallocated GPU % (mean ± sd over seeds "
            f"{args.seeds}; constrained workloads drawn with generator seed s for replay seed "
            "s), worst ratio first",
            "",
            f"Command: `{command}`",
            f"Admission rules in force on both sides: {', '.join(rules[0]) or 'none'}",
            "",
            *table(outcome.rows, labels, outcome.limits, fgd.label, stowage.label),
            "",
        ]
    )
    (args.out / "robustness.md").write_text(text)
    (args.out / "command.txt").write_text(command + "\n")
    print(text)
    return 0


def _runs(
    trace_dir: Path,
    nodes: Path,
    workloads: Sequence[str],
    files: Mapping[tuple[str, int], Path],
    entries: Sequence[Entry],
    seeds: Sequence[int],
) -> list[Run]:
    runs = [
        Run(nodes, trace_dir / f"openb_pod_list_{w}.csv", w, e, s)
        for w in workloads
        for e in entries
        for s in seeds
    ]
    runs += [Run(nodes, path, label, e, s) for (label, s), path in files.items() for e in entries]
    return runs


if __name__ == "__main__":
    sys.exit(main())
