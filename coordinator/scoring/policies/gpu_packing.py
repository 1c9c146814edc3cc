"""``gpu-packing``: the FGD authors' GPU Packing baseline — fill shared GPUs first, then
free GPUs on nodes in use, then empty nodes (fewer GPUs first).

With F the node's fully free GPUs: an untouched node scores ``max(33 − F, F)``; otherwise,
taking the first ``k`` devices in ascending free milli that fit, ``max(50 − #fully free
used, 33)`` if any of them is fully free, else ``max(100 − Σ⌊g·100/1000⌋/10, 50)`` over
them. CPU-only pods score 0 everywhere. Devices: best fit.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from coordinator.scoring.base import Policy
from coordinator.state.cluster import MILLI_PER_GPU, ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "gpu-packing"


class GpuPacking(Policy):
    name = NAME

    def shape_key(self, pod: PodRequest) -> Hashable:
        return (pod.gpus, pod.gpu_milli)

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        if not pod.gpus:
            return 0.0
        gpus = state.gpu_tuple(i)
        fully_free = sum(1 for g in gpus if g == MILLI_PER_GPU)
        if fully_free == len(gpus):
            return float(max(33 - fully_free, fully_free))
        used = [g for g in sorted(gpus) if g >= pod.gpu_milli][: pod.gpus]
        fresh = sum(1 for g in used if g == MILLI_PER_GPU)
        if fresh:
            return float(max(50 - fresh, 33))
        return float(max(100 - sum(g * 100 // MILLI_PER_GPU for g in used) // 10, 50))
