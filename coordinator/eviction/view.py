"""The read-only snapshot the planner works on, and the what-if states it asks Stowage's
filter about.

A :class:`ClusterView` is taken from the live cluster at one moment
(:func:`view_of`): the cluster state, what every bound pod holds, the pods' facts, the
PodDisruptionBudgets, the PodGroups' queues, which pods a checkpointing claim shields,
which nodes have fresh reports, and the queues cooling down. The planner reads it and
never changes it.

A *what-if state* (:func:`given_back`) is a :class:`ClusterState` with one row per
candidate eviction set: the row of the set's node with the set's resources given back.
Stowage's own filter (:func:`coordinator.live.decisions.judge`) then says, for all the
sets at once, where the preemptor would fit afterwards — the same check the filter
endpoint answers kube-scheduler with, so a plan never frees a node the filter would still
refuse.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from coordinator import feasibility
from coordinator.config import SignalSettings
from coordinator.live.holdings import Held
from coordinator.scoring.base import Policy
from coordinator.state.cluster import ClusterState
from coordinator.state.podfacts import Budget, PodFacts
from coordinator.state.podgroups import Queues

if TYPE_CHECKING:
    from coordinator.live.cluster import LiveCluster


@dataclass(frozen=True)
class ClusterView:
    """The cluster as the planner sees it at one moment."""

    state: ClusterState
    policy: Policy
    signals: SignalSettings
    held: Mapping[str, Held]
    """Pod uid → what it holds, for bound pods only (an assumed pod is a guess: never a
    victim)."""
    pods: Mapping[str, PodFacts]
    """Pod uid → facts, for every pod the watch has."""
    budgets: Sequence[Budget]
    budgets_synced: bool
    """False until the PodDisruptionBudgets were listed: nothing is planned before."""
    fresh: frozenset[str] = frozenset()
    """Nodes whose latest report is within its TTL (the coordinator's receipt clock)."""
    queues: Queues = field(default_factory=lambda: Queues({}))
    """The PodGroups' queues, which the pods' queues come from."""
    shielded: frozenset[str] = frozenset()
    """Uids of the pods whose checkpointing claim shields them now
    (:mod:`coordinator.state.checkpointing`)."""
    cooldown_until: Mapping[str, float] = field(default_factory=dict)
    """Queue → until when (Unix seconds) its last round keeps it from another."""
    on_node: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Node → uids of the bound pods on it with known facts (built by :meth:`index`)."""
    gangs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Gang → uids of its bound members (built by :meth:`index`)."""
    nodes: Mapping[str, feasibility.Node] = field(default_factory=dict)
    """What kube-scheduler's filters read of each node."""
    snapshot: feasibility.Snapshot = field(default_factory=lambda: feasibility.Snapshot({}, {}))
    """The nodes and bound pods as kube-scheduler's filters see them (built by
    :meth:`index`): where the feasibility model judges each plan."""
    memo: dict[object, Any] = field(default_factory=dict, compare=False, repr=False)
    """What the planner's rules work out per pod and that depends on nothing but this view
    (levels, budgets, work lost): shared by the plans made over it, and by the views
    :func:`dataclasses.replace` derives from it (the same pods)."""
    promised: frozenset[str] = frozenset()
    """Nodes whose room an earlier plan of the same round promised to its preemptor: no
    other preemption is planned there (it could rest on victims that plan evicts)."""

    def index(self) -> ClusterView:
        """This view with :attr:`on_node` and :attr:`gangs` filled in from the pods."""
        on_node: dict[str, list[str]] = {}
        gangs: dict[str, list[str]] = {}
        for uid, held in self.held.items():
            facts = self.pods.get(uid)
            if facts is None or held.assumed_until is not None:
                continue
            on_node.setdefault(held.node, []).append(uid)
            if facts.gang is not None:
                gangs.setdefault(facts.gang, []).append(uid)
        bound = {uid: f.scheduling for uid, f in self.pods.items() if f.node is not None}
        return dataclasses.replace(
            self,
            on_node={n: tuple(sorted(u)) for n, u in on_node.items()},
            gangs={g: tuple(sorted(u)) for g, u in gangs.items()},
            snapshot=feasibility.Snapshot(dict(self.nodes), bound),
        )


def view_of(
    cluster: LiveCluster, cooldown_until: Mapping[str, float] | None = None
) -> ClusterView | None:
    """The view of the live cluster now; None before any node is known."""
    if cluster.state is None:
        return None
    return ClusterView(
        state=cluster.state,
        policy=cluster.policy,
        signals=cluster.settings.signals,
        held={u: h for u, h in cluster.held.items() if h.assumed_until is None},
        pods=dict(cluster.facts),
        budgets=tuple(cluster.budgets.by_key.values()),
        budgets_synced=cluster.budgets.synced,
        fresh=frozenset(cluster.signals),
        queues=cluster.podgroups.queues(),
        shielded=cluster.claims.shielded(cluster.facts, cluster.clock.monotonic()),
        cooldown_until=dict(cooldown_until or {}),
        nodes=dict(cluster.node_facts),
    ).index()


def shared_view(cluster: LiveCluster, now: float) -> ClusterView | None:
    """:func:`view_of` under the cooldowns every replica shares at ``now`` (Unix seconds;
    :mod:`coordinator.live.cooldowns`): what a replica that is not the executor plans by
    (the preempt verb, the read-only previews), so it refuses what the leader would."""
    return view_of(cluster, cluster.cooldowns.active(now))


def given_back(
    state: ClusterState, rows: npt.NDArray[np.int64], released: Sequence[Sequence[Held]]
) -> ClusterState:
    """A state with one row per set: ``rows[k]``'s node with what ``released[k]`` holds
    given back. Only the columns the filter reads are rebuilt (a shallow copy keeps the
    rest, such as the GPU model names the model ids point into)."""
    out = copy.copy(state)
    n = len(rows)
    cpu = state.cpu_free[rows].copy()
    mem = state.mem_free[rows].copy()
    gpu = state.gpu_free[rows].copy()
    for k, holds in enumerate(released):
        for held in holds:
            cpu[k] += held.cpu_m
            mem[k] += held.mem_b
            if held.devices:
                gpu[k, list(held.devices)] += held.request.gpu_milli
    out.names = [state.names[i] for i in rows.tolist()]
    out.index = {}
    out.cpu_cap, out.mem_cap = state.cpu_cap[rows], state.mem_cap[rows]
    out.gpu_count, out.gpu_cap = state.gpu_count[rows], state.gpu_cap[rows]
    out.model_id = state.model_id[rows]
    out.cpu_free, out.mem_free, out.gpu_free = cpu, mem, gpu
    out.version = np.zeros(n, dtype=np.int64)
    out.state_id = np.zeros(n, dtype=np.int64)
    for column in (
        "cpu_pressure_pct",
        "memory_pressure_pct",
        "cpu_used_pct",
        "contiguous_2mib_b",
        "true_allocatable_mem_b",
        "largest_numa_cpu_m",
        "gpu_links_key",
        "gpu_faulty",
        "gpu_reported",
        "io_pressure_pct",
    ):
        setattr(out, column, getattr(state, column)[rows])
    out.topology_policy = [state.topology_policy[i] for i in rows.tolist()]
    out.gpu_links = [state.gpu_links[i] for i in rows.tolist()]
    out.gpu_tags = [state.gpu_tags[i] for i in rows.tolist()]
    out.gpu_faults = [state.gpu_faults[i] for i in rows.tolist()]
    out.disks = [state.disks[i] for i in rows.tolist()]
    out.numa_cpus = [state.numa_cpus[i] for i in rows.tolist()]
    out.pod_numa = [state.pod_numa[i] for i in rows.tolist()]
    out.occupants = [state.occupants[i] for i in rows.tolist()]
    out.tenancy_memo = [state.tenancy_memo[i] for i in rows.tolist()]
    return out
