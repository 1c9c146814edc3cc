"""``most-allocated``: kube-scheduler's MostAllocated NodeResourcesFit strategy (packs).

Per resource ``requested·100/capacity`` (requested capped at capacity, integer
arithmetic), requested including the incoming pod, averaged with the configured weights.
"""

from __future__ import annotations

from typing import Final

from coordinator.scoring.base import PodRequest, Policy
from coordinator.scoring.resources import ResourceWeights, requested_and_capacity
from coordinator.state.cluster import ClusterState

NAME: Final = "most-allocated"


class MostAllocated(Policy):
    name = NAME

    def __init__(self, weights: ResourceWeights) -> None:
        self.weights = weights

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        total = weight_sum = 0
        for weight, requested, capacity in requested_and_capacity(state, i, pod, self.weights):
            total += min(requested, capacity) * 100 // capacity * weight
            weight_sum += weight
        return float(total // weight_sum) if weight_sum else 0.0
