"""``gpu-clustering``: the FGD authors' GPU Clustering baseline — keep pods of one GPU kind
(shared, 1-GPU, 2-GPU …) together.

With ``base = 25·(8000 − free GPU milli)/8000`` (integer): ``base + 75`` on a node that
hosts only this kind, ``base + 50`` if it hosts this kind among others, ``base + 25`` if it
hosts no GPU pod, ``base`` if only other kinds; 0 everywhere for CPU-only pods. Devices:
best fit.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from coordinator.scoring.base import Policy
from coordinator.scoring.policies.best_fit import MAX_SPEC_GPU_MILLI
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "gpu-clustering"


class GpuClustering(Policy):
    name = NAME

    def shape_key(self, pod: PodRequest) -> Hashable:
        return pod.tag

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        tag = pod.tag
        if tag is None:
            return 0.0
        # Go's integer division truncates toward zero (negative past 8 free GPUs).
        base = int(25 * (MAX_SPEC_GPU_MILLI - state.gpu_idle_of(i)) / MAX_SPEC_GPU_MILLI)
        tags = state.gpu_tags[i]
        if not tags:
            return float(base + 25)
        if tag in tags:
            return float(base + (75 if len(tags) == 1 else 50))
        return float(base)
