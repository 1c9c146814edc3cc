"""The question every eviction decision asks: could pod P run on node N if pods V were
gone?

:class:`Question` answers it for one pod over one :class:`Snapshot`, for as many nodes
and sets V as the caller asks: what does not depend on V (the node's own fields) is
judged once per node, the cluster-wide counts (inter-pod affinity, topology spread)
once per question, and each set only subtracts its pods. The filters run in
kube-scheduler's order, and the first that refuses is the answer.

Where the model cannot judge the pod (volumes, DRA claims, a field it could not read)
every answer is *unjudgeable*, and nothing may be planned on it.
"""

from __future__ import annotations

from collections.abc import Collection

from coordinator.feasibility.objects import Pod
from coordinator.feasibility.rules import eligibility, nodeaffinity, nodes, ports, resources, taints
from coordinator.feasibility.rules.interpod import InterPod
from coordinator.feasibility.rules.spread import TopologySpread
from coordinator.feasibility.snapshot import Snapshot
from coordinator.feasibility.verdict import FITS, Verdict, unjudgeable

STATIC_RULES = (
    nodes.node_unschedulable,
    nodes.node_name,
    taints.taint_toleration,
    nodeaffinity.node_affinity,
)
"""The filters that read only the pod and the node: evicting pods changes nothing."""


class Question:
    """ "Could ``pod`` run on node N if pods V were gone?" over ``snapshot``."""

    def __init__(self, pod: Pod, snapshot: Snapshot) -> None:
        self.pod = pod
        self.snapshot = snapshot
        self._static: dict[str, Verdict] = {}
        self._interpod = (
            InterPod(pod, snapshot) if pod.affinity or pod.anti_affinity or snapshot.anti else None
        )
        self._spread = TopologySpread(pod, snapshot) if pod.spread else None

    def barred(self) -> str | None:
        """Why the pod may not preempt at all (:mod:`.rules.eligibility`); None if it may."""
        return eligibility.preemption_barred(self.pod, self.snapshot)

    def static(self, node: str) -> Verdict:
        """The answer of the filters no eviction changes (the node is cordoned, tainted,
        not selected …); fits when none refuses."""
        found = self._static.get(node)
        if found is None:
            found = self._static[node] = self._judge_static(node)
        return found

    def _judge_static(self, name: str) -> Verdict:
        if self.pod.unjudgeable is not None:
            return unjudgeable(self.pod.unjudgeable)
        node = self.snapshot.nodes.get(name)
        if node is None:
            return unjudgeable(f"node {name} is not known")
        for rule in STATIC_RULES:
            verdict = rule(self.pod, node)
            if not verdict.fits:
                return verdict
        return FITS

    def without(self, node: str, gone: Collection[str] = ()) -> Verdict:
        """The answer on ``node`` with the pods of ``gone`` (uids) evicted."""
        verdict = self.static(node)
        if not verdict.fits:
            return verdict
        info, snapshot = self.snapshot.nodes[node], self.snapshot
        verdict = ports.node_ports(self.pod, info, snapshot, gone)
        if not verdict.fits:
            return verdict
        verdict = resources.node_resources_fit(self.pod, info, self._used(node, gone))
        if not verdict.fits:
            return verdict
        if self._interpod is not None:
            verdict = self._interpod.judge(info, gone)
            if not verdict.fits:
                return verdict
        if self._spread is not None:
            return self._spread.judge(info, gone)
        return FITS

    def short(self, node: str, gone: Collection[str] = ()) -> dict[str, int]:
        """Resource → how much the pod lacks on ``node`` with ``gone`` evicted
        (``pods``: the pod count)."""
        return resources.short(self.pod, self.snapshot.nodes[node], self._used(node, gone))

    def matters(self, uid: str) -> bool:
        """Whether evicting bound pod ``uid`` could change a verdict other than by what it
        requests: it holds a host port the pod wants, an anti-affinity term involves it,
        or it counts for one of the pod's spread constraints."""
        other = self.snapshot.pods[uid]
        return (
            ports.holds_port_of(self.pod, other)
            or (self._interpod is not None and self._interpod.matters(uid))
            or (self._spread is not None and self._spread.matters(uid))
        )

    def _used(self, node: str, gone: Collection[str]) -> dict[str, int]:
        memo = self.snapshot.requested
        total = memo.get(node)
        if total is None:
            total = memo[node] = resources.requested(self.snapshot, node)
        return resources.without(total, self.snapshot, node, gone) if gone else total


def could_run(pod: Pod, node: str, snapshot: Snapshot, gone: Collection[str] = ()) -> Verdict:
    """One answer: could ``pod`` run on ``node`` of ``snapshot`` with ``gone`` evicted?"""
    return Question(pod, snapshot).without(node, gone)
