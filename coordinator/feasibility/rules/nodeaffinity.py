"""NodeAffinity."""

from __future__ import annotations

from coordinator.feasibility.objects import Node, Pod
from coordinator.feasibility.verdict import FITS, Verdict, refused


def matches_node(pod: Pod, node: Node) -> bool:
    """``nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)``: every ``nodeSelector``
    label, and (when given) at least one required ``nodeSelectorTerm``, whose
    ``matchExpressions`` (In, NotIn, Exists, DoesNotExist, Gt, Lt) and ``matchFields``
    (``metadata.name``) all hold."""
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    terms = pod.node_terms
    return terms is None or any(t.matches(node.name, node.labels) for t in terms)


def node_affinity(pod: Pod, node: Node) -> Verdict:
    """``nodeaffinity`` Filter: the pod's required node affinity and node selector."""
    if not matches_node(pod, node):
        return refused(
            "NodeAffinity", f"node {node.name} does not match the pod's node selector or affinity"
        )
    return FITS
