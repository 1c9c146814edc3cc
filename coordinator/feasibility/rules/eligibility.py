"""Whether a pod may preempt at all (``DefaultPreemption``'s
``PodEligibleToPreemptOthers``), and whether it is scheduled at all
(``SchedulingGates``)."""

from __future__ import annotations

from coordinator.feasibility.objects import Pod
from coordinator.feasibility.snapshot import Snapshot


def preemption_barred(pod: Pod, snapshot: Snapshot) -> str | None:
    """Why ``pod`` may not have pods evicted for it, or None when it may:

    * ``preemptionPolicy: Never``: it waits for room, it never takes it;
    * ``schedulingGates``: kube-scheduler does not try to place it until they are gone;
    * it is nominated to a node (``status.nominatedNodeName``) where a pod of lower
      priority is terminating already: the room it was promised is on its way, and
      upstream waits for it rather than evicting more."""
    if pod.preemption_policy == "Never":
        return f"{pod.key} has preemptionPolicy Never"
    if pod.gates:
        return f"{pod.key} has {pod.gates} scheduling gate(s): it is not being scheduled"
    if pod.nominated is not None and pod.nominated in snapshot.nodes:
        for uid in snapshot.on_node.get(pod.nominated, ()):
            other = snapshot.pods[uid]
            if other.terminating and other.priority < pod.priority:
                return (
                    f"{pod.key} is nominated to {pod.nominated}, where {other.key} is"
                    " terminating already"
                )
    return None
