"""``least-allocated``: kube-scheduler's default NodeResourcesFit strategy (spreads pods).

Per resource ``(capacity − requested)·100/capacity`` in integer arithmetic, requested
including the incoming pod, averaged with the configured weights over resources the node
has. A reference point for what Stowage replaces, not a packing policy.
"""

from __future__ import annotations

from typing import Final

from coordinator.scoring.base import PodRequest, Policy
from coordinator.scoring.resources import ResourceWeights, requested_and_capacity
from coordinator.state.cluster import ClusterState

NAME: Final = "least-allocated"


class LeastAllocated(Policy):
    name = NAME

    def __init__(self, weights: ResourceWeights) -> None:
        self.weights = weights

    def score(self, state: ClusterState, i: int, pod: PodRequest) -> float:
        total = weight_sum = 0
        for weight, requested, capacity in requested_and_capacity(state, i, pod, self.weights):
            part = 0 if requested > capacity else (capacity - requested) * 100 // capacity
            total += part * weight
            weight_sum += weight
        return float(total // weight_sum) if weight_sum else 0.0
