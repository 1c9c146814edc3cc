"""Tenants kept apart per NUMA node (``signals.tenancy``, off by default).

**The tenant** is the pod's namespace. A label would be configurable but is the pod
owner's to write, so a pod could claim to be another tenant and get room beside it; a
label on the Namespace object would be safe, but the coordinator does not read Namespaces
(its RBAC grants none, so a compromised coordinator cannot relabel or list them either).
Pods of ``infrastructure_namespaces`` (``kube-system``, Stowage's own) are nobody's
tenant: they run on every node, and counting them would leave no node to anyone.

**The rules** (``rule``):

* ``exclusive`` — a tenant's pods never share a NUMA node with another tenant's;
* ``split-training-inference`` — training and inference pods of different tenants never
  share a NUMA node. A pod is classed by its PriorityClass (``training_priority_classes``,
  ``inference_priority_classes``), the only class the coordinator sees that an operator
  defines; a pod of neither class counts as both, so it is kept apart from every other
  tenant's pod, and a pod's owner cannot get room by leaving the class out. The owner does
  pick the PriorityClass by name, so the split is as strong as the operator's control of
  who may use which class (a ResourceQuota with a ``PriorityClass`` scope selector per
  namespace): the same control that keeps a tenant from the priorities that preempt.

**Where a pod runs** is the agent's word (the pods section's ``numa_nodes``, from its
containers' cpusets, :mod:`agent.podnuma`), for the pods the coordinator counts on the
node — bound by the watch, or assumed after an answer — which the agent has not always
seen yet. A pod without a placement (not reported yet, a cpuset the agent could not map,
a node without a NUMA report) is taken to run on every NUMA node of its node: the
cautious reading, until the next report places it. So is every pod the CPU manager does
not pin, in fact: it runs on the shared pool, which spans the NUMA nodes. Only pods that
kubelet puts on one NUMA node (Guaranteed with whole CPUs, topology manager policy
``single-numa-node`` or ``restricted``) can share a node with another tenant and not a
NUMA node.

**The filter** (:func:`refused`) refuses a node when no NUMA node that could hold the pod
is free of tenants it must be kept apart from: for a pod kubelet will pin, a NUMA node with
enough CPUs and none of them; for any other pod, all of the node's NUMA nodes (it will run
on all of them). The reason names the rule and how many such tenants are there, never who
they are. It is *unresolvable*: no pod is evicted to clear a NUMA node of a tenant, and the
eviction planner tries no set on such a node (the live filters it skips). kubelet, not the
scheduler, picks the NUMA node a pinned pod gets, by its own hints: the filter makes sure a
free one exists, and the next report shows where the pod went.

**The preference** (:func:`preference`, ``prefer_same_tenant``): prioritize ranks first the
nodes where a NUMA node the pod could take already hosts its own tenant, then by the
policy's score, so a tenant fills its NUMA nodes before it takes new ones and leaves the
others free for other tenants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.config import TenancySettings
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest
from coordinator.state.signals import ALIGNING_POLICIES

TRAINING: Final = "training"
INFERENCE: Final = "inference"
UNCLASSED: Final = frozenset({TRAINING, INFERENCE})
"""What a pod of neither class counts as: both."""
PREFER_WEIGHT: Final = 2.0
"""What a NUMA node of the pod's own tenant adds in :func:`preference`: twice the whole
range of the policy's scores, so that it decides and the policy orders the rest."""


@dataclass(frozen=True, slots=True)
class Classes:
    """The classing of one settings: PriorityClass name → its class."""

    settings: TenancySettings
    training: frozenset[str]
    inference: frozenset[str]
    infrastructure: frozenset[str]

    @classmethod
    def of(cls, settings: TenancySettings) -> Classes:
        return cls(
            settings,
            frozenset(settings.training_priority_classes),
            frozenset(settings.inference_priority_classes),
            frozenset(settings.infrastructure_namespaces),
        )

    @property
    def key(self) -> tuple[frozenset[str], ...]:
        """What :func:`occupancy` depends on of the classing."""
        return (self.training, self.inference, self.infrastructure)

    def classes(self, priority_class: str) -> frozenset[str]:
        """The classes a pod of ``priority_class`` counts as."""
        if priority_class in self.training:
            return frozenset({TRAINING})
        if priority_class in self.inference:
            return frozenset({INFERENCE})
        return UNCLASSED

    @property
    def exclusive(self) -> bool:
        """Every other tenant is kept apart, whatever its class."""
        return self.settings.rule == "exclusive"

    def apart(self, mine: frozenset[str], theirs: frozenset[str]) -> bool:
        """Under the split rule, whether pods of two tenants of these classes must not share
        a NUMA node: unless both are of one and the same class."""
        return len(mine) > 1 or mine != theirs


@dataclass(frozen=True, slots=True)
class NodeTenancy:
    """What the rule finds on one node for one pod."""

    zones: tuple[tuple[int, int], ...]
    """Each NUMA node's id and CPUs (one zone, the whole node, where the report has none)."""
    kept_apart: frozenset[int]
    """NUMA nodes hosting a tenant the pod must be kept apart from."""
    tenants: int
    """How many such tenants are on the node."""
    same: frozenset[int]
    """NUMA nodes hosting the pod's own tenant."""
    pinned: bool
    """kubelet will put the pod on one NUMA node."""
    open: tuple[int, ...]
    """NUMA nodes the pod could be given: free of those tenants and, for a pinned pod,
    with enough CPUs; for any other pod all of them, or none."""


Zone = tuple[int, int, frozenset[str], frozenset[tuple[str, frozenset[str]]]]
"""A NUMA node's id, its CPUs, the tenants with pods on it, and each of those tenants with
the classes of a pod of theirs there."""


def occupancy(state: ClusterState, i: int, classes: Classes) -> tuple[Zone, ...]:
    """Node ``i``'s NUMA nodes and who is on them (one zone, the whole node, where its report
    has none; a pod not placed, or placed on NUMA nodes the report does not have, on every
    one). Worked out once per change of the node's pods or report, not per question: kept
    in ``state.tenancy_memo`` under the classing it was worked out by."""
    memo = state.tenancy_memo[i]
    if isinstance(memo, tuple) and memo[0] == classes.key:
        found: tuple[Zone, ...] = memo[1]
        return found
    zones = state.numa_cpus[i] or ((0, int(state.cpu_cap[i]) // 1000),)
    ids = frozenset([z for z, _ in zones])
    tenants: dict[int, set[str]] = {z: set() for z in ids}
    kinds: dict[int, set[tuple[str, frozenset[str]]]] = {z: set() for z in ids}
    placed = state.pod_numa[i]
    for uid, (namespace, priority_class) in state.occupants[i].items():
        if namespace in classes.infrastructure:
            continue
        where = placed.get(uid)
        on = ids if where is None or not ids.issuperset(where) else where
        kind = (namespace, classes.classes(priority_class))
        for z in on:
            tenants[z].add(namespace)
            kinds[z].add(kind)
    found = tuple([(z, cpus, frozenset(tenants[z]), frozenset(kinds[z])) for z, cpus in zones])
    state.tenancy_memo[i] = (classes.key, found)
    return found


def judge(state: ClusterState, i: int, pod: PodRequest, classes: Classes) -> NodeTenancy:
    """The rule's view of node ``i`` for ``pod`` (a pod of an infrastructure namespace
    has no tenant: call only for others)."""
    zones = occupancy(state, i, classes)
    tenant, mine = pod.namespace, classes.classes(pod.priority_class)
    kept: set[int] = set()
    same: set[int] = set()
    others: set[str] = set()
    for z, _, tenants, kinds in zones:
        if tenant in tenants:
            same.add(z)
            if len(tenants) == 1:
                continue  # its own tenant alone
        elif not tenants:
            continue
        if classes.exclusive:
            kept.add(z)
            others.update(tenants)
            continue
        for namespace, theirs in kinds:
            if namespace != tenant and classes.apart(mine, theirs):
                kept.add(z)
                others.add(namespace)
    others.discard(tenant)
    pinned = pod.numa_aligned and state.topology_policy[i] in ALIGNING_POLICIES
    if pinned:
        free = tuple([z for z, cpus, _, _ in zones if z not in kept and cpus * 1000 >= pod.cpu_m])
    else:
        free = () if kept else tuple([z for z, _, _, _ in zones])
    sizes = tuple([(z, cpus) for z, cpus, _, _ in zones])
    return NodeTenancy(sizes, frozenset(kept), len(others), frozenset(same), pinned, free)


def reason(found: NodeTenancy, pod: PodRequest, rule: str) -> str:
    """Why the node is refused: the rule, and how many tenants, never which."""
    tenants = f"{found.tenants} tenant{'s' * (found.tenants != 1)} kept apart"
    where = f"{len(found.kept_apart)} of {len(found.zones)} NUMA nodes"
    if found.pinned:
        return (
            f"NUMA tenancy ({rule}): no NUMA node with {pod.cpu_m // 1000} CPUs is free of"
            f" other tenants' pods ({tenants}, on {where})"
        )
    return (
        f"NUMA tenancy ({rule}): the pod would run on every NUMA node (not pinned to one),"
        f" and {where} host other tenants' pods ({tenants})"
    )


def refused(
    state: ClusterState, pod: PodRequest, nodes: npt.NDArray[np.int64], settings: TenancySettings
) -> tuple[npt.NDArray[np.bool_], dict[int, str]] | None:
    """Per node of ``nodes``, whether the rule refuses ``pod`` there, and why (by row);
    None with no rule, or for a pod of an infrastructure namespace."""
    if settings.rule == "none" or pod.namespace in settings.infrastructure_namespaces:
        return None
    classes = Classes.of(settings)
    fails = np.zeros(len(nodes), dtype=bool)
    why: dict[int, str] = {}
    for k, i in enumerate(nodes.tolist()):
        if not state.occupants[i]:
            continue  # an empty node keeps no one apart
        found = judge(state, i, pod, classes)
        if not found.open:
            fails[k] = True
            why[i] = reason(found, pod, settings.rule)
    return fails, why


def preference(
    state: ClusterState, pod: PodRequest, rows: npt.NDArray[np.int64], settings: TenancySettings
) -> npt.NDArray[np.float64] | None:
    """Per row of ``state``: :data:`PREFER_WEIGHT` where, among ``rows``, a NUMA node the pod
    could be given already hosts its tenant, else 0; None with no rule, the preference
    off, or a pod of an infrastructure namespace."""
    if (
        settings.rule == "none"
        or not settings.prefer_same_tenant
        or pod.namespace in settings.infrastructure_namespaces
    ):
        return None
    classes = Classes.of(settings)
    bonus = np.zeros(len(state), dtype=np.float64)
    for i in np.unique(rows).tolist():
        if state.occupants[i]:
            found = judge(state, i, pod, classes)
            if found.same.intersection(found.open):
                bonus[i] = PREFER_WEIGHT
    return bonus


def explain(
    state: ClusterState, i: int, pod: PodRequest, settings: TenancySettings
) -> dict[str, object] | None:
    """Node ``i``'s NUMA nodes as the rule sees them for ``pod`` (``/debug/explain``);
    None with no rule."""
    if settings.rule == "none":
        return None
    if pod.namespace in settings.infrastructure_namespaces:
        return {"rule": settings.rule, "tenant": None, "verdict": "infrastructure: not judged"}
    classes = Classes.of(settings)
    found = judge(state, i, pod, classes)
    bonus = preference(state, pod, np.array([i]), settings)
    return {
        "rule": settings.rule,
        "tenant": pod.namespace,
        "classes": sorted(classes.classes(pod.priority_class)),
        "pinned": found.pinned,
        "numa_nodes": [
            {
                "node": z,
                "cpus": cpus,
                "kept_apart": z in found.kept_apart,
                "same_tenant": z in found.same,
                "open": z in found.open,
            }
            for z, cpus in found.zones
        ],
        "tenants_kept_apart": found.tenants,
        "verdict": "passes" if found.open else reason(found, pod, settings.rule),
        "same_tenant_bonus": 0.0 if bonus is None else float(bonus[i]),
    }
