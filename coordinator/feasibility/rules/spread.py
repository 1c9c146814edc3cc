"""PodTopologySpread (``whenUnsatisfiable: DoNotSchedule`` only: ``ScheduleAnyway``
scores)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from coordinator.feasibility.objects import Node, Pod, Spread
from coordinator.feasibility.rules.nodeaffinity import matches_node
from coordinator.feasibility.rules.taints import untolerated
from coordinator.feasibility.snapshot import Snapshot
from coordinator.feasibility.verdict import FITS, Verdict, refused


class TopologySpread:
    """The matching pods per domain of each constraint (``podtopologyspread``
    PreFilter state), which pods gone subtract from.

    A node counts when it carries every constraint's topology key, matches the pod's
    required node affinity (``nodeAffinityPolicy: Honor``, the default) and, with
    ``nodeTaintsPolicy: Honor``, has no taint the pod does not tolerate. On such a node,
    a pod counts for a constraint when it is in the pod's namespace, not terminating,
    and the constraint's selector (with ``matchLabelKeys``) matches it."""

    def __init__(self, pod: Pod, snapshot: Snapshot) -> None:
        self.pod = pod
        self.snapshot = snapshot
        self.counts: list[Counter[str]] = [Counter() for _ in pod.spread]
        self.eligible: set[str] = set()
        keys = [c.topology_key for c in pod.spread]
        for node in snapshot.nodes.values() if pod.spread else ():
            if not all(k in node.labels for k in keys):
                continue
            for c, counts in zip(pod.spread, self.counts, strict=True):
                if not self._counts_on(c, node):
                    continue
                self.eligible.add(node.name)
                value = node.labels[c.topology_key]
                counts[value] += sum(
                    1
                    for u in snapshot.on_node.get(node.name, ())
                    if self._counted(c, snapshot.pods[u])
                )

    def _counts_on(self, c: Spread, node: Node) -> bool:
        pod = self.pod
        if c.honor_affinity and not matches_node(pod, node):
            return False
        return not (c.honor_taints and untolerated(pod, node) is not None)

    def _counted(self, c: Spread, other: Pod) -> bool:
        return (
            other.namespace == self.pod.namespace
            and not other.terminating
            and c.selector.matches(other.labels)
        )

    def matters(self, uid: str) -> bool:
        """Whether evicting pod ``uid`` could change the answer."""
        other = self.snapshot.pods[uid]
        return other.node in self.eligible and any(self._counted(c, other) for c in self.pod.spread)

    def judge(self, node: Node, gone: Collection[str]) -> Verdict:
        """``podtopologyspread`` Filter: for every constraint the node carries its
        topology key, and the matching pods in the node's domain, plus one if the pod
        matches the selector itself, less the fewest of any domain, stay within
        ``maxSkew``; the fewest is 0 while fewer domains than ``minDomains`` exist."""
        snapshot = self.snapshot
        for c, counts in zip(self.pod.spread, self.counts, strict=True):
            value = node.labels.get(c.topology_key)
            if value is None:
                return refused(
                    "PodTopologySpread", f"node {node.name} lacks topology key {c.topology_key}"
                )
            left = Counter(counts)
            for uid in gone:
                other = snapshot.pods.get(uid)
                if other is None or other.node not in self.eligible or not self._counted(c, other):
                    continue
                left[snapshot.nodes[other.node].labels[c.topology_key]] -= 1
            fewest = min(left.values(), default=0) if len(left) >= c.min_domains else 0
            own = 1 if c.selector.matches(self.pod.labels) else 0
            skew = left.get(value, 0) + own - fewest
            if skew > c.max_skew:
                return refused(
                    "PodTopologySpread",
                    f"{c.topology_key}={value} would be {skew} over the emptiest domain"
                    f" (maxSkew {c.max_skew})",
                )
        return FITS
