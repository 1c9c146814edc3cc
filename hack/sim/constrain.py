"""Make a GPU-model-constrained variant of a pod list.

    python -m hack.sim.constrain IN.csv OUT.csv --share 0.33 --seed 7 [--nodes NODES.csv]

The shared openb pod lists leave ``gpu_spec`` empty, but in production about a third of
the GPU tasks name the GPU models they accept (the upstream trace's README says 33 %).
This writes a copy of ``IN.csv`` in which ``round(share × GPU pods)`` of the GPU pods,
drawn with ``--seed``, get a ``gpu_spec``: one model, or with probability ``--pairs`` two
models joined by ``|`` in name order (``V100M16|V100M32``). Models are drawn from those
present in the node list, weighted by each model's GPU count there, and only among the
models that could host the pod on an empty node (enough GPUs, CPU and memory on one
node), so every constraint can be met. Pods that already carry a ``gpu_spec`` keep it and
count towards the share; CPU-only pods are left alone.

Every other column and row is copied unchanged (a missing ``gpu_spec`` column is added
after ``gpu_milli``). The node list defaults to ``openb_node_list_gpu_node.csv`` next to
``IN.csv``. The same input and seed always give the same file. Exit status 2 with one
line on stderr when an input is unusable.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np

from common.errors import ConfigError
from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim import trace
from hack.sim.trace import TraceError

DEFAULT_NODES: Final = "openb_node_list_gpu_node.csv"
DEFAULT_PAIRS: Final = 0.5


def hosting_models(pod: PodRequest, nodes: Sequence[NodeSpec]) -> set[str]:
    """GPU models with a node that could run ``pod`` when empty."""
    return {
        n.gpu_model
        for n in nodes
        if n.gpu_model and n.gpus >= pod.gpus and n.cpu_m >= pod.cpu_m and n.mem_b >= pod.mem_b
    }


def choose_specs(
    pods: Sequence[PodRequest],
    nodes: Sequence[NodeSpec],
    share: float,
    seed: int,
    pairs: float = DEFAULT_PAIRS,
) -> dict[int, str]:
    """Row index → new ``gpu_spec`` for the pods to constrain."""
    if not 0 <= share <= 1:
        raise ConfigError(f"--share {share}: expected a fraction in [0, 1]")
    if not 0 <= pairs <= 1:
        raise ConfigError(f"--pairs {pairs}: expected a fraction in [0, 1]")
    gpus_of: Counter[str] = Counter()
    for n in nodes:
        if n.gpu_model:
            gpus_of[n.gpu_model] += n.gpus
    gpu_pods = [i for i, p in enumerate(pods) if p.gpus]
    wanted = round(share * len(gpu_pods)) - sum(1 for i in gpu_pods if pods[i].gpu_models)
    open_pods = [i for i in gpu_pods if not pods[i].gpu_models]
    by_size: dict[tuple[int, int, int], list[str]] = {}
    for i in open_pods:
        size = (pods[i].gpus, pods[i].cpu_m, pods[i].mem_b)
        if size not in by_size:
            by_size[size] = sorted(hosting_models(pods[i], nodes))
    hosts = {i: by_size[(pods[i].gpus, pods[i].cpu_m, pods[i].mem_b)] for i in open_pods}
    candidates = [i for i in open_pods if hosts[i]]
    if wanted > len(candidates):
        raise ConfigError(
            f"--share {share}: {wanted} pods to constrain, only {len(candidates)} GPU pods "
            "without a gpu_spec fit a node of some model"
        )
    rng = np.random.default_rng(seed)
    chosen = sorted(int(c) for c in rng.choice(candidates, size=max(wanted, 0), replace=False))
    specs = {}
    for i in chosen:
        models = hosts[i]
        weights = np.array([gpus_of[m] for m in models], dtype=float)
        count = 2 if len(models) > 1 and rng.random() < pairs else 1
        picked = rng.choice(len(models), size=count, replace=False, p=weights / weights.sum())
        specs[i] = "|".join(sorted(models[int(k)] for k in picked))
    return specs


def write_constrained(src: Path, dst: Path, specs: dict[int, str]) -> None:
    """Copy ``src`` to ``dst`` with ``gpu_spec`` of row ``i`` (0-based data row) replaced."""
    with src.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        columns = list(reader.fieldnames or [])
        rows = list(reader)
    if "gpu_spec" not in columns:
        columns.insert(columns.index("gpu_milli") + 1, "gpu_spec")
    for i, spec in specs.items():
        rows[i]["gpu_spec"] = spec
    with dst.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hack.sim.constrain",
        description="Copy a pod list, giving a share of its GPU pods a gpu_spec.",
    )
    parser.add_argument("src", type=Path, metavar="IN.csv", help="pod list to copy")
    parser.add_argument("dst", type=Path, metavar="OUT.csv", help="where to write the copy")
    parser.add_argument("--share", type=float, default=0.33, help="share of GPU pods to constrain")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws")
    parser.add_argument("--pairs", type=float, default=DEFAULT_PAIRS, help="chance of two models")
    parser.add_argument("--nodes", type=Path, help=f"node list (default: {DEFAULT_NODES} by IN)")
    args = parser.parse_args(argv)
    nodes_path = args.nodes or args.src.parent / DEFAULT_NODES
    try:
        if args.seed < 0:
            raise ConfigError(f"--seed {args.seed}: expected a number >= 0")
        if args.dst.resolve() == args.src.resolve():
            raise ConfigError(f"{args.dst}: would overwrite the input")
        pods = trace.load_pods(args.src)
        nodes = trace.load_nodes(nodes_path)
        if not any(n.gpus and n.gpu_model for n in nodes):
            raise TraceError(f"{nodes_path}: no node has a GPU with a model name")
        specs = choose_specs(pods, nodes, args.share, args.seed, args.pairs)
        write_constrained(args.src, args.dst, specs)
    except (ConfigError, TraceError, OSError) as e:
        print(f"constrain: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
