"""GPU defragmentation by migration, measured on the openb trace replayed with departures:
FGD alone against FGD with the migration planner, on the same arrivals in the same run.

    python -m hack.bench.defrag_replay [--nodes 60] [--speedup 40] [--every 25]
                                       [--seeds 1,2,3] [--pods FILE] [--node-list FILE]
                                       [--png PATH]

The model (a model: no kube-scheduler, no controllers, no eviction executor; the replay
itself is :mod:`hack.bench.trace_replay`'s, which the consolidation replay shares):

* **the cluster**: ``--nodes`` nodes drawn from the trace's GPU node list by the seed (the
  whole list holds ~1,200 nodes; the trace's pods, at their own times, never fill more than
  a few dozen GPUs of it);
* **arrivals**: every pod of the list in ``creation_time`` order, at ``creation_time /
  --speedup`` (so that pods overlap as they would on a busier cluster), placed by the
  scoring engine with the FGD policy, ties between nodes broken by a random node rank that
  the seed draws; a pod that fits nowhere waits pending, first come first served;
* **departures**: a placed pod leaves ``deletion_time − creation_time`` seconds after it was
  placed (its runtime; waiting does not shorten it), giving its room back;
* **rounds**: every ``--every`` events (arrivals and departures), the pending pods are
  tried again in arrival order (both variants). Variant **B** then runs
  :func:`~coordinator.consolidation.defrag.plan_migration` for each pending pod of
  ``defrag.min_gpus`` or more GPUs (oldest first, at most ``--plans-per-round``) and
  applies the migration it answers: each moved pod released and placed on the node the
  plan names (the devices the policy picks there), then the pending pod on the node the
  plan freed. A moved pod keeps its departure time (its controller recreates it at once;
  the work lost since its last checkpoint is not modelled);
* **what is not modelled**: kube-scheduler's own scoring and retries, PodDisruptionBudgets,
  gangs and priority levels (every pod is ``medium``, controlled by a ReplicaSet), the
  time an eviction and a restart take, checkpoints. Pods that fit on no node of the drawn
  cluster even when it is empty (a GPU model it lacks) are left out and counted.

Printed per seed and variant: multi-GPU pods arrived, placed at once, placed after waiting
(by migration in B), still pending when the last pod has arrived, their mean wait, pods
moved per pod placed by migration, and the unallocated-GPU % (time-weighted over the
replay); then the means over the seeds, and one JSON line. ``--png`` charts the nodes in
use (holding a pod) over time for both variants, first seed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from coordinator.config import DefragSettings, EvictionSettings
from coordinator.consolidation.defrag import plan_migration
from coordinator.consolidation.drain import largest_first
from coordinator.eviction.answers import Refusal
from coordinator.state.cluster import NodeSpec, Placement
from coordinator.state.podfacts import pod_facts
from coordinator.state.podrequest import PodRequest
from hack.bench import replay_chart
from hack.bench.trace_replay import (
    LEVEL_LABEL,
    NOW,
    Series,
    TracePod,
    TraceReplay,
    draw_nodes,
    load_trace,
    pod_object,
    seed_table,
)
from hack.sim.trace import DEFAULT_NODES, DEFAULT_PODS, TraceError, load_nodes

CAPS: Final = EvictionSettings(
    max_per_cycle=10_000, max_per_node_per_cycle=110, max_per_namespace_per_cycle=10_000,
    eviction_burst=10_000,
)  # fmt: skip
"""Caps that never stop a migration: the replay measures the planner, not the caps."""


@dataclass
class Outcome:
    """One variant's counts over one replay."""

    multi_arrived: int = 0
    multi_at_once: int = 0
    multi_after_wait: int = 0
    multi_by_migration: int = 0
    multi_pending_at_end: int = 0
    moved: int = 0
    unplaceable: int = 0
    """Pods left out: they fit on no node of the drawn cluster even when it is empty."""
    waits_s: list[float] = field(default_factory=list)
    """How long each multi-GPU pod placed after waiting waited."""
    unallocated_pct: float = 0.0

    def row(self) -> dict[str, Any]:
        return {
            "multi_arrived": self.multi_arrived,
            "multi_at_once": self.multi_at_once,
            "multi_after_wait": self.multi_after_wait,
            "multi_by_migration": self.multi_by_migration,
            "multi_pending_at_end": self.multi_pending_at_end,
            "moved": self.moved,
            "moved_per_migrated": round(self.moved / self.multi_by_migration, 2)
            if self.multi_by_migration
            else None,
            "mean_wait_s": round(statistics.fmean(self.waits_s), 1) if self.waits_s else None,
            "unallocated_gpu_pct": round(self.unallocated_pct, 2),
            "unplaceable": self.unplaceable,
        }


class Replay(TraceReplay):
    """One variant's run over one drawn cluster (:class:`TraceReplay`), with a round every
    ``every`` events."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        pods: Sequence[TracePod],
        seed: int,
        every: int,
        migrate: bool,
        plans_per_round: int = 8,
        defrag: DefragSettings | None = None,
    ) -> None:
        if every < 1 or plans_per_round < 1:
            raise ValueError("every and plans_per_round must be at least 1")
        super().__init__(nodes, pods, seed)
        self.every = every
        self.migrate = migrate
        self.plans_per_round = plans_per_round
        self.defrag = defrag or DefragSettings()
        self.outcome = Outcome()
        self._events = 0

    def run(self) -> Outcome:  # type: ignore[override]
        """The replay (:meth:`TraceReplay.run`) and its counts."""
        super().run()
        out = self.outcome
        out.unplaceable = self.unplaceable
        out.unallocated_pct = self.usage.unallocated_pct(int(self.state.gpu_count.sum()))
        out.multi_pending_at_end = sum(
            1 for i in self.pending.values() if self._multi(self.pods[i].request)
        )
        return out

    def _event(self) -> None:
        super()._event()
        self._events += 1
        if self._events % self.every == 0:
            self._round()
            self._note()

    def _arrive(self, k: int) -> bool | None:
        placed = super()._arrive(k)
        if placed is not None and self._multi(self.pods[k].request):
            self.outcome.multi_arrived += 1
            self.outcome.multi_at_once += placed
        return placed

    def _placed_after_wait(
        self, uid: str, k: int, placement: Placement, migrated: bool = False
    ) -> None:
        if self._multi(self.pods[k].request):
            self.outcome.multi_after_wait += 1
            self.outcome.multi_by_migration += migrated
            self.outcome.waits_s.append(self._now - self.pods[k].arrival_s)
        super()._placed_after_wait(uid, k, placement)

    # ------------------------------------------------------------------ rounds

    def _round(self) -> None:
        self.retry()
        if not self.migrate:
            return
        waiting = [u for u, k in self.pending.items() if self._multi(self.pods[k].request)]
        for uid in waiting[: self.plans_per_round]:
            self._migrate(uid)

    def _migrate(self, uid: str) -> None:
        k = self.pending[uid]
        request = self.pods[k].request
        pending = pod_facts(pod_object(uid, request, None), request, LEVEL_LABEL)
        view = self.view(pending)
        answer = plan_migration(view, pending, self.defrag, CAPS, NOW)
        if isinstance(answer, Refusal):
            return
        # the planner placed the moved pods largest first: so they go
        destination = {m.uid: m.destination for m in answer.moves}
        order = sorted(destination, key=lambda u: largest_first(view, u))
        self.move([(u, destination[u]) for u in order])
        self.outcome.moved += len(destination)
        row = self.state.index[answer.node]
        placement = Placement(row, self.policy.devices(self.state, row, request))
        self.allocate(placement, request, f"{uid} on {answer.node}")
        self._placed_after_wait(uid, k, placement, migrated=True)

    def _multi(self, request: PodRequest) -> bool:
        return request.gpus >= self.defrag.min_gpus


# ------------------------------------------------------------------ the bench


def run(
    node_list: Path, pod_list: Path, nodes: int, speedup: float, every: int,
    seeds: Sequence[int], plans_per_round: int,
) -> dict[str, Any]:  # fmt: skip
    """Both variants per seed, on the same drawn cluster and arrivals; ``series`` holds the
    first seed's nodes in use over time, per variant (for the chart, not the JSON line)."""
    all_nodes = load_nodes(node_list)
    pods = load_trace(pod_list, speedup)
    per_seed = []
    series: dict[str, Series] = {}
    for seed in seeds:
        drawn = draw_nodes(all_nodes, nodes, seed)
        row: dict[str, Any] = {"seed": seed, "gpus": sum(n.gpus for n in drawn)}
        for label, migrate in VARIANTS:
            replay = Replay(drawn, pods, seed, every, migrate, plans_per_round)
            row[label] = replay.run().row()
            if seed == seeds[0]:
                series[label] = replay.usage.series
        per_seed.append(row)
    return {
        "pods": str(pod_list.name),
        "nodes": nodes,
        "speedup": speedup,
        "every": every,
        "seeds": per_seed,
        "series": series,
    }


VARIANTS: Final = (("fgd", False), ("fgd+defrag", True))


COLUMNS: Final = (
    ("multi_arrived", "multi-GPU"),
    ("multi_at_once", "at once"),
    ("multi_after_wait", "after wait"),
    ("multi_by_migration", "by migr."),
    ("multi_pending_at_end", "pending end"),
    ("mean_wait_s", "wait s"),
    ("moved", "moved"),
    ("moved_per_migrated", "moved/migr."),
    ("unallocated_gpu_pct", "unalloc GPU %"),
)


def table(out: dict[str, Any]) -> list[str]:
    return seed_table(out["seeds"], [label for label, _ in VARIANTS], COLUMNS, 11)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node-list", type=Path, default=DEFAULT_NODES)
    parser.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    parser.add_argument("--nodes", type=int, default=60)
    parser.add_argument("--speedup", type=float, default=40.0)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--plans-per-round", type=int, default=8)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument(
        "--png", type=Path, help="write a chart of the nodes in use over time (first seed)"
    )
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
        if args.every < 1 or args.plans_per_round < 1:
            raise TraceError("--every and --plans-per-round: expected at least 1")
        out = run(
            args.node_list, args.pods, args.nodes, args.speedup, args.every, seeds,
            args.plans_per_round,
        )  # fmt: skip
    except (TraceError, ValueError) as e:
        print(f"defrag_replay: {e}", file=sys.stderr)
        return 2
    print(
        f"{out['pods']}: {out['nodes']} nodes drawn per seed, arrivals {out['speedup']}x"
        f" faster, a round every {out['every']} events"
    )
    print("\n".join(table(out)))
    series = out.pop("series")
    print(json.dumps(out))
    if args.png is not None:
        title = f"{out['pods']}, {out['nodes']} nodes, seed {seeds[0]}"
        replay_chart.nodes_in_use(args.png, [(title, series)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
