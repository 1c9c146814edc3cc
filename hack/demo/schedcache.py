"""The demo scheduler's view of the cluster: what kube-scheduler's cache holds per node,
over the engine's :class:`ClusterState` (which also keeps which GPU devices each pod took,
so the demo can measure GPU fragmentation as FGD does).

kube-scheduler counts a pod's GPUs only as the ``nvidia.com/gpu`` it requests: a pod that
shares a GPU (``stowage.io/gpu-milli``) requests none, so its own fit filter never stops
it — which GPU has room for the share is for the extender (or a sharing-aware plugin) to
judge. A pod's devices are chosen as the coordinator counts them for a bound pod (the
most-used device that still has room, :func:`best_fit_devices`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from coordinator.scoring import capacity
from coordinator.scoring.base import best_fit_devices
from coordinator.state.cluster import ClusterState, NodeSpec, Placement
from coordinator.state.podrequest import PodRequest
from hack.demo import kubescore

MAX_PODS: Final = 110
"""Pods per node (kubelet's default ``maxPods``), as every demo node advertises."""


def gpu_request(pod: PodRequest) -> int:
    """The ``nvidia.com/gpu`` the pod requests (none for a shared GPU)."""
    return 0 if pod.sharing else pod.gpus


class SchedulerCache:
    """Per node: allocatable, what bound pods request (as written and as LeastAllocated
    counts them), their devices; and each bound pod, by key, to give it back."""

    def __init__(self, specs: Sequence[NodeSpec]) -> None:
        self.state = ClusterState(specs)
        n = len(specs)
        self.cpu_nonzero = np.zeros(n, dtype=np.int64)
        self.mem_nonzero = np.zeros(n, dtype=np.int64)
        self.gpu_requested = np.zeros(n, dtype=np.int64)
        self.pods = np.zeros(n, dtype=np.int64)
        self.bound: dict[str, tuple[PodRequest, Placement]] = {}

    def __len__(self) -> int:
        return len(self.state)

    def fits(self, pod: PodRequest) -> npt.NDArray[np.bool_]:
        """kube-scheduler's NodeResourcesFit filter: CPU, memory, ``nvidia.com/gpu`` and
        the pod count, against allocatable minus what bound pods request."""
        s = self.state
        return (
            (s.cpu_free >= pod.cpu_m)
            & (s.mem_free >= pod.mem_b)
            & (s.gpu_count - self.gpu_requested >= gpu_request(pod))
            & (self.pods < MAX_PODS)
        )

    def has_room(self, pod: PodRequest) -> npt.NDArray[np.bool_]:
        """Whether each node has room for the pod device by device, the GPU model
        included: what a GPU-sharing-aware filter admits (the engine's capacity check)."""
        return capacity.room(self.state, pod, slice(None)).fits(pod)

    def plugin_scores(self, pod: PodRequest, nodes: npt.NDArray[np.int64]) -> kubescore.IntArray:
        """LeastAllocated + BalancedAllocation (weight 1 each) of ``nodes`` for the pod."""
        s = self.state
        cpu_alloc, mem_alloc = s.cpu_cap[nodes], s.mem_cap[nodes]
        cpu_nz, mem_nz = kubescore.non_zero(pod.cpu_m, pod.mem_b)
        least = kubescore.least_allocated(
            (self.cpu_nonzero[nodes] + cpu_nz, self.mem_nonzero[nodes] + mem_nz),
            (cpu_alloc, mem_alloc),
        )
        if not pod.cpu_m and not pod.mem_b:
            return least  # BalancedAllocation skips a pod that requests nothing
        used_cpu = cpu_alloc - s.cpu_free[nodes]
        used_mem = mem_alloc - s.mem_free[nodes]
        balanced = kubescore.balanced_allocation(
            (used_cpu + pod.cpu_m, used_mem + pod.mem_b), (cpu_alloc, mem_alloc)
        )
        out: kubescore.IntArray = least + balanced
        return out

    def bind(self, key: str, pod: PodRequest, i: int) -> Placement:
        """Count the pod on node ``i``."""
        devices = best_fit_devices(self.state.gpu_free[i], pod.gpus, pod.gpu_milli)
        placement = Placement(i, devices)
        self.state.allocate(placement, pod.cpu_m, pod.mem_b, pod.gpu_milli, pod.tag)
        self._count(pod, i, +1)
        self.bound[key] = (pod, placement)
        return placement

    def release(self, key: str) -> None:
        """Give back what the pod ``key`` held (it was deleted)."""
        pod, placement = self.bound.pop(key)
        milli = pod.gpu_milli if placement.devices else 0
        self.state.release(placement, pod.cpu_m, pod.mem_b, milli, pod.tag)
        self._count(pod, placement.node, -1)

    def _count(self, pod: PodRequest, i: int, sign: int) -> None:
        cpu_nz, mem_nz = kubescore.non_zero(pod.cpu_m, pod.mem_b)
        self.cpu_nonzero[i] += sign * cpu_nz
        self.mem_nonzero[i] += sign * mem_nz
        self.gpu_requested[i] += sign * gpu_request(pod)
        self.pods[i] += sign
