"""When the extender's filter may answer the one node Stowage ranks first.

kube-scheduler calls an extender twice per pod — filter, then prioritize — and adds
prioritize's score × weight × 10 to its plugins' scores. When the filter leaves a single
node, kube-scheduler skips scoring altogether and binds there: one call instead of two,
and no plugin scoring. That gives the same node whenever the plugins' scores could not
have overturned Stowage's first choice. At the shipped weight (20: each point of
Stowage's score is worth 200) the plugins that score every pod — resource fit,
balanced allocation, image locality — tell nodes apart by less than that; what can
outweigh it are the soft placement rules a pod or node asks for:

* preferred node affinity, preferred pod affinity or anti-affinity;
* topology spread constraints with ``whenUnsatisfiable: ScheduleAnyway``, and the
  default spreading kube-scheduler applies to the pods of ReplicaSets, StatefulSets and
  ReplicationControllers;
* a ``PreferNoSchedule`` taint on an offered node.

A pod with any of these, or offered such a node, gets the whole feasible list as before
and its prioritize call. So does a pod for which Stowage has no opinion (every offered
node unknown or scored alike at 0): kube-scheduler's own scoring then decides, as it
does today. Not seen from the pod alone: other pods' preferred (anti-)affinity towards
it (InterPodAffinity scores those symmetrically). Switched off with
``extender.pick_in_filter: false``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np

from coordinator.live import FilterResult, LiveCluster
from coordinator.state.podrequest import PodRequest

SPREAD_BY_DEFAULT: Final = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
"""Owners whose pods kube-scheduler spreads by default (``PodTopologySpread``'s system
default constraints, ``ScheduleAnyway`` by hostname and zone)."""


def soft_preference(pod: Mapping[str, Any]) -> str | None:
    """What in the Pod object asks kube-scheduler's scoring for a say, or None."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    for kind in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
        if (affinity.get(kind) or {}).get("preferredDuringSchedulingIgnoredDuringExecution"):
            return f"preferred {kind}"
    for constraint in spec.get("topologySpreadConstraints") or ():
        if isinstance(constraint, Mapping) and constraint.get("whenUnsatisfiable") != (
            "DoNotSchedule"
        ):
            return "topology spread constraint, ScheduleAnyway"
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("kind") in SPREAD_BY_DEFAULT:
            return f"owned by a {owner.get('kind')} (spread by default)"
    return None


def pick(
    cluster: LiveCluster,
    pod_object: Mapping[str, Any],
    pod: PodRequest,
    offered: Sequence[str],
    result: FilterResult,
) -> str | None:
    """The node filter should answer alone (of the nodes of ``offered`` that ``result``
    passed), or None to answer every passing node. Scored over ``offered``, the list
    kube-scheduler sends pod after pod, whose rows are remembered; the passing ones are
    told by ``result``'s mask, in the offered order, with no lookup per name."""
    passed = result.passed
    if not cluster.settings.extender.pick_in_filter or len(result.passing) < 2 or passed is None:
        return None
    if soft_preference(pod_object) is not None:
        return None
    if cluster.soft_tainted and not cluster.soft_tainted.isdisjoint(result.passing):
        return None
    scores = np.where(passed, cluster.prioritize_each(pod, offered), -1)
    best = int(np.argmax(scores))
    return offered[best] if scores[best] > 0 else None
