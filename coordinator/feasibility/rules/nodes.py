"""NodeUnschedulable and NodeName."""

from __future__ import annotations

from coordinator.feasibility.objects import UNSCHEDULABLE_TAINT, Node, Pod, Taint
from coordinator.feasibility.verdict import FITS, Verdict, refused

_CORDON = Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule")


def node_unschedulable(pod: Pod, node: Node) -> Verdict:
    """``nodeunschedulable``: a cordoned node (``spec.unschedulable``) takes only pods
    tolerating the ``node.kubernetes.io/unschedulable:NoSchedule`` taint."""
    if node.unschedulable and not any(t.tolerates(_CORDON) for t in pod.tolerations):
        return refused("NodeUnschedulable", f"node {node.name} is unschedulable (cordoned)")
    return FITS


def node_name(pod: Pod, node: Node) -> Verdict:
    """``nodename``: a pod naming a node in ``spec.nodeName`` fits only there."""
    if pod.node is not None and pod.node != node.name:
        return refused("NodeName", f"the pod names node {pod.node}")
    return FITS
