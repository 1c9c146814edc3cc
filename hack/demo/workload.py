"""What the demo replays: a sample of a trace's GPU nodes and its pods as Kubernetes objects.

The sample keeps the trace's mix of node kinds (GPU model and count): each kind gets its
share of the sample by largest remainder, its nodes drawn at random. The pods are the
trace's own, shuffled and cloned or dropped until they ask for the wanted share of the
sample's GPUs (:func:`hack.sim.arrivals.build`, as the simulator replays them).

A node carries its GPUs as ``nvidia.com/gpu`` and their model in the GPU feature discovery
label; a pod asks for whole GPUs as ``nvidia.com/gpu`` and for a share of one GPU with
``stowage.io/gpu-milli`` (no ``nvidia.com/gpu`` then), as the coordinator reads them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from common import podspec
from coordinator.state.cluster import MILLI_PER_GPU, NodeSpec
from coordinator.state.kubeobjects import GANG_LABEL, GANG_MIN_KEY, GPU_MILLI, GPU_MODELS
from coordinator.state.podrequest import PodRequest
from hack.demo.schedcache import MAX_PODS, gpu_request

GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
REPLAY_LABEL: Final = "stowage.io/demo"
"""On the replayed pods (``replay``), so ``kubectl get pods -l stowage.io/demo=replay``
tells them from pods created by hand."""
SCHEDULER_NAME: Final = "stowage-scheduler"


def sample_nodes(nodes: Sequence[NodeSpec], count: int, seed: int) -> list[NodeSpec]:
    """``count`` of ``nodes`` (all of them if fewer), keeping the mix of GPU models and
    counts; in the trace's order."""
    if count >= len(nodes):
        return list(nodes)
    rng = np.random.default_rng(seed)
    kinds: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, node in enumerate(nodes):
        kinds[(node.gpu_model, node.gpus)].append(i)
    keys = sorted(kinds)
    exact = np.array([len(kinds[k]) * count / len(nodes) for k in keys])
    share = np.floor(exact).astype(np.int64)
    remainder = exact - share
    for j in np.argsort(-remainder, kind="stable")[: count - int(share.sum())]:
        share[j] += 1
    chosen: list[int] = []
    for key, take in zip(keys, share.tolist(), strict=True):
        chosen.extend(rng.choice(kinds[key], size=take, replace=False).tolist())
    return [nodes[i] for i in sorted(chosen)]


def node_fields(spec: NodeSpec) -> dict[str, Any]:
    """Keyword arguments of ``KubeApi.add_node`` for a node of ``spec``'s size."""
    capacity = {"cpu": f"{spec.cpu_m}m", "memory": str(spec.mem_b), "pods": str(MAX_PODS)}
    labels = {}
    if spec.gpus:
        capacity[podspec.GPU] = str(spec.gpus)
        labels[GPU_PRODUCT_LABEL] = spec.gpu_model
    return {"capacity": capacity, "labels": labels}


def pod_object(pod: PodRequest, namespace: str) -> dict[str, Any]:
    """The Pod a user would create for ``pod`` (one container), scheduled by Stowage's
    scheduler."""
    requests: dict[str, str] = {"cpu": f"{pod.cpu_m}m", "memory": str(pod.mem_b)}
    limits: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if gpu_request(pod):
        requests[podspec.GPU] = limits[podspec.GPU] = str(gpu_request(pod))
    if pod.gpus and pod.gpu_milli < MILLI_PER_GPU:
        annotations[GPU_MILLI] = str(pod.gpu_milli)
    if pod.gpus and pod.gpu_models:
        annotations[GPU_MODELS] = "|".join(sorted(pod.gpu_models))
    labels = {REPLAY_LABEL: "replay"}
    if pod.gang is not None:  # "namespace/name": the label names it in the pod's namespace
        labels[GANG_LABEL] = pod.gang.rpartition("/")[2]
    if pod.gang_size is not None:
        annotations[GANG_MIN_KEY] = str(pod.gang_size)
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }
