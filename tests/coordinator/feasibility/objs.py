"""Pod and Node objects as the API server sends them, for the feasibility model's tests."""

from __future__ import annotations

from typing import Any

from coordinator.feasibility import Node, Pod, Snapshot, node_of, pod_of


def node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
) -> Node:
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return node_of(
        {
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            },
            "spec": spec,
            "status": {"allocatable": allocatable},
        }
    )


def pod(
    name: str,
    *,
    on: str | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    namespace: str = "ns",
    labels: dict[str, str] | None = None,
    priority: int = 0,
    **spec: Any,
) -> Pod:
    """A pod with one container requesting ``cpu``/``memory``; ``spec`` keys go into its
    spec as given (``tolerations=[...]``, ``affinity={...}`` …); ``status`` and
    ``deletionTimestamp`` are taken out for the status and metadata."""
    status = spec.pop("status", {})
    deleting = spec.pop("deletionTimestamp", None)
    containers = spec.pop(
        "containers",
        [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    )
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": dict(labels or {}),
    }
    if deleting:
        meta["deletionTimestamp"] = deleting
    body = {"priority": priority, "containers": containers, **spec}
    if on:
        body["nodeName"] = on
    return pod_of({"metadata": meta, "spec": body, "status": status})


def snapshot(nodes: list[Node], pods: list[Pod] | None = None) -> Snapshot:
    return Snapshot({n.name: n for n in nodes}, {p.uid: p for p in pods or []})
