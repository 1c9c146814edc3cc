"""InterPodAffinity (required terms only: preferred ones score)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from coordinator.feasibility.objects import Node, Pod, PodTerm
from coordinator.feasibility.snapshot import Snapshot
from coordinator.feasibility.verdict import FITS, Verdict, refused


class InterPod:
    """The counts the filter judges by, for one incoming pod over a snapshot
    (``interpodaffinity`` PreFilter state), which pods gone subtract from.

    * ``existing``: (key, value) → bound pods whose anti-affinity term selects the pod,
      by their node's value of the term's topology key;
    * ``anti[i]``, ``affinity[i]``: value → bound pods the pod's i-th anti-affinity or
      affinity term selects, by their node's value of its topology key.

    A pod on a node without the topology key counts nowhere, as upstream."""

    def __init__(self, pod: Pod, snapshot: Snapshot) -> None:
        self.pod = pod
        self.snapshot = snapshot
        self.existing: Counter[tuple[str, str]] = Counter()
        self._existing_by: dict[str, list[tuple[str, str]]] = {}
        for uid in snapshot.anti:
            other = snapshot.pods[uid]
            labels = _labels(snapshot, other)
            for term in other.anti_affinity:
                if term.selects(pod) and term.topology_key in labels:
                    pair = (term.topology_key, labels[term.topology_key])
                    self.existing[pair] += 1
                    self._existing_by.setdefault(uid, []).append(pair)
        self.anti = [self._count(t) for t in pod.anti_affinity]
        self.affinity = [self._count(t) for t in pod.affinity]

    def _count(self, term: PodTerm) -> Counter[str]:
        found: Counter[str] = Counter()
        for other in self.snapshot.pods.values():
            if term.selects(other):
                value = _labels(self.snapshot, other).get(term.topology_key)
                if value is not None:
                    found[value] += 1
        return found

    def matters(self, uid: str) -> bool:
        """Whether evicting pod ``uid`` could change the answer."""
        other = self.snapshot.pods[uid]
        return uid in self._existing_by or any(t.selects(other) for t in self.pod.anti_affinity)

    def judge(self, node: Node, gone: Collection[str]) -> Verdict:
        """``interpodaffinity`` Filter, in its order: no bound pod's required
        anti-affinity selects the pod within the node's domain; none of the pod's
        anti-affinity terms selects a bound pod within it; every affinity term selects
        one within it (the node must carry each term's topology key) — unless no bound
        pod anywhere matches any of its affinity terms and the pod matches all of them
        itself (the first pod of a group that attracts itself)."""
        pod, labels = self.pod, node.labels
        gone_pods = [p for u in gone if (p := self.snapshot.pods.get(u)) is not None]
        existing = Counter(self.existing)
        for uid in gone:
            existing.subtract(self._existing_by.get(uid, ()))
        for (key, value), count in existing.items():
            if count > 0 and labels.get(key) == value:
                return refused(
                    "InterPodAffinity", f"a pod near {node.name} has anti-affinity to the pod"
                )
        for term, counts in zip(pod.anti_affinity, self.anti, strict=True):
            domain = labels.get(term.topology_key)
            if domain is not None and counts[domain] - self._lost(term, domain, gone_pods) > 0:
                return refused(
                    "InterPodAffinity", f"the pod's anti-affinity selects a pod near {node.name}"
                )
        if not pod.affinity:
            return FITS
        left = [
            Counter({v: c - self._lost(t, v, gone_pods) for v, c in counts.items()})
            for t, counts in zip(pod.affinity, self.affinity, strict=True)
        ]
        satisfied = True
        for term, counts in zip(pod.affinity, left, strict=True):
            domain = labels.get(term.topology_key)
            if domain is None:
                return refused(
                    "InterPodAffinity", f"node {node.name} lacks topology key {term.topology_key}"
                )
            satisfied = satisfied and counts[domain] > 0
        if satisfied:
            return FITS
        nobody = all(c <= 0 for counts in left for c in counts.values())
        if nobody and all(t.selects(pod) for t in pod.affinity):
            return FITS
        return refused("InterPodAffinity", f"no pod the pod's affinity selects is near {node.name}")

    def _lost(self, term: PodTerm, value: str, gone: list[Pod]) -> int:
        return sum(
            1
            for p in gone
            if term.selects(p) and _labels(self.snapshot, p).get(term.topology_key) == value
        )


def _labels(snapshot: Snapshot, pod: Pod) -> Mapping[str, str]:
    """The labels of the node ``pod`` is bound to; none when it is not known."""
    node = snapshot.nodes.get(pod.node or "")
    return node.labels if node is not None else {}
