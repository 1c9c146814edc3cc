"""``stowage sim``: replay node and pod lists under several policies and seeds.

    stowage sim --nodes nodes.csv --pods pods.csv \\
                --policies best-fit,fgd,stowage,stowage:reserve_gpu_cpu=true \\
                --seeds 42-51 --out results/

A policy entry is a name, optionally with arguments (``NAME:KEY=VALUE:KEY=VALUE``, each
value a YAML scalar), so one run compares a policy with itself under other arguments; the
whole entry labels its results.

Seeds run in parallel processes. Writes ``results.csv`` (one row per workload, policy,
seed and arrived-workload point), ``summary.md`` (unallocated GPU at 100 % and 130 %
arrived, mean ± sd per policy — also printed) and ``unallocated.png``.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from common.errors import ConfigError
from coordinator.scoring import registry
from coordinator.scoring.base import Policy
from coordinator.scoring.fragmentation import Fragmentation, typical_shapes
from hack.sim import arrivals, replay, report, trace
from hack.sim.trace import TraceError


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not _digits(lo) or (sep and not _digits(hi)):
            raise ConfigError(f"--seeds {text!r}: expected numbers and ranges like 42-51")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ConfigError(f"--seeds {text!r}: range {part.strip()} is backwards")
        seeds.extend(range(first, last + 1))
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {text!r}: a seed is listed twice")
    return seeds


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def parse_policy(entry: str) -> tuple[str, dict[str, Any]]:
    """``NAME[:KEY=VALUE…]`` → the policy name and its raw arguments (``true`` → True,
    ``0.3`` → 0.3); the registry then checks the arguments strictly."""
    name, *pairs = (part.strip() for part in entry.split(":"))
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or not key or not value:
            raise ConfigError(f"--policies {entry!r}: expected NAME:KEY=VALUE, got {pair!r}")
        if key in args:
            raise ConfigError(f"--policies {entry!r}: argument {key!r} is given twice")
        try:
            args[key] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise ConfigError(f"--policies {entry!r}: {key}: not a YAML value") from e
    return name, args


def build_policy(entry: str, context: registry.PolicyContext | None = None) -> Policy:
    """The policy a ``--policies`` entry names, built with the entry's arguments."""
    name, args = parse_policy(entry)
    return registry.build_policy(name, args, context)


def workload_name(path: Path) -> str:
    return path.stem.removeprefix("openb_pod_list_")


@cache
def _nodes(path: Path) -> list[Any]:
    return trace.load_nodes(path)


@cache
def _pods(path: Path) -> list[Any]:
    return trace.load_pods(path)


@cache
def _measure(path: Path) -> Fragmentation:
    return Fragmentation(typical_shapes(_pods(path)))


@cache
def _arrivals(nodes: Path, pods: Path, seed: int) -> arrivals.Arrivals:
    return arrivals.build(_pods(pods), _nodes(nodes), seed)


def simulate(nodes: Path, pods: Path, policy: str, seed: int) -> tuple[list[dict[str, Any]], float]:
    """One run in a worker process: its binned rows and pods scheduled per second."""
    node_specs = _nodes(nodes)
    workload = _pods(pods)
    built = build_policy(policy, registry.PolicyContext(workload, seed))
    sequence = _arrivals(nodes, pods, seed)
    events = replay.run(node_specs, sequence, built, _measure(pods))
    total = sum(n.gpus for n in node_specs) * 1000
    meta = {"workload": workload_name(pods), "policy": policy, "seed": seed}
    rows = [{**meta, **row} for row in replay.binned(events, total)]
    return rows, len(sequence.pods) / events.seconds


def main(args: argparse.Namespace) -> int:
    try:
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        if not policies:
            raise ConfigError("--policies is empty")
        if len(set(policies)) != len(policies):
            raise ConfigError(f"--policies {args.policies!r}: a policy is listed twice")
        for policy in policies:
            build_policy(policy)  # an unknown name or argument fails here, before any work
        seeds = parse_seeds(args.seeds)
        if not sum(n.gpus for n in _nodes(args.nodes)):
            raise TraceError(f"{args.nodes}: no node has a GPU")
        names = [workload_name(p) for p in args.pods]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(f"--pods: two pod lists give the workload name {twice[0]!r}")
        for pods in args.pods:
            _pods(pods)
        args.out.mkdir(parents=True, exist_ok=True)
    except (ConfigError, TraceError, OSError) as e:
        print(f"stowage sim: error: {e}", file=sys.stderr)
        return 2
    tasks = [(args.nodes, pods, p, s) for pods in args.pods for p in policies for s in seeds]
    rows: list[dict[str, Any]] = []
    speed: dict[str, list[float]] = {p: [] for p in policies}
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(simulate, *task): task for task in tasks}
        for future in _progress(as_completed(futures), len(futures)):
            result, pods_per_s = future.result()
            rows.extend(result)
            speed[futures[future][2]].append(pods_per_s)
    rows.sort(key=lambda r: (r["workload"], policies.index(r["policy"]), r["seed"], r["x"]))
    workloads = [workload_name(p) for p in args.pods]
    report.write_csv(args.out / "results.csv", rows)
    text = report.summary(rows, policies, workloads)
    text += "\nScheduling speed (pods/s on one core, mean over runs)\n\n"
    text += "\n".join(f"- {p}: {sum(v) / len(v):,.0f}" for p, v in speed.items() if v) + "\n"
    (args.out / "summary.md").write_text(text)
    print(text)
    if not args.no_plot:
        report.plot(args.out / "unallocated.png", rows, workloads)
    return 0


def _progress(items: Any, total: int) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, total=total, unit="run", file=sys.stderr, disable=None)
