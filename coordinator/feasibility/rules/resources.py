"""NodeResourcesFit."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from coordinator.feasibility.objects import Node, Pod
from coordinator.feasibility.snapshot import Snapshot
from coordinator.feasibility.verdict import FITS, Verdict, refused


def requested(snapshot: Snapshot, node: str) -> dict[str, int]:
    """What the pods bound to ``node`` request together (``NodeInfo.Requested``), with
    ``pods``: how many they are."""
    total: dict[str, int] = {"pods": 0}
    for uid in snapshot.on_node.get(node, ()):
        total["pods"] += 1
        for resource, amount in snapshot.pods[uid].requests.items():
            total[resource] = total.get(resource, 0) + amount
    return total


def without(
    total: Mapping[str, int], snapshot: Snapshot, node: str, gone: Collection[str]
) -> dict[str, int]:
    """``total`` (:func:`requested`) less the pods of ``gone`` bound to ``node``."""
    left = dict(total)
    for uid in gone:
        pod = snapshot.pods.get(uid)
        if pod is None or pod.node != node:
            continue
        left["pods"] -= 1
        for resource, amount in pod.requests.items():
            left[resource] -= amount
    return left


def short(pod: Pod, node: Node, used: Mapping[str, int]) -> dict[str, int]:
    """Resource → how much the pod lacks on ``node`` where ``used`` is requested already
    (``pods``: the pod count). Empty when it fits."""
    lacking = {}
    allowed = node.allocatable.get("pods", 0)
    if used.get("pods", 0) + 1 > allowed:
        lacking["pods"] = used.get("pods", 0) + 1 - allowed
    for resource, wanted in pod.requests.items():
        if resource == "pods" or wanted <= 0:
            continue
        free = node.allocatable.get(resource, 0) - used.get(resource, 0)
        if wanted > free:
            lacking[resource] = wanted - free
    return lacking


def node_resources_fit(pod: Pod, node: Node, used: Mapping[str, int]) -> Verdict:
    """``noderesources`` Fit: the pod count below ``allocatable.pods``, and for every
    resource the pod requests (cpu, memory, ephemeral-storage, hugepages, extended
    resources) what the pods staying there request plus the pod's request within
    ``allocatable``; a resource the node does not offer is 0 there. A pod's request is
    its peak (``PodRequests``: ``max(sum(containers) + sidecars, max(each init container
    + the sidecars started before it))``, pod-level resources, plus ``overhead``,
    :func:`common.podspec.requests`), for the pods staying as for the pod."""
    lacking = short(pod, node, used)
    if lacking:
        what = ", ".join(f"{k} (short {v})" for k, v in sorted(lacking.items()))
        return refused("NodeResourcesFit", f"insufficient {what} on {node.name}")
    return FITS
