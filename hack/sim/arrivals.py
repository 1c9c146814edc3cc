"""The arrival sequence of one (workload, seed): shuffled, inflated, with node ranks.

As the FGD authors' simulator does it (``SortClusterPods``, ``TunePodsByNodeTotalResource``,
node renaming): pods in name order are shuffled; while the total GPU request is below
``ratio`` × cluster GPUs, a uniformly drawn original pod is cloned onto the end (the draw
that would overshoot, judged by its *per-GPU* milli, stops it); if above, random pods are
removed. Each node gets a random rank that breaks score ties. Every policy replays the
same sequence and ranks, so their comparison is paired.

Python cannot reproduce Go's random streams, so seeds give other sequences than the
authors' runs; comparisons with their numbers are statistical over seeds. For an exact
check, :func:`load_reference` reads their logged sequence and ranks.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.state.cluster import NodeSpec
from coordinator.state.podrequest import PodRequest
from hack.sim.trace import MIB, TraceError

INFLATION: Final = 1.3


@dataclass(frozen=True, slots=True)
class Arrivals:
    pods: list[PodRequest]
    rank: npt.NDArray[np.int64]


def build(
    workload: Sequence[PodRequest],
    nodes: Sequence[NodeSpec],
    seed: int,
    ratio: float = INFLATION,
) -> Arrivals:
    rng = np.random.default_rng(seed)
    original = sorted(workload, key=lambda p: p.name)
    sequence = [original[i] for i in rng.permutation(len(original))]
    target = ratio * sum(n.gpus for n in nodes) * 1000
    total = sum(p.gpu_total_milli for p in sequence)
    clones = 0
    # CPU-only clones add nothing and never stop the loop, so a workload without GPU pods
    # (or without pods) is not inflated at all.
    inflatable = any(p.gpus for p in original)
    while inflatable and total < target:
        pod = original[int(rng.integers(len(original)))]
        if total + pod.gpu_milli > target:
            break
        sequence.append(dataclasses.replace(pod, name=f"{pod.name}-tuned-{clones}"))
        total += pod.gpu_total_milli
        clones += 1
    while total > target:
        total -= sequence.pop(int(rng.integers(len(sequence)))).gpu_total_milli
    return Arrivals(sequence, rng.permutation(len(nodes)).astype(np.int64))


def load_reference(arrivals_csv: Path, rank_csv: Path, nodes: Sequence[NodeSpec]) -> Arrivals:
    """A logged arrival order and node ranks (the authors' simulator's own run)."""
    with arrivals_csv.open(newline="") as f:
        pods = [
            PodRequest(
                row["pod"],
                int(row["cpu_milli"]),
                int(row["memory_mib"]) * MIB,
                int(row["num_gpu"]),
                int(row["gpu_milli"]) if int(row["num_gpu"]) else 0,
                frozenset(m for m in row["gpu_spec"].split("|") if m),
            )
            for row in csv.DictReader(f)
        ]
    with rank_csv.open(newline="") as f:
        by_name = {row["node"]: int(row["rank"]) for row in csv.DictReader(f)}
    try:
        rank = np.array([by_name[n.name] for n in nodes], dtype=np.int64)
    except KeyError as e:
        raise TraceError(f"{rank_csv}: no rank for node {e.args[0]}") from e
    return Arrivals(pods, rank)
