"""GPU defragmentation by migration, measured on the openb trace replayed with departures:
FGD alone against FGD with the migration planner, on the same arrivals in the same run.

    python -m hack.bench.defrag_replay [--nodes 60] [--speedup 40] [--every 25]
                                       [--seeds 1,2,3] [--pods FILE] [--node-list FILE]

The model (a model: no kube-scheduler, no controllers, no eviction executor):

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
replay); then the means over the seeds, and one JSON line.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from coordinator import feasibility
from coordinator.config import DefragSettings, EvictionSettings, SignalSettings
from coordinator.consolidation.defrag import Migration, plan_migration
from coordinator.consolidation.drain import _size
from coordinator.eviction.answers import Refusal
from coordinator.eviction.view import ClusterView
from coordinator.live.holdings import Held
from coordinator.scoring import registry
from coordinator.scoring.engine import Engine
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.podfacts import PodFacts, pod_facts
from coordinator.state.podrequest import PodRequest
from hack.sim.trace import DEFAULT_NODES, DEFAULT_PODS, TraceError, load_nodes, load_pods

NAMESPACE: Final = "openb"
PRIORITY: Final = 1_000
"""Every pod's ``spec.priority``: ``medium`` by the default levels, so any pod may be moved
for any other (the planner moves none above the pending pod's level)."""
NOW: Final = 1_790_000_000.0
CAPS: Final = EvictionSettings(
    max_per_cycle=10_000, max_per_node_per_cycle=110, max_per_namespace_per_cycle=10_000,
    eviction_burst=10_000,
)  # fmt: skip
"""Caps that never stop a migration: the replay measures the planner, not the caps."""
REPLICASET: Final = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs"}


@dataclass(frozen=True, slots=True)
class TracePod:
    """A pod of the list with its runtime (``deletion_time − creation_time``, seconds)."""

    request: PodRequest
    arrival_s: float
    runtime_s: float


def load_trace(path: Path, speedup: float) -> list[TracePod]:
    """The pod list with its times, in arrival order; arrivals at ``creation_time /
    speedup``. A row without both times, or deleted before created, is a TraceError."""
    if not speedup > 0:
        raise TraceError(f"--speedup {speedup}: expected a positive number")
    requests = load_pods(path)
    with path.open(newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    out = []
    for line, (row, request) in enumerate(zip(rows, requests, strict=True), start=2):
        try:
            created, deleted = float(row["creation_time"]), float(row["deletion_time"])
        except (KeyError, TypeError, ValueError) as e:
            raise TraceError(f"{path}:{line}: creation_time and deletion_time needed") from e
        if deleted < created:
            raise TraceError(f"{path}:{line}: deletion_time before creation_time")
        out.append(TracePod(request, created / speedup, deleted - created))
    out.sort(key=lambda p: (p.arrival_s, p.request.name))
    return out


def draw_nodes(nodes: Sequence[NodeSpec], count: int, seed: int) -> list[NodeSpec]:
    """``count`` nodes of the list drawn by ``seed``, in the list's order."""
    if not 1 <= count <= len(nodes):
        raise TraceError(f"--nodes {count}: expected 1..{len(nodes)} (the node list's size)")
    rng = np.random.default_rng(seed)
    return [nodes[i] for i in sorted(rng.choice(len(nodes), size=count, replace=False))]


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


class Replay:
    """One variant's run over one drawn cluster: the engine's state is the cluster."""

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
        self.pods = list(pods)
        self.every = every
        self.migrate = migrate
        self.plans_per_round = plans_per_round
        self.defrag = defrag or DefragSettings()
        self.state = ClusterState(nodes)
        context = registry.PolicyContext([p.request for p in pods], seed)
        self.policy = registry.build_policy("fgd", {}, context)
        rank = np.random.default_rng(seed).permutation(len(nodes)).astype(np.int64)
        self.engine = Engine(self.state, self.policy, rank)
        self._empty = Engine(ClusterState(nodes), self.policy, rank)
        self.node_facts = {n.name: feasibility.node_of(_node_object(n)) for n in nodes}
        self.placed: dict[str, tuple[int, Placement]] = {}
        """Uid → (index into :attr:`pods`, where it is)."""
        self.facts: dict[str, PodFacts] = {}
        self.pending: dict[str, int] = {}
        """Uid → index into :attr:`pods`, oldest first."""
        self.outcome = Outcome()
        self._departures: list[tuple[float, int, str]] = []
        self._now = 0.0

    def run(self) -> Outcome:
        """Every arrival in order, departures between them, a round every ``every``
        events; stops when the last pod has arrived."""
        out = self.outcome
        total = self.state.gpu_total_milli
        allocated_time = 0.0
        events = 0
        for k, pod in enumerate(self.pods):
            while self._departures and self._departures[0][0] <= pod.arrival_s:
                at, _, uid = heapq.heappop(self._departures)
                allocated_time += self._advance(at, total)
                self._depart(uid)
                events += 1
                if events % self.every == 0:
                    self._round()
            allocated_time += self._advance(pod.arrival_s, total)
            self._arrive(k)
            events += 1
            if events % self.every == 0:
                self._round()
        span = self._now - self.pods[0].arrival_s
        out.unallocated_pct = 100 * (1 - allocated_time / span) if span > 0 else 0.0
        out.multi_pending_at_end = sum(
            1 for i in self.pending.values() if self._multi(self.pods[i].request)
        )
        self.state.check()
        return out

    # ------------------------------------------------------------------ events

    def _advance(self, at: float, total: int) -> float:
        """Move the clock to ``at``; the allocated fraction of the GPUs times the time."""
        used = int((self.state.gpu_cap - self.state.gpu_free).sum())  # padding: -1 - -1
        share = used / total * (at - self._now) if total else 0.0
        self._now = at
        return share

    def _arrive(self, k: int) -> None:
        request = self.pods[k].request
        if not self._empty.feasible(request).any():
            self.outcome.unplaceable += 1
            return
        multi = self._multi(request)
        self.outcome.multi_arrived += multi
        uid = _uid(k)
        placement = self.engine.place(request)
        if placement is None:
            self.pending[uid] = k
            return
        self.outcome.multi_at_once += multi
        self._bind(uid, k, placement)

    def _depart(self, uid: str) -> None:
        k, placement = self.placed.pop(uid)
        r = self.pods[k].request
        self.state.release(placement, r.cpu_m, r.mem_b, r.gpu_milli if r.gpus else 0, r.tag)
        del self.facts[uid]

    def _bind(self, uid: str, k: int, placement: Placement) -> None:
        """The pod runs on ``placement`` (its room taken already) from now."""
        self.placed[uid] = (k, placement)
        request = self.pods[k].request
        obj = _pod_object(uid, request, self.state.names[placement.node])
        self.facts[uid] = pod_facts(obj, request, CAPS.level_label)
        heapq.heappush(self._departures, (self._now + self.pods[k].runtime_s, k, uid))

    def _placed_after_wait(self, uid: str, k: int, placement: Placement, migrated: bool) -> None:
        del self.pending[uid]
        if self._multi(self.pods[k].request):
            self.outcome.multi_after_wait += 1
            self.outcome.multi_by_migration += migrated
            self.outcome.waits_s.append(self._now - self.pods[k].arrival_s)
        self._bind(uid, k, placement)

    # ------------------------------------------------------------------ rounds

    def _round(self) -> None:
        for uid, k in list(self.pending.items()):
            placement = self.engine.place(self.pods[k].request)
            if placement is not None:
                self._placed_after_wait(uid, k, placement, migrated=False)
        if not self.migrate:
            return
        waiting = [u for u, k in self.pending.items() if self._multi(self.pods[k].request)]
        for uid in waiting[: self.plans_per_round]:
            self._migrate(uid)

    def _migrate(self, uid: str) -> None:
        k = self.pending[uid]
        request = self.pods[k].request
        pending = pod_facts(_pod_object(uid, request, None), request, CAPS.level_label)
        view = self.view(pending)
        answer = plan_migration(view, pending, self.defrag, CAPS, NOW)
        if isinstance(answer, Refusal):
            return
        self.apply(view, answer)
        row = self.state.index[answer.node]
        placement = Placement(row, self.policy.devices(self.state, row, request))
        self._allocate(placement, request, f"{uid} on {answer.node}")
        self._placed_after_wait(uid, k, placement, migrated=True)

    def view(self, pending: PodFacts) -> ClusterView:
        """The planner's view of the replay now, with ``pending`` among the pods."""
        held = {}
        for uid, (k, placement) in self.placed.items():
            r = self.pods[k].request
            held[uid] = Held(
                self.state.names[placement.node], r, placement.devices, r.cpu_m, r.mem_b
            )
        return ClusterView(
            state=self.state,
            policy=self.policy,
            signals=SignalSettings(),
            held=held,
            pods={**self.facts, pending.uid: pending},
            budgets=(),
            budgets_synced=True,
            nodes=self.node_facts,
        ).index()

    def apply(self, view: ClusterView, migration: Migration) -> None:
        """Each moved pod off its node and onto its destination, in the order the planner
        placed them (largest first), so each takes the devices it was planned on."""
        destination = {m.uid: m.destination for m in migration.moves}
        for uid in sorted(destination, key=lambda u: _size(view, u)):
            k, old = self.placed.pop(uid)
            r = self.pods[k].request
            self.state.release(old, r.cpu_m, r.mem_b, r.gpu_milli if r.gpus else 0, r.tag)
            row = self.state.index[destination[uid]]
            new = Placement(row, self.policy.devices(self.state, row, r) if r.gpus else ())
            self._allocate(new, r, f"{uid} moved to {destination[uid]}")
            self.placed[uid] = (k, new)
            self.facts[uid] = pod_facts(_pod_object(uid, r, destination[uid]), r, CAPS.level_label)
            self.outcome.moved += 1

    def _allocate(self, placement: Placement, r: PodRequest, what: str) -> None:
        """Take the room the plan counted on; a plan the replay cannot carry out is a
        planner bug the measure must not hide."""
        if len(placement.devices) != r.gpus:
            raise RuntimeError(f"the migration planned {what}, which has too few free GPUs")
        try:
            self.state.allocate(placement, r.cpu_m, r.mem_b, r.gpu_milli if r.gpus else 0, r.tag)
        except ValueError as e:
            raise RuntimeError(f"the migration planned {what}, which does not fit: {e}") from e

    def _multi(self, request: PodRequest) -> bool:
        return request.gpus >= self.defrag.min_gpus


def _uid(k: int) -> str:
    return f"pod-{k}"


def _node_object(spec: NodeSpec) -> dict[str, Any]:
    allocatable = {"cpu": f"{spec.cpu_m}m", "memory": str(spec.mem_b), "pods": "1000"}
    return {
        "metadata": {"name": spec.name, "labels": {"kubernetes.io/hostname": spec.name}},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def _pod_object(uid: str, request: PodRequest, node: str | None) -> dict[str, Any]:
    """The Pod the planner's rules and kube-scheduler's filters read: CPU and memory
    requests (GPUs are Stowage's filter's, shares included), a controller, one level."""
    requests = {"cpu": f"{request.cpu_m}m", "memory": str(request.mem_b)}
    spec: dict[str, Any] = {
        "priority": PRIORITY,
        "containers": [{"name": "main", "resources": {"requests": requests}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": uid,
            "namespace": NAMESPACE,
            "uid": uid,
            "ownerReferences": [{**REPLICASET, "controller": True}],
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


# ------------------------------------------------------------------ the bench


def run(
    node_list: Path, pod_list: Path, nodes: int, speedup: float, every: int,
    seeds: Sequence[int], plans_per_round: int,
) -> dict[str, Any]:  # fmt: skip
    """Both variants per seed, on the same drawn cluster and arrivals."""
    all_nodes = load_nodes(node_list)
    pods = load_trace(pod_list, speedup)
    per_seed = []
    for seed in seeds:
        drawn = draw_nodes(all_nodes, nodes, seed)
        row: dict[str, Any] = {"seed": seed, "gpus": sum(n.gpus for n in drawn)}
        for label, migrate in (("fgd", False), ("fgd+defrag", True)):
            replay = Replay(drawn, pods, seed, every, migrate, plans_per_round)
            row[label] = replay.run().row()
        per_seed.append(row)
    return {
        "pods": str(pod_list.name),
        "nodes": nodes,
        "speedup": speedup,
        "every": every,
        "seeds": per_seed,
    }


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
    lines = [f"{'seed':>5} {'variant':<11}" + "".join(f"{h:>14}" for _, h in COLUMNS)]
    for row in out["seeds"]:
        for label in ("fgd", "fgd+defrag"):
            cells = "".join(f"{_cell(row[label][k]):>14}" for k, _ in COLUMNS)
            lines.append(f"{row['seed']:>5} {label:<11}{cells}")
    for label in ("fgd", "fgd+defrag"):
        means = []
        for key, _ in COLUMNS:
            values = [r[label][key] for r in out["seeds"] if r[label][key] is not None]
            means.append(_cell(round(statistics.fmean(values), 2)) if values else "-")
        lines.append(f"{'mean':>5} {label:<11}" + "".join(f"{m:>14}" for m in means))
    return lines


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node-list", type=Path, default=DEFAULT_NODES)
    parser.add_argument("--pods", type=Path, default=DEFAULT_PODS)
    parser.add_argument("--nodes", type=int, default=60)
    parser.add_argument("--speedup", type=float, default=40.0)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--plans-per-round", type=int, default=8)
    parser.add_argument("--seeds", default="1,2,3")
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
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
