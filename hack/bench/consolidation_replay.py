"""Consolidation measured on the openb trace replayed with departures: no consolidation,
Stowage's drain planner and a HighNodeUtilization-style descheduler, on the same arrivals
in the same run.

    python -m hack.bench.consolidation_replay [--nodes 60] [--speedup 10] [--every-min 10]
                                              [--seeds 1,2,3] [--pods FILE[,FILE…]]
                                              [--node-list FILE] [--png PATH]

The replay is :mod:`hack.bench.trace_replay`'s (a model: no kube-scheduler — the engine
places every pod with FGD — no controllers, no eviction executor; the feasibility model is
the planner's), on an autoscaled pool:

* **nodes in use**: a node holding a pod. A node left empty (its pods gone or moved) leaves
  the pool at once, as a cluster autoscaler or Karpenter removes an empty node; the planner
  sees it tainted ``ToBeDeletedByClusterAutoscaler:NoSchedule``, as the cluster autoscaler
  taints a node it removes. A pod is placed by FGD among the nodes in use; one that fits on
  none of them brings back the node FGD likes best of the empty ones (scale-up, at once:
  boot time is not modelled); one that fits on no node at all waits pending, tried again
  after every departure and every pass.
* **load**: arrivals at ``creation_time / --speedup``, runtimes as in the trace. Ten times
  faster by default, not the defrag replay's forty: at 40x the 60 nodes fill up and
  hundreds of pods wait at the end, every variant has every node in use and the queue,
  not consolidation, decides; at 10x the busiest moment keeps a few nodes free.
* **passes**: every ``--every-min`` minutes of the replay's clock, from the first arrival
  on:

  - **none**: nothing; only departures empty nodes;
  - **stowage**: the patrol's candidates — nodes in use whose dominant share of CPU,
    memory and GPUs held is under ``patrol.threshold_pct`` (70 %), emptiest first; held,
    not measured: the replay has no usage, and it judges the moment, not a window — given
    to :func:`~coordinator.consolidation.drain.plan_drains` with the shipped
    ``DrainSettings`` (``max_draining`` 1, a 10 % budget, up to ``medium``) and
    ``EvictionSettings`` (at most 10 evictions a cycle, 4 a node, 5 a namespace: every pod
    is in one); each drain's pods moved where the plan says, the drained node freed;
  - **hnu**: the Kubernetes descheduler's HighNodeUtilization, by requests: nodes in use
    under every threshold (CPU, memory and GPU each under 20 % of allocatable, the values of
    the descheduler's example) are the sources; their pods are evicted, emptiest node first,
    while the other nodes' free CPU, memory and GPU summed stay above zero (the descheduler's
    stop, the evicted pods' requests taken off as it goes: with every node underutilised
    there is no other node, and nothing is evicted, as the descheduler's rule has it); no
    planner: each evicted pod is then placed by FGD among the nodes in use before the pass,
    the sources included (the descheduler cordons nothing), and one that fits on none waits
    pending (counted), to be placed as any pending pod is.

  Moves happen at once (no eviction or restart time); a moved pod keeps its departure
  time (the work it loses is not counted). Passes are ten minutes apart by default, longer
  than ``evictions.cooldown_s`` (5 min), so no cooldown is modelled.

Printed per workload, seed and variant: nodes in use (time-weighted mean, and when the last
pod has arrived), nodes added (scale-ups), nodes freed by the passes, GPUs idle on nodes in
use (time-weighted mean: allocated to the cluster, held by no pod), the unallocated-GPU %
of the nodes in use (time-weighted), pods moved, pods moved per node freed, pods left
pending by a move; then the means over the seeds, and one JSON line. A seed draws the
cluster's nodes from the node list and the node rank that breaks FGD's ties; the arrivals
are the list's. ``--png`` charts the nodes in use over time, first seed, per workload.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from coordinator import feasibility
from coordinator.config import DrainSettings, EvictionSettings, PatrolSettings
from coordinator.consolidation.drain import plan_drains
from coordinator.kube.publisher import fullness_pct
from coordinator.state.cluster import NodeSpec, Placement
from coordinator.state.podrequest import PodRequest
from hack.bench import replay_chart
from hack.bench.trace_replay import (
    NOW,
    Series,
    TracePod,
    TraceReplay,
    draw_nodes,
    load_trace,
    node_object,
    seed_table,
)
from hack.sim.trace import DEFAULT_NODES, DEFAULT_PODS, TraceError, load_nodes

VARIANTS: Final = ("none", "stowage", "hnu")
SCALED_DOWN: Final = {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}
"""The taint the cluster autoscaler puts on a node it removes: an empty node's, here."""
HNU_THRESHOLDS: Final = {"cpu": 20.0, "memory": 20.0, "gpu": 20.0}
"""HighNodeUtilization's ``thresholds`` (% of allocatable, by requests): a node under all of
them is underutilised. The descheduler ships no defaults; 20 is its documentation's example
for CPU and memory, taken for ``nvidia.com/gpu`` too."""


@dataclass
class Counts:
    """One variant's counts over one replay, beside :class:`~hack.bench.trace_replay.Usage`."""

    added: int = 0
    """Pods that fit on no node in use and brought an empty node back (scale-ups)."""
    freed: int = 0
    """Nodes a pass left empty."""
    moved: int = 0
    pending_by_move: int = 0
    """Evicted pods that fit on no node in use when they were placed again."""


class Replay(TraceReplay):
    """One variant (:data:`VARIANTS`) over one drawn cluster, a pass every ``every_s``."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        pods: Sequence[TracePod],
        seed: int,
        every_s: float,
        variant: str,
        drain: DrainSettings | None = None,
        evictions: EvictionSettings | None = None,
    ) -> None:
        if not every_s > 0:
            raise ValueError("every_s must be positive")
        if variant not in VARIANTS:
            raise ValueError(f"variant: expected one of {', '.join(VARIANTS)}, got {variant!r}")
        super().__init__(nodes, pods, seed)
        self.every_s = every_s
        self.variant = variant
        self.drain = drain or DrainSettings()
        self.evictions = evictions or EvictionSettings()
        self.patrol_pct = PatrolSettings().threshold_pct
        self.counts = Counts()
        self._scaled_down = {
            n.name: feasibility.node_of(node_object(n, [SCALED_DOWN])) for n in nodes
        }
        self._next_pass = (self.pods[0].arrival_s if self.pods else 0.0) + every_s

    def row(self) -> dict[str, Any]:
        """The counts of the run (call :meth:`run` first)."""
        usage, counts = self.usage, self.counts
        return {
            "nodes_in_use_mean": round(usage.mean_nodes_in_use(), 2),
            "nodes_in_use_end": self.nodes_in_use(),
            "nodes_added": counts.added,
            "nodes_freed": counts.freed,
            "idle_gpus_in_use_mean": round(usage.mean_idle_gpus(), 2),
            "unallocated_in_use_pct": round(usage.unallocated_in_use_pct(), 2),
            "moved": counts.moved,
            "moved_per_freed": round(counts.moved / counts.freed, 2) if counts.freed else None,
            "pending_by_move": counts.pending_by_move,
            "pending_end": len(self.pending),
            "unplaceable": self.unplaceable,
        }

    # ------------------------------------------------------------------ the pool

    def _choose(self, request: PodRequest) -> Placement | None:
        """FGD among the nodes in use; else the empty node it likes best, brought back."""
        placement = self._fgd(request, self.on_node > 0)
        if placement is None:
            placement = self._fgd(request, None)
            self.counts.added += placement is not None
        self.policy.observe(self.state, request, placement)
        return placement

    def _fgd(self, request: PodRequest, among: npt.NDArray[np.bool_] | None) -> Placement | None:
        """FGD's node for the pod among ``among`` (None: any), its room taken."""
        placement = self.engine.choose(request, among)
        if placement is not None:
            self.engine.commit(request, placement)
        return placement

    def node_view(self) -> Mapping[str, feasibility.Node]:
        """The empty nodes tainted as being removed: no planned move may land there."""
        empty = set(np.flatnonzero(self.on_node == 0).tolist())
        names = self.state.names
        return {
            n: self._scaled_down[n] if i in empty else self.node_facts[n]
            for i, n in enumerate(names)
        }

    # ------------------------------------------------------------------ passes

    def _reach(self, at: float) -> None:
        while self._next_pass <= at:
            self._advance(self._next_pass)
            self._pass()
            self._next_pass += self.every_s
        self._advance(at)

    def _depart(self, uid: str) -> None:
        super()._depart(uid)
        self.retry()

    def _pass(self) -> None:
        if self.variant == "stowage":
            self._drain()
        elif self.variant == "hnu":
            self._deschedule()
        self.retry()
        self._note()

    def _drain(self) -> None:
        """The drain planner over the patrol's candidates; each drain carried out."""
        state = self.state
        shares = {
            state.names[i]: max(fullness_pct(state, i).values())
            for i in np.flatnonzero(self.on_node > 0).tolist()
        }
        candidates = sorted(
            (n for n, share in shares.items() if share < self.patrol_pct),
            key=lambda n: (shares[n], n),
        )
        if not candidates:
            return
        plan = plan_drains(self.view(), candidates, self.drain, self.evictions, NOW)
        for drain in plan.drains:
            self.move([(m.uid, m.destination) for m in drain.moves])
            if self.on_node[state.index[drain.node]]:
                raise RuntimeError(f"the drain of {drain.node} left pods on it")
            self.counts.moved += len(drain.moves)
            self.counts.freed += 1

    def _deschedule(self) -> None:
        """HighNodeUtilization: the underutilised nodes' pods evicted while the others have
        room in sum, then placed by FGD alone."""
        state = self.state
        in_use = self.on_node > 0
        rows = np.flatnonzero(in_use).tolist()
        full = {i: fullness_pct(state, i) for i in rows}
        sources = [
            i for i in rows if all(full[i].get(r, 0.0) < t for r, t in HNU_THRESHOLDS.items())
        ]
        targets = [i for i in rows if i not in sources]
        available = [
            sum(int(state.cpu_free[i]) for i in targets),
            sum(int(state.mem_free[i]) for i in targets),
            sum(state.gpu_idle_of(i) for i in targets),
        ]
        sources.sort(key=lambda i: (sum(full[i].values()), state.names[i]))
        on: dict[int, list[str]] = {}
        for uid, (_, placement) in self.placed.items():
            on.setdefault(placement.node, []).append(uid)
        evicted: list[tuple[str, int]] = []
        for i in sources:
            for uid in sorted(on.get(i, ())):
                if min(available) <= 0:
                    break
                k = self.release(uid)
                r = self.pods[k].request
                available[0] -= r.cpu_m
                available[1] -= r.mem_b
                available[2] -= r.gpu_milli * r.gpus
                evicted.append((uid, k))
        for uid, k in evicted:
            request = self.pods[k].request
            placement = self._fgd(request, in_use)
            self.policy.observe(self.state, request, placement)
            if placement is None:
                self.pending[uid] = k
                self.counts.pending_by_move += 1
            else:
                self._bind(uid, k, placement)
        self.counts.moved += len(evicted)
        self.counts.freed += sum(1 for i in sources if not self.on_node[i])


# ------------------------------------------------------------------ the bench


def run(
    node_list: Path, pod_lists: Sequence[Path], nodes: int, speedup: float, every_min: float,
    seeds: Sequence[int],
) -> dict[str, Any]:  # fmt: skip
    """The three variants per workload and seed, on the same drawn cluster and arrivals;
    ``series`` holds each workload's first seed's nodes in use over time, per variant (for
    the chart, not the JSON line)."""
    all_nodes = load_nodes(node_list)
    workloads = []
    for pod_list in pod_lists:
        pods = load_trace(pod_list, speedup)
        per_seed = []
        series: dict[str, Series] = {}
        for seed in seeds:
            drawn = draw_nodes(all_nodes, nodes, seed)
            row: dict[str, Any] = {"seed": seed, "gpus": sum(n.gpus for n in drawn)}
            for variant in VARIANTS:
                replay = Replay(drawn, pods, seed, every_min * 60, variant)
                replay.run()
                row[variant] = replay.row()
                if seed == seeds[0]:
                    series[variant] = replay.usage.series
            per_seed.append(row)
        workloads.append({"pods": pod_list.name, "seeds": per_seed, "series": series})
    return {
        "nodes": nodes,
        "speedup": speedup,
        "every_min": every_min,
        "workloads": workloads,
    }


COLUMNS: Final = (
    ("nodes_in_use_mean", "in use"),
    ("nodes_in_use_end", "at end"),
    ("nodes_added", "added"),
    ("nodes_freed", "freed"),
    ("idle_gpus_in_use_mean", "idle GPUs"),
    ("unallocated_in_use_pct", "unalloc %"),
    ("moved", "moved"),
    ("moved_per_freed", "moved/freed"),
    ("pending_by_move", "pend. by move"),
)


def table(workload: Mapping[str, Any]) -> list[str]:
    return seed_table(workload["seeds"], VARIANTS, COLUMNS, 8)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node-list", type=Path, default=DEFAULT_NODES)
    parser.add_argument("--pods", default=str(DEFAULT_PODS), help="pod lists, comma-separated")
    parser.add_argument("--nodes", type=int, default=60)
    parser.add_argument("--speedup", type=float, default=10.0)
    parser.add_argument("--every-min", type=float, default=10.0)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--png", type=Path, help="write a chart of the nodes in use over time")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
        if not args.every_min > 0:
            raise TraceError(f"--every-min {args.every_min}: expected a positive number")
        pod_lists = [Path(p) for p in args.pods.split(",")]
        out = run(args.node_list, pod_lists, args.nodes, args.speedup, args.every_min, seeds)
    except (TraceError, ValueError) as e:
        print(f"consolidation_replay: {e}", file=sys.stderr)
        return 2
    print(
        f"{out['nodes']} nodes drawn per seed, arrivals {out['speedup']}x faster,"
        f" a pass every {out['every_min']} min"
    )
    panels = []
    for workload in out["workloads"]:
        print(workload["pods"])
        print("\n".join(table(workload)))
        panels.append((f"{workload['pods']}, seed {seeds[0]}", workload.pop("series")))
    print(json.dumps(out))
    if args.png is not None:
        replay_chart.nodes_in_use(args.png, panels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
