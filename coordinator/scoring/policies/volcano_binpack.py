"""``volcano-binpack``: Volcano's binpack plugin (``pkg/scheduler/plugins/binpack``).

``100 · weight · Σ_r w_r·(request_r + used_r)/allocatable_r / Σ_r w_r`` over the resources
the pod requests that have a weight; 0 for the whole node if any of them would not fit.
Defaults as Volcano's: every weight 1, GPU not weighted unless configured.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from coordinator.scoring.base import Policy
from coordinator.scoring.resources import ResourceWeights, capacity_and_used, request_of
from coordinator.state.cluster import ClusterState
from coordinator.state.podrequest import PodRequest

NAME: Final = "volcano-binpack"


class VolcanoBinpack(Policy):
    name = NAME

    def __init__(self, weights: ResourceWeights, weight: int = 1) -> None:
        self.weights = weights
        self.weight = weight

    def shape_key(self, pod: PodRequest) -> Hashable:
        return (pod.cpu_m, pod.mem_b, pod.gpu_total_milli)

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        total = 0.0
        weight_sum = 0
        for name, weight in self.weights.weights.items():
            request = request_of(pod, name)
            if request == 0:
                continue
            capacity, used = capacity_and_used(state, i, name)
            weight_sum += weight
            if capacity == 0 or weight == 0:
                continue
            if request + used > capacity:
                return 0.0  # Volcano scores the whole node 0 when one resource does not fit
            total += (request + used) * weight / capacity
        if weight_sum:
            total /= weight_sum
        return total * 100 * self.weight
