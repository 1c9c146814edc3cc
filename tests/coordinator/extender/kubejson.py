"""Nodes and Pods as JSON, the way the API server (and so both schedulers) writes them,
and the cluster the extender tests start from.

Cluster (all sized by ``status.allocatable``; no agent has reported, signals unknown):

========  =====  =======  ==========================
node      CPUs   memory   GPUs
========  =====  =======  ==========================
node-a    8      32Gi     –
node-b    16     64Gi     –
node-c    32     128Gi    –
gpu-1     64     512Gi    8 × NVIDIA-A100-SXM4-80GB
gpu-2     2      16Gi     4 × NVIDIA-A100-SXM4-80GB
========  =====  =======  ==========================
"""

from __future__ import annotations

from typing import Any

MIB = 2**20
GIB = 2**30
A100 = "NVIDIA-A100-SXM4-80GB"
POD_UID = "5b1e0d8e-8d64-4b43-9d0c-2f6c1a0e7a11"


def node(name: str, cpu: str, memory: str, gpus: int = 0) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
        labels["nvidia.com/gpu.product"] = A100
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


NODES = {
    "node-a": node("node-a", "8", "32Gi"),
    "node-b": node("node-b", "16", "64Gi"),
    "node-c": node("node-c", "32", "128Gi"),
    "gpu-1": node("gpu-1", "64", "512Gi", gpus=8),
    "gpu-2": node("gpu-2", "2", "16Gi", gpus=4),
}


def pod(
    cpu: str = "2",
    memory: str = "4Gi",
    gpus: int = 0,
    *,
    name: str = "p",
    uid: str = POD_UID,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pending pod with one container requesting ``cpu``/``memory`` (and ``gpus``)."""
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
        "status": {"phase": "Pending"},
    }
