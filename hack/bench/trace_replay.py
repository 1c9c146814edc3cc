"""The openb pod list replayed with departures on a drawn cluster: the core that the defrag
replay (:mod:`hack.bench.defrag_replay`) and the consolidation replay
(:mod:`hack.bench.consolidation_replay`) share, so both measure on one model.

* **the cluster**: nodes drawn from the trace's GPU node list by the seed
  (:func:`draw_nodes`); the engine's :class:`~coordinator.state.cluster.ClusterState` is
  the cluster, and the seed also draws the node rank that breaks the policy's ties;
* **arrivals**: every pod of the list in ``creation_time`` order, at ``creation_time /
  speedup`` (:func:`load_trace`: so that pods overlap as they would on a busier cluster),
  placed by the scoring engine with the FGD policy; a pod that fits nowhere waits pending,
  first come first served; one that fits on no node of the drawn cluster even when it is
  empty (a GPU model it lacks) is left out and counted;
* **departures**: a placed pod leaves ``deletion_time − creation_time`` seconds after it
  was first placed (its runtime: waiting does not shorten it, nor does being moved);
* **moves**: a planner's moves carried out on the state in the planner's order, each pod
  taking the devices the policy picks on its destination, as the planner's working copy
  did (:meth:`TraceReplay.move`); a move the state cannot carry out is a planner bug;
* **the planner's view**: each pod a Pod object in one namespace, ``medium``
  (``spec.priority`` 1000), controlled by a ReplicaSet, requesting its CPU and memory;
  each node a Node object with its allocatable (:meth:`TraceReplay.view`).

Recorded while it runs (:class:`Usage`): GPUs allocated, nodes in use (holding a pod) and
the GPUs idle on them, each integrated over the replay's time, and the nodes in use over
time (for a chart).
"""

from __future__ import annotations

import csv
import heapq
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from coordinator import feasibility
from coordinator.config import EvictionSettings, SignalSettings
from coordinator.eviction.view import ClusterView
from coordinator.live.holdings import Held
from coordinator.scoring import registry
from coordinator.scoring.engine import Engine
from coordinator.state.cluster import MILLI_PER_GPU, ClusterState, NodeSpec, Placement
from coordinator.state.podfacts import PodFacts, pod_facts
from coordinator.state.podrequest import PodRequest
from hack.sim.trace import TraceError, load_pods

NAMESPACE: Final = "openb"
PRIORITY: Final = 1_000
"""Every pod's ``spec.priority``: ``medium`` by the default levels, so any pod may be moved
for any other (the planners move none above ``medium``)."""
NOW: Final = 1_790_000_000.0
"""The Unix second the planners are asked at (checkpoints, budget windows): one fixed
instant, a Wednesday 10:13 UTC; the replay's own clock starts at 0."""
LEVEL_LABEL: Final = EvictionSettings().level_label
REPLICASET: Final = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs"}

Series = list[tuple[float, int]]
"""``(replay second, nodes in use from then on)``, one point per change."""


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
class Usage:
    """What the replay's time was spent on: integrals over replay seconds."""

    span_s: float = 0.0
    gpu_allocated_s: float = 0.0
    """GPUs allocated (milli / 1000, fractions of shared GPUs included) × seconds."""
    nodes_in_use_s: float = 0.0
    gpus_in_use_s: float = 0.0
    """GPUs of the nodes in use × seconds."""
    gpus_idle_in_use_s: float = 0.0
    """GPUs free on the nodes in use (milli / 1000) × seconds."""
    series: Series = field(default_factory=list)

    def unallocated_pct(self, total_gpus: int) -> float:
        """The share of the whole drawn cluster's GPUs not allocated, over the replay."""
        if not self.span_s or not total_gpus:
            return 0.0
        return 100 * (1 - self.gpu_allocated_s / (total_gpus * self.span_s))

    def mean_nodes_in_use(self) -> float:
        return self.nodes_in_use_s / self.span_s if self.span_s else 0.0

    def mean_idle_gpus(self) -> float:
        """GPUs idle but allocated to the cluster: free on a node in use, on average."""
        return self.gpus_idle_in_use_s / self.span_s if self.span_s else 0.0

    def unallocated_in_use_pct(self) -> float:
        """The share of the GPUs on nodes in use that no pod holds, over the replay."""
        return 100 * self.gpus_idle_in_use_s / self.gpus_in_use_s if self.gpus_in_use_s else 0.0


class TraceReplay:
    """One variant's run over one drawn cluster; the subclasses add what happens between
    events (:meth:`_reach`), after one (:meth:`_event`), and how an arriving or waiting pod
    is placed (:meth:`_choose`)."""

    def __init__(self, nodes: Sequence[NodeSpec], pods: Sequence[TracePod], seed: int) -> None:
        self.pods = list(pods)
        self.state = ClusterState(nodes)
        context = registry.PolicyContext([p.request for p in pods], seed)
        self.policy = registry.build_policy("fgd", {}, context)
        rank = np.random.default_rng(seed).permutation(len(nodes)).astype(np.int64)
        self.engine = Engine(self.state, self.policy, rank)
        self._empty = Engine(ClusterState(nodes), self.policy, rank)
        self.node_facts = {n.name: feasibility.node_of(node_object(n)) for n in nodes}
        self.placed: dict[str, tuple[int, Placement]] = {}
        """Uid → (index into :attr:`pods`, where it is)."""
        self.facts: dict[str, PodFacts] = {}
        self.pending: dict[str, int] = {}
        """Uid → index into :attr:`pods`, oldest first."""
        self.on_node = np.zeros(len(nodes), dtype=np.int64)
        """Pods on each node: a node holding one is in use."""
        self.unplaceable = 0
        """Pods left out: they fit on no node of the drawn cluster even when it is empty."""
        self.usage = Usage()
        self._departures: list[tuple[float, int, str]] = []
        self._leaves: dict[str, float] = {}
        """Uid → when it leaves, from its first placement on."""
        self._now = 0.0

    def run(self) -> None:
        """Every arrival in order, departures between them; stops when the last pod has
        arrived."""
        if not self.pods:
            return
        self._now = self.pods[0].arrival_s
        self._note()
        for k, pod in enumerate(self.pods):
            while self._departures and self._departures[0][0] <= pod.arrival_s:
                at, _, uid = heapq.heappop(self._departures)
                self._reach(at)
                self._depart(uid)
                self._event()
            self._reach(pod.arrival_s)
            self._arrive(k)
            self._event()
        self.usage.series.append((self._now, self.nodes_in_use()))  # the line runs to the end
        self.state.check()

    # ------------------------------------------------------------------ the clock

    def _reach(self, at: float) -> None:
        """Move the clock to ``at`` (a subclass runs what falls due before it first)."""
        self._advance(at)

    def _advance(self, at: float) -> None:
        """Move the clock to ``at``, adding the time since to :attr:`usage`."""
        dt = at - self._now
        if dt > 0:
            state, usage = self.state, self.usage
            in_use = self.on_node > 0
            free = np.where(state.gpu_free > 0, state.gpu_free, 0)
            used = int((state.gpu_cap - state.gpu_free).sum())  # padding: -1 - -1
            usage.span_s += dt
            usage.gpu_allocated_s += used / MILLI_PER_GPU * dt
            usage.nodes_in_use_s += int(in_use.sum()) * dt
            usage.gpus_in_use_s += int(state.gpu_count[in_use].sum()) * dt
            usage.gpus_idle_in_use_s += int(free[in_use].sum()) / MILLI_PER_GPU * dt
        self._now = max(self._now, at)

    def _note(self) -> None:
        """A point of the nodes-in-use series, when their number changed."""
        count = self.nodes_in_use()
        series = self.usage.series
        if not series or series[-1][1] != count:
            series.append((self._now, count))

    def nodes_in_use(self) -> int:
        return int((self.on_node > 0).sum())

    # ------------------------------------------------------------------ events

    def _event(self) -> None:
        """After each arrival and departure."""
        self._note()

    def _arrive(self, k: int) -> bool | None:
        """The pod of index ``k`` arrives: True placed, False pending, None left out."""
        request = self.pods[k].request
        if not self._empty.feasible(request).any():
            self.unplaceable += 1
            return None
        uid = pod_uid(k)
        placement = self._choose(request)
        if placement is None:
            self.pending[uid] = k
            return False
        self._bind(uid, k, placement)
        return True

    def _choose(self, request: PodRequest) -> Placement | None:
        """Where a pod goes, its room taken: the engine's best node of the cluster."""
        return self.engine.place(request)

    def _depart(self, uid: str) -> None:
        """The pod's runtime is over: it leaves its node, or the queue where a move left
        it waiting."""
        if self.pending.pop(uid, None) is None:
            self.release(uid)
        del self._leaves[uid]

    def _bind(self, uid: str, k: int, placement: Placement) -> None:
        """The pod runs on ``placement`` (its room taken already) from now."""
        self.placed[uid] = (k, placement)
        self.on_node[placement.node] += 1
        request = self.pods[k].request
        obj = pod_object(uid, request, self.state.names[placement.node])
        self.facts[uid] = pod_facts(obj, request, LEVEL_LABEL)
        if uid not in self._leaves:
            self._leaves[uid] = self._now + self.pods[k].runtime_s
            heapq.heappush(self._departures, (self._leaves[uid], k, uid))

    def _placed_after_wait(self, uid: str, k: int, placement: Placement) -> None:
        del self.pending[uid]
        self._bind(uid, k, placement)

    def retry(self) -> None:
        """Every pending pod tried again, oldest first."""
        for uid, k in list(self.pending.items()):
            placement = self._choose(self.pods[k].request)
            if placement is not None:
                self._placed_after_wait(uid, k, placement)

    def release(self, uid: str) -> int:
        """The pod off its node, its room given back (it still has a departure due); the
        index of the pod."""
        k, placement = self.placed.pop(uid)
        r = self.pods[k].request
        self.state.release(placement, r.cpu_m, r.mem_b, r.gpu_milli if r.gpus else 0, r.tag)
        self.on_node[placement.node] -= 1
        del self.facts[uid]
        return k

    # ------------------------------------------------------------------ planners

    def view(self, pending: PodFacts | None = None) -> ClusterView:
        """The planners' view of the replay now (``pending`` among the pods, if given)."""
        held = {}
        for uid, (k, placement) in self.placed.items():
            r = self.pods[k].request
            held[uid] = Held(
                self.state.names[placement.node], r, placement.devices, r.cpu_m, r.mem_b
            )
        pods = dict(self.facts)
        if pending is not None:
            pods[pending.uid] = pending
        return ClusterView(
            state=self.state,
            policy=self.policy,
            signals=SignalSettings(),
            held=held,
            pods=pods,
            budgets=(),
            budgets_synced=True,
            nodes=self.node_view(),
        ).index()

    def node_view(self) -> Mapping[str, feasibility.Node]:
        """What kube-scheduler's filters read of each node, for :meth:`view`."""
        return self.node_facts

    def move(self, moves: Sequence[tuple[str, str]]) -> None:
        """Each ``(uid, destination)`` off its node and onto its destination, in the order
        given (the order the planner placed them in, so each takes the devices it was
        planned on)."""
        for uid, destination in moves:
            k = self.release(uid)
            r = self.pods[k].request
            row = self.state.index[destination]
            new = Placement(row, self.policy.devices(self.state, row, r) if r.gpus else ())
            self.allocate(new, r, f"{uid} on {destination}")
            self._bind(uid, k, new)

    def allocate(self, placement: Placement, r: PodRequest, what: str) -> None:
        """Take the room a plan counted on; a plan the replay cannot carry out is a
        planner bug the measure must not hide."""
        if len(placement.devices) != r.gpus:
            raise RuntimeError(f"the plan put {what}, which has too few free GPUs")
        try:
            self.state.allocate(placement, r.cpu_m, r.mem_b, r.gpu_milli if r.gpus else 0, r.tag)
        except ValueError as e:
            raise RuntimeError(f"the plan put {what}, which does not fit: {e}") from e


def pod_uid(k: int) -> str:
    return f"pod-{k}"


def node_object(spec: NodeSpec, taints: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """The Node kube-scheduler's filters read: its allocatable, and ``taints``."""
    allocatable = {"cpu": f"{spec.cpu_m}m", "memory": str(spec.mem_b), "pods": "1000"}
    return {
        "metadata": {"name": spec.name, "labels": {"kubernetes.io/hostname": spec.name}},
        "spec": {"taints": [dict(t) for t in taints]},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def pod_object(uid: str, request: PodRequest, node: str | None) -> dict[str, Any]:
    """The Pod the planners' rules and kube-scheduler's filters read: CPU and memory
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


def seed_table(
    seeds: Sequence[Mapping[str, Any]],
    variants: Sequence[str],
    columns: Sequence[tuple[str, str]],
    width: int,
) -> list[str]:
    """A replay's figures as text: a row per seed and variant, then each variant's means
    over the seeds (a figure a seed has no value for, None, is left out of its mean).
    ``columns`` are (key, heading); ``width`` is the variant column's."""
    lines = [f"{'seed':>5} {'variant':<{width}}" + "".join(f"{h:>14}" for _, h in columns)]
    for row in seeds:
        for variant in variants:
            cells = "".join(f"{_cell(row[variant][k]):>14}" for k, _ in columns)
            lines.append(f"{row['seed']:>5} {variant:<{width}}{cells}")
    for variant in variants:
        means = []
        for key, _ in columns:
            values = [r[variant][key] for r in seeds if r[variant][key] is not None]
            means.append(_cell(round(statistics.fmean(values), 2)) if values else "-")
        lines.append(f"{'mean':>5} {variant:<{width}}" + "".join(f"{m:>14}" for m in means))
    return lines


def _cell(value: object) -> str:
    return "-" if value is None else str(value)
