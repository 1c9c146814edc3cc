"""The MIG replay: openb's pods as MIG instances (:mod:`hack.sim.migtrace`), packed by
FGD's plain GPU-share view and by FGD over MIG fragmentation, on the same arrivals.

Partitioning is **dynamic**: a pod's instance is created where the policy puts it, at an
allowed start on free slices (what a MIG manager that repartitions on demand does), and
pods never leave. With a fixed partition there would be nothing to place: packing would
be counting instances of a plan made in advance, and fragmentation would be that plan's
doing, not the scheduler's. Dynamic partitioning is where the placement rule bites, and
where a scheduler that ignores it strands slices.

Both policies filter alike (CPU, memory, and room for the instances under the placement
rule) and break ties by the same node rank; they differ only in what they score:

* ``fgd`` (the baseline): FGD as it is, each GPU's free compute slices seen as free
  milli-GPU (1000/7 a slice) and each pod as its profile's share; its instance goes on the
  device FGD picks among those where the profile has a free start, at the lowest start;
* ``fgd-mig``: FGD's score of the increase in MIG fragmentation
  (:mod:`coordinator.scoring.mig.fragmentation`), the instances where they raise it least.

Arrivals are the simulator's (:func:`hack.sim.arrivals.build`: the openb pods shuffled
and inflated to 130 % of the cluster's GPUs by their shares, node ranks drawn), then each
pod is converted. The result is read when the sequence ends, the cluster full: the share
of compute slices left unallocated, and the GPU pods that found no node.

``python -m hack.sim.migreplay --seeds 1,2,3,4,5`` prints the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from coordinator.scoring.fragmentation import Fragmentation, Shape, most_common
from coordinator.scoring.mig.fragmentation import (
    MILLI_PER_SLICE,
    MigFragmentation,
    MigShape,
    best_choice,
    typical,
)
from coordinator.scoring.mig.profiles import COMPUTE_SLICES
from coordinator.scoring.mig.slices import EMPTY, Gpu, free_compute, free_starts, take
from coordinator.scoring.policies.fgd import sigmoid_score
from coordinator.state.cluster import NodeSpec
from hack.sim import arrivals
from hack.sim.migtrace import GEOMETRY, MigPod, mig_pods
from hack.sim.trace import DEFAULT_NODES, DEFAULT_PODS, load_nodes, load_pods

POLICIES: Final = ("fgd", "fgd-mig")
INFEASIBLE: Final = -1.0

Chooser = Callable[[int, tuple[Gpu, ...], MigPod], "tuple[int, tuple[Gpu, ...]] | None"]
"""(free CPU, the node's GPUs sorted, pod) → (score, the GPUs afterwards), or None where
the instances do not fit."""


def share_milli(slices: int) -> int:
    """Compute slices as FGD's milli-GPU (the same rounding for requests and free room, so
    ``share_milli(a) >= share_milli(b)`` exactly when ``a >= b``)."""
    return round(slices * MILLI_PER_SLICE)


def share_view(pods: Sequence[MigPod]) -> Chooser:
    """FGD over free shares: the baseline."""
    shapes = Counter(
        Shape(p.cpu_m, share_milli(p.profile.compute), p.count)
        for p in pods
        if p.profile is not None
    )
    frag = Fragmentation(most_common(shapes))

    def milli(gpus: Sequence[Gpu]) -> tuple[int, ...]:
        return tuple(share_milli(free_compute(g)) for g in gpus)

    def choose(
        cpu_free: int, gpus: tuple[Gpu, ...], pod: MigPod
    ) -> tuple[int, tuple[Gpu, ...]] | None:
        profile = pod.profile
        assert profile is not None
        if cpu_free < pod.cpu_m:
            return None
        before = frag.node(cpu_free, milli(gpus), "")
        state = list(gpus)
        after = before
        for _ in range(pod.count):
            best: tuple[float, int] | None = None
            tried: set[int] = set()
            for d, g in enumerate(state):
                free = free_compute(g)
                if free in tried or not free_starts(profile, g):
                    continue
                tried.add(free)
                trial = state[:d] + [(g[0], g[1] + profile.compute)] + state[d + 1 :]
                value = frag.node(cpu_free - pod.cpu_m, milli(trial), "")
                if best is None or value < best[0]:
                    best = (value, d)
            if best is None:
                return None
            after, d = best
            state[d] = take(profile, state[d], free_starts(profile, state[d])[0])
        return sigmoid_score(after - before), tuple(sorted(state))

    return choose


def mig_view(pods: Sequence[MigPod]) -> Chooser:
    """FGD over MIG fragmentation."""
    frag = MigFragmentation(
        GEOMETRY,
        typical(MigShape(p.cpu_m, p.profile.name, p.count) for p in pods if p.profile is not None),
    )

    def choose(
        cpu_free: int, gpus: tuple[Gpu, ...], pod: MigPod
    ) -> tuple[int, tuple[Gpu, ...]] | None:
        assert pod.profile is not None
        found = best_choice(frag, cpu_free, pod.cpu_m, gpus, pod.profile, pod.count)
        return None if found is None else (found.score, tuple(sorted(found.gpus)))

    return choose


@dataclass(frozen=True, slots=True)
class Result:
    policy: str
    workload: str
    seed: int
    unallocated_pct: float
    """Compute slices left unallocated at the end, % of the cluster's."""
    unallocated_at_100_pct: float
    """The same when the slices arrived pods asked for first reach the cluster's."""
    failed_gpu_pods: int
    gpu_pods: int
    demand_pct: float
    """Compute slices the GPU pods asked for, % of the cluster's."""
    seconds: float


def replay(
    nodes: Sequence[NodeSpec], pods: Sequence[MigPod], rank: np.ndarray, policy: str
) -> Result:
    """Place every pod once, in order, by ``policy``; pods with no GPU take CPU and memory
    from the first node by rank with room for them."""
    chooser = (share_view if policy == "fgd" else mig_view)(pods)
    n = len(nodes)
    cpu = np.array([s.cpu_m for s in nodes], dtype=np.int64)
    mem = np.array([s.mem_b for s in nodes], dtype=np.int64)
    gpus: list[tuple[Gpu, ...]] = [(EMPTY,) * s.gpus for s in nodes]
    version = np.zeros(n, dtype=np.int64)
    columns: dict[tuple[int, str, int], tuple[np.ndarray, np.ndarray, list]] = {}
    order = np.argsort(rank, kind="stable")
    failed = gpu_pods = asked = used = 0
    total = COMPUTE_SLICES * sum(s.gpus for s in nodes)
    at_full: float | None = None
    started = time.process_time()
    for pod in pods:
        room = mem >= pod.mem_b
        if pod.profile is None:
            fits = np.flatnonzero(room[order] & (cpu[order] >= pod.cpu_m))
            if len(fits):
                i = int(order[fits[0]])
                cpu[i] -= pod.cpu_m
                mem[i] -= pod.mem_b
                version[i] += 1
            continue
        gpu_pods += 1
        asked += pod.profile.compute * pod.count
        if at_full is None and asked >= total:
            at_full = 100 * (total - used) / total
        key = (pod.cpu_m, pod.profile.name, pod.count)
        if key not in columns:
            columns[key] = (np.full(n, INFEASIBLE), np.full(n, -1, dtype=np.int64), [None] * n)
        scores, seen, after = columns[key]
        for i in np.flatnonzero(seen != version).tolist():
            found = chooser(int(cpu[i]), gpus[i], pod) if gpus[i] else None
            scores[i], after[i] = (INFEASIBLE, None) if found is None else found
            seen[i] = version[i]
        ranked = np.where(room, scores, INFEASIBLE)
        best = ranked.max()
        if best == INFEASIBLE:
            failed += 1
            continue
        tied = np.flatnonzero(ranked == best)
        i = int(tied[np.argmin(rank[tied])])
        gpus[i] = after[i]
        used += pod.profile.compute * pod.count
        cpu[i] -= pod.cpu_m
        mem[i] -= pod.mem_b
        version[i] += 1
    seconds = time.process_time() - started
    free = sum(free_compute(g) for node in gpus for g in node)
    return Result(
        policy,
        "",
        -1,
        100 * free / total,
        at_full if at_full is not None else float("nan"),
        failed,
        gpu_pods,
        100 * asked / total,
        seconds,
    )


WORKLOADS: Final = ("all", "share")
"""``all``: every openb pod (whole-GPU pods as 7g instances); ``share``: only the pods that
share a GPU, the ones MIG would split GPUs for (inflated to 130 % by themselves)."""


def run(nodes_csv: Path, pods_csv: Path, seeds: Sequence[int]) -> list[Result]:
    """Both policies on both workloads, every seed, on the same arrivals per seed."""
    nodes = load_nodes(nodes_csv)
    openb = load_pods(pods_csv)
    out = []
    for workload in WORKLOADS:
        chosen = openb if workload == "all" else [p for p in openb if p.sharing]
        for seed in seeds:
            sequence = arrivals.build(chosen, nodes, seed)
            pods = mig_pods(sequence.pods)
            for policy in POLICIES:
                result = replay(nodes, pods, sequence.rank, policy)
                out.append(dataclasses.replace(result, workload=workload, seed=seed))
    return out


def table(results: Sequence[Result]) -> str:
    """Markdown: per workload and policy, unallocated compute slices when the slices asked
    for reach the cluster's and at the end, and failed GPU pods; mean ± sd over seeds."""
    lines = [
        "| workload | policy | unallocated slices % at asked = 100 % | at the end"
        " | failed GPU pods % | asked (slices %) | CPU s a run |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload in WORKLOADS:
        for policy in POLICIES:
            runs = [r for r in results if r.policy == policy and r.workload == workload]
            if not runs:
                continue
            cells = [
                _mean_sd([r.unallocated_at_100_pct for r in runs]),
                _mean_sd([r.unallocated_pct for r in runs]),
                _mean_sd([100 * r.failed_gpu_pods / max(r.gpu_pods, 1) for r in runs]),
                f"{statistics.mean(r.demand_pct for r in runs):.0f}",
                f"{statistics.mean(r.seconds for r in runs):.1f}",
            ]
            lines.append(f"| {workload} | {policy} | " + " | ".join(cells) + " |")
    seeds = sorted({r.seed for r in results})
    lines.append(f"\nSeeds {', '.join(map(str, seeds))}; both policies on the same arrivals.")
    return "\n".join(lines)


def _mean_sd(values: Sequence[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f}" if values else "–"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=Path, default=DEFAULT_NODES)
    parser.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    print(table(run(args.nodes, args.pods, seeds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
