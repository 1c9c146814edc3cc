"""TaintToleration."""

from __future__ import annotations

from coordinator.feasibility.objects import Node, Pod
from coordinator.feasibility.verdict import FITS, Verdict, refused

FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def untolerated(pod: Pod, node: Node) -> str | None:
    """The first taint of ``node`` with a filtering effect that no toleration of ``pod``
    tolerates, as ``key=value:effect``; None when there is none."""
    for taint in node.taints:
        if taint.effect in FILTERED_EFFECTS and not any(
            t.tolerates(taint) for t in pod.tolerations
        ):
            return f"{taint.key}={taint.value}:{taint.effect}"
    return None


def taint_toleration(pod: Pod, node: Node) -> Verdict:
    """``tainttoleration``: every ``NoSchedule`` and ``NoExecute`` taint must be
    tolerated (``PreferNoSchedule`` only scores). A toleration matches by
    ``Toleration.ToleratesTaint``: its effect (empty: all), its key (empty with
    ``Exists``: every key), then ``Exists`` or ``Equal`` values."""
    taint = untolerated(pod, node)
    if taint is not None:
        return refused(
            "TaintToleration", f"node {node.name} has taint {taint} the pod does not tolerate"
        )
    return FITS
